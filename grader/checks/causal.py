"""Checks shared by the causal modules of stages 4 and 5: injected weights, causality, dropout."""

import torch

from grader.checks.support import (
    CheckFailed,
    build,
    build_with_weights,
    expect_close,
    generator,
    parameters_only,
    reference_output,
    reference_state,
)
from grader.learner import LearnerFailure


SHAPE_ERRORS = ("size of tensor", "must match", "doesn't match the broadcast shape")


def raise_if_mask_not_truncated(failure: LearnerFailure, cls: str, args: list, num_tokens: int) -> None:
    """A shape error on fewer tokens than context_length is the full-size mask meeting small scores."""
    context_length = args[2]
    if failure.kind == "exception" and num_tokens < context_length and any(e in failure.message for e in SHAPE_ERRORS):
        raise CheckFailed(f"{cls}{tuple(args)} on {num_tokens} tokens (fewer than context_length {context_length}) "
                          f"raised {failure}", "mask-not-truncated") from None


def build_causal(learner, stage: int, cls: str, args: list, state: dict, inputs: list, **options) -> dict:
    """build_with_weights, naming the mask that was not cut to the number of tokens."""
    try:
        return build_with_weights(learner, stage, cls, args, state, inputs=inputs, **options)
    except LearnerFailure as failure:
        raise_if_mask_not_truncated(failure, cls, args, inputs[0].shape[1])
        raise


def run_injected(learner, reference, stage: int, cls: str, args: list, seed: int, x: torch.Tensor, **options):
    """(learner output, reference output, injected state) for ``cls(*args)`` with the reference's weights."""
    state = parameters_only(reference_state(reference.name(cls), args, seed))
    reply = build_causal(learner, stage, cls, args, state, [x], **options)
    return reply["outputs"][0], reference_output(reference.name(cls), args, state, x), state


def expect_causal_and_independent(learner, reference, stage: int, cls: str, args: list) -> None:
    """Later tokens never change earlier outputs; batch items never change each other; eval repeats."""
    rng = generator(f"property.causal.{cls}")
    state = parameters_only(reference_state(reference.name(cls), args, seed=7000))
    x = torch.rand(3, 7, args[0], generator=rng)
    later = x.clone()
    later[:, 4:] = torch.rand(3, 3, args[0], generator=rng)
    other_item = x.clone()
    other_item[1] = torch.rand(7, args[0], generator=rng)
    reply = build_causal(learner, stage, cls, args, state, [x, later, other_item], repeat=2)
    first, again, with_later, _, with_other, _ = reply["outputs"]
    for output in reply["outputs"]:
        if not isinstance(output, torch.Tensor) or output.shape[:2] != (3, 7):
            raise CheckFailed(f"{cls} on a (3, 7, {args[0]}) batch returned no (3, 7, ...) tensor", "wrong-shape")
    if not torch.equal(first, again):
        raise CheckFailed(f"{cls} in eval mode gave two different outputs for the same input", "dropout-in-eval")
    try:
        expect_close(with_later[:, :4], first[:, :4], f"{cls}: outputs of tokens 1-4 after changing tokens 5-7")
    except CheckFailed as failed:  # earlier outputs that move with later tokens: the mask lets them through
        raise CheckFailed(failed.message, "mask-not-causal") from None
    expect_close(with_other[[0, 2]], first[[0, 2]], f"{cls}: batch items 1 and 3 after changing item 2")


def expect_dropout_on_weights(learner, stage: int, cls: str, args_for, state_for) -> None:
    """With x = I, W_query = W_key = 0 and W_value = I, a causal module returns dropout(its weights).

    Row i of the weights is 1/(i+1) on tokens 1..i+1; dropout(0.5) must zero about half of them
    and double the rest. With W_value summing the tokens instead, each output is a row sum of the
    dropped weights, which is exactly 0 or 2 only if dropout hit the outputs instead.
    """
    n, p = 40, 0.5
    eye = torch.eye(n).expand(4, n, n).contiguous()
    weights = build(learner, stage, cls, args_for(n, n), state=state_for(n, n, torch.eye(n)), inputs=[eye], train=True)
    revealed = weights["outputs"][0]
    if not isinstance(revealed, torch.Tensor) or revealed.shape != (4, n, n):
        raise CheckFailed(f"{cls}: expected an output of shape (4, {n}, {n}) from 4 batches of {n} tokens",
                          "wrong-shape")
    if revealed.triu(diagonal=1).abs().max() > 0:
        raise CheckFailed(f"{cls} in training mode attends to later tokens", "mask-not-causal")
    allowed = torch.ones(n, n, dtype=torch.bool).tril().expand(4, n, n)
    uniform = (1.0 / torch.arange(1, n + 1, dtype=torch.float64)).view(n, 1).expand(n, n)
    kept = revealed.double()[allowed] != 0
    dropped = 1 - kept.double().mean().item()
    if dropped < 0.01:
        raise CheckFailed(f"{cls} with dropout={p} in training mode dropped no attention weight: apply self.dropout "
                          "to the attention weights", "dropout-wrong-place")
    if abs(dropped - p) > 0.05:
        raise CheckFailed(f"{cls} with dropout={p} dropped {dropped:.1%} of the attention weights, expected about {p:.0%}")
    scaled = (uniform.expand(4, n, n)[allowed] / (1 - p))[kept]
    if not torch.allclose(revealed.double()[allowed][kept], scaled, atol=1e-5):
        raise CheckFailed(f"{cls}: kept attention weights should be scaled by 1/(1 - p) = {1 / (1 - p):g}",
                          "dropout-wrong-place")
    sums = build(learner, stage, cls, args_for(n, 1), state=state_for(n, 1, torch.ones(1, n)), inputs=[eye],
                 train=True)["outputs"][0]
    rows = sums[:, 3:, 0].double()  # rows with several weights: their sum is rarely exactly 0 or 2
    if bool(((rows == 0) | ((rows - 2).abs() < 1e-6)).all()):
        raise CheckFailed(f"{cls}: dropout hit the context vectors, not the attention weights", "dropout-wrong-place")
