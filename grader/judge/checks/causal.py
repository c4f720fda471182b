"""Checks shared by the causal modules of stages 4, 5 and 8: injected weights, causality (hidden checks)."""

import torch

from grader.judge.checks.examples import build_causal
from grader.judge.checks.support import (
    CheckFailed,
    WeightsRefused,
    expect_close,
    generator,
    parameters_only,
    reference_output,
    reference_state,
)
from grader.judge.verdict import hint_of, proven_mistake
from grader.sandbox.workers import LearnerFailure


def run_injected(learner, reference, stage: int, cls: str, args: list, seed: int, x: torch.Tensor, **options):
    """(learner output, reference output, injected state) for ``cls(*args)`` with the reference's weights."""
    state = parameters_only(reference_state(reference.name(cls), args, seed))
    reply = build_causal(learner, stage, cls, args, state, [x], **options)
    return reply["outputs"][0], reference_output(reference.name(cls), args, state, x), state


def expect_causal_and_independent(learner, reference, stage: int, cls: str, args: list, variants_for) -> None:
    """Later tokens never change earlier outputs; batch items never change each other; eval repeats.

    ``variants_for(x, state)``: the outputs of known mistakes, to name the one an output proves.
    """
    rng = generator(f"property.causal.{cls}")
    state = parameters_only(reference_state(reference.name(cls), args, seed=7000))
    x = torch.rand(3, 7, args[0], generator=rng)
    later = x.clone()
    later[:, 4:] = torch.rand(3, 3, args[0], generator=rng)
    other_item = x.clone()
    other_item[1] = torch.rand(7, args[0], generator=rng)
    try:
        reply = build_causal(learner, stage, cls, args, state, [x, later, other_item], repeat=2)
    except WeightsRefused as refused:  # no place for the judge's weights: causality needs none, the learner's do
        reply = build_causal(learner, stage, cls, args, {}, [x, later, other_item], repeat=2)
        _expect_causal_with_own_weights(cls, reply["outputs"], refused)
    first, again, with_later, _, with_other, _ = reply["outputs"]
    for output in reply["outputs"]:
        if not isinstance(output, torch.Tensor) or output.shape[:2] != (3, 7):
            raise CheckFailed(f"{cls} on a (3, 7, {args[0]}) batch returned no (3, 7, ...) tensor", "wrong-shape")
    if not torch.equal(first.nan_to_num(), again.nan_to_num()) or not torch.equal(first.isnan(), again.isnan()):
        raise CheckFailed(
            f"{cls} in eval mode gave two different outputs for the same input",
            _dropout_in_eval(learner, stage, cls, args, state, x),
        )
    try:
        expect_close(with_later[:, :4], first[:, :4], f"{cls}: outputs of tokens 1-4 after changing tokens 5-7")
    except CheckFailed as failed:  # earlier outputs that move with later tokens: named when the output proves it
        expected = reference_output(reference.name(cls), args, state, x)
        proven = proven_mistake(first, expected, variants_for(x, state))
        raise CheckFailed(failed.message, proven and hint_of(proven)) from None
    expect_close(with_other[[0, 2]], first[[0, 2]], f"{cls}: batch items 1 and 3 after changing item 2")


def _expect_causal_with_own_weights(cls: str, outputs: list, refused: CheckFailed) -> None:
    """Later tokens that move earlier outputs of the learner's own module prove that tokens see later ones;
    otherwise the judge's weights not going in is the check's verdict."""
    first, _, with_later, *_ = outputs
    shaped = all(isinstance(o, torch.Tensor) and o.shape[:2] == (3, 7) for o in (first, with_later))
    if shaped and first[:, :4].isfinite().all() and not torch.allclose(with_later[:, :4], first[:, :4], atol=1e-5):
        raise CheckFailed(
            f"{cls} with its own weights (the judge's cannot go in: {refused.message}): the outputs of tokens "
            "1-4 change when only tokens 5-7 change",
            "mask-not-causal",
        )
    raise refused


def _dropout_in_eval(learner, stage: int, cls: str, args: list, state: dict, x: torch.Tensor) -> str | None:
    """dropout-in-eval when the same module with dropout=0 repeats itself in eval mode: the dropout did it."""
    without = [*args[:3], 0.0, *args[4:]]
    try:
        outputs = build_causal(learner, stage, cls, without, state, [x], repeat=2)["outputs"]
    except LearnerFailure:
        return None
    return "dropout-in-eval" if all(isinstance(o, torch.Tensor) for o in outputs) and torch.equal(*outputs) else None
