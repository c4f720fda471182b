"""What every stage's checks share: the marker, seeded inputs, and the common ways to judge."""

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, cast

import pytest
import torch

from grader.core import hints
from grader.judge import drawn_inputs
from grader.judge.checks import documented
from grader.judge.checks.documented import DOCUMENTED
from grader.judge.checks.naming import (  # noqa: F401 - re-exported for the checks
    PROJECTION_NAMES,
    expect_documented_names,
    in_documented_names,
    missing_weights_hint,
    parameters_only,
    reference_state,
    role_pairing,
    under_documented_names,
)
from grader.judge.class_source import extends_the_book, init_signature
from grader.judge.document_values import document_values
from grader.judge.tensor_diff import described_call
from grader.judge.verdict import CheckFailed, Variants, agrees, expect_all_close, expect_close, some_right  # noqa: F401 - re-exported for the checks
from grader.runner.book_calls import BOOK_SIGNATURES
from grader.runner.seeding import manual_seed
from grader.sandbox.workers import LearnerFailure, LearnerWorkers


class LearnerTensor(Protocol):
    """For the type checker: a tensor as grader.runner.protocol decodes it, with the learner's device and dtype."""

    learner_device: str
    learner_dtype: str


# For the type checker: a list of query, key and value spread into a call (*qkv(...)), whose items mypy cannot count
QKV = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def check(name: str, visible: bool = False, target: str | None = None):
    """Mark a test as the check ``name``; ``target`` is the public name it grades (for shortcuts)."""
    return pytest.mark.check(name=name, visibility="visible" if visible else "hidden", target=target)


def generator(name: str) -> torch.Generator:
    """A generator seeded from ``name`` (and, in a keyed grading's hidden checks, from the class's key and
    the submission: grader.judge.drawn_inputs): fresh numbers, the same on every run."""
    return torch.Generator().manual_seed(drawn_inputs.seed(name))


# A failed document check lists at most this many values: the first ones say enough.
SHOWN_VALUES = 3


def expect_document_values(
    learner: LearnerWorkers, stage: int, ids: list[str], device: str = "cpu", target: str | None = None
) -> list[str]:
    """Run each document value's recipe in the learner's worker; fail listing the first mismatches.

    With ``target``, the function or class the check judges: a value that is also computed with
    another of the stage's names does not count against the target when a value computed from
    those names without it is wrong too (a wrong attention_scores makes softmax_naive's values
    wrong). Such a value proves nothing of the target either way: the ids of those excused are
    returned, for the caller to judge the target another way. So it is when the worked examples
    raise where a value they compute before the target is wrong (context_vector given attention
    scores of shape (6, 1)): all are excused. Dropout values are skipped off the CPU: CUDA draws other
    masks from the same seed.
    """
    values = {v.id: v for v in document_values()}
    chosen = [values[i] for i in ids if device == "cpu" or not values[i].cpu_only]
    uses = tuple(dict.fromkeys(name for value in chosen for name in value.uses))
    try:
        results = cast(list, learner.request(stage, "recipes", calls=uses, names=[value.recipe for value in chosen]))
    except LearnerFailure as failure:  # an exception, where a value before the target came out wrong
        if failure.kind != "exception" or target is None:
            raise
        try:
            inherited = any(_inherited(learner, stage, value, target, device) for value in chosen)
        except LearnerFailure:  # what comes before raises too: the chain's own error says it best
            raise failure from None
        if inherited:
            return [value.id for value in chosen]
        raise
    problems, excused = [], []
    for value, result in zip(chosen, results):
        problem = value.check(result)
        if problem is not None and target and _inherited(learner, stage, value, target, device):
            excused.append(value.id)
        elif problem is not None:
            problems.append(f"{value.citation}: {problem}")
    if problems:
        more = len(problems) - SHOWN_VALUES
        raise CheckFailed(
            "the worked examples' values are not reproduced:\n"
            + "\n".join(problems[:SHOWN_VALUES])
            + (f"\n(and {more} more value{'s' if more > 1 else ''} of the worked examples)" if more > 0 else "")
        )
    return excused


def _inherited(learner: LearnerWorkers, stage: int, value, target: str, device: str) -> bool:
    """A value computed without ``target``, from names ``value`` also uses, is wrong as well."""
    upstream = [
        v
        for v in document_values(stage)
        if target not in v.uses and v.uses and set(v.uses) <= set(value.uses) and (device == "cpu" or not v.cpu_only)
    ]
    return any(v.check(learner.request(stage, "recipe", calls=v.uses, name=v.recipe)) is not None for v in upstream)


def expect_seeded_module_values(
    learner: LearnerWorkers, stage: int, ids: list[str], cls: str, args: list, seed: int
) -> None:
    """Document values of a seeded module; when they differ, say if the creation order is to blame."""
    try:
        expect_document_values(learner, stage, ids, target=cls)
    except CheckFailed as failed:
        hint = init_order_hint(learner, stage, cls, args, seed)
        raise CheckFailed(failed.message, hint) from None


def expect_function_on_cases(
    learner: LearnerWorkers,
    stage: int,
    function: str,
    reference_function: Callable[..., torch.Tensor],
    cases: Sequence[tuple],
    describe: Callable[..., str],
    variants_for: Callable[..., Mapping[str, torch.Tensor] | None] = lambda *args: None,
) -> None:
    """Call a learner function on each case (a tuple of arguments) and judge it against the reference.

    Outputs for the last cases must differ (same shapes, other numbers): an answer copied from the
    worked example would not.
    """
    outputs = [call(learner, stage, function, *args) for args in cases]
    expect_input_dependent(outputs[2:], function)
    expect_all_close(
        [
            # mypy infers no lambda with a default argument against a Callable[[], ...]: cast it
            (output, reference_function(*args), describe(*args), cast(Variants, lambda args=args: variants_for(*args)))
            for args, output in zip(cases, outputs)
        ]
    )


def build(learner: LearnerWorkers, stage: int, cls: str, args: list, probe: str = "module", **options) -> dict:
    """Build the learner's module ``cls(*args)`` in its worker, with grader.runner.probes.module (or
    another probe that builds one, such as cached_module). Injected weights go to the learner's renamed
    projections by what they compute (role_pairing), where that is known."""
    if options.get("state") is not None and "pairing" not in options:
        if (pairing := role_pairing(learner, stage, cls)) is not None:
            options["pairing"] = pairing
    reply = cast(dict, learner.request(stage, probe, cls=cls, args=list(args), **options))
    mismatched = [_shapes(r) for r in reply.get("rejected", []) if "size mismatch" in r]
    if mismatched:
        transposed = all(shapes and shapes[1] == shapes[2][::-1] for _, shapes in mismatched)
        raise CheckFailed(
            f"{cls}{tuple(args)} holds weights of other shapes than documented, so the grader cannot "
            f"put the documented weights in: {'; '.join(words for words, _ in mismatched)}"
            + ("; each is the documented shape transposed" if transposed else ""),
            # (d_out, d_in) parameters are v1's layout mistake; an nn.Linear's transposed weight is a layer
            # built as nn.Linear(d_out, d_in)
            "weights-layout"
            if transposed and stage in hints.catalog()["weights-layout"]["stages"] and cls == "SelfAttention_v1"
            else "d-in-for-d-out"
            if transposed
            else "kv-projection-size"
            if cls == "GroupedQueryAttention" and _only_kv_widths(mismatched)
            else None,
        )
    return reply


def _only_kv_widths(mismatched: list) -> bool:
    """Every weight of another shape is W_key's or W_value's, with the documented input size and another width."""
    return all(
        shapes is not None and shapes[0].split(".")[0] in ("W_key", "W_value") and shapes[1][1:] == shapes[2][1:]
        for _, shapes in mismatched
    )


def _shapes(torch_words: str) -> tuple[str, tuple[str, tuple[str, ...], tuple[str, ...]] | None]:
    """torch's "size mismatch for W_query: copying a param with shape torch.Size([3, 2]) from checkpoint,
    the shape in current model is torch.Size([2, 3])." as "W_query is (2, 3), documented (3, 2)", with the
    name and both shapes (None where torch's words are not these)."""
    found = re.search(r"for ([\w.]+):.*?Size\(\[([\d, ]*)\]\).*?Size\(\[([\d, ]*)\]\)", torch_words)
    if found is None:
        return torch_words, None
    name, documented, held = found.groups()
    return f"{name} is ({held}), documented ({documented})", (name, _dims(held), _dims(documented))


def _dims(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(","))


class WeightsRefused(CheckFailed):
    """The learner's module holds no place for some documented weight: the judge's weights cannot go in."""


def build_with_weights(learner: LearnerWorkers, stage: int, cls: str, args: list, state: dict, **options) -> dict:
    """Build ``cls(*args)`` with injected weights; each documented name has to exist in the learner's module."""
    reply = build(learner, stage, cls, args, state=state, **options)
    if reply["rejected"]:
        held = [f"{name} {tuple(size)}" for name, size in reply["structure"]["parameters"]]
        raise WeightsRefused(
            f"{cls} does not hold the documented weights {reply['rejected']}; it holds {held}",
            missing_weights_hint(reply["rejected"], reply["structure"]["parameters"], state),
        )
    return reply


def reference_output(module_class, args: list, state: dict, x: torch.Tensor) -> torch.Tensor:
    """What ``module_class(*args)`` holding ``state`` returns for ``x``, in evaluation mode."""
    module = module_class(*args)
    module.load_state_dict(state, strict=False)
    module.eval()
    with torch.no_grad():
        return module(x)


def init_order_hint(
    learner: LearnerWorkers, stage: int, cls: str, args: list, seed: int, maths_checked: bool = False
) -> str | None:
    """param-init-order or wrong-random-init, when proven.

    Proven means: with the documented weights injected, the learner's module computes what the
    documented one does (or the caller has checked its maths: ``maths_checked``), while its own
    seeded weights differ from the documented ones: they are the numbers torch.randn draws in
    their place (wrong-random-init), or otherwise created in another order or way (param-init-order).
    """
    try:
        learner_state = build(learner, stage, cls, args, seed=seed, return_state=True)["state"]
    except LearnerFailure:
        return None  # no diagnosis possible: the check's own failure stands
    learner_state = in_documented_names(learner_state, role_pairing(learner, stage, cls))
    expected = parameters_only(reference_state(DOCUMENTED[cls], args, seed))
    if holds_weights(learner_state, expected):
        return None  # the weights are the documented ones: whatever differs lies elsewhere
    if not _same_layout(learner_state, expected):
        return None  # other names, shapes or shared tensors: more than the creation order differs
    if not maths_checked and not _computes_as_documented(learner, stage, cls, args, expected):
        return None
    manual_seed(seed)
    drawn_normal = {name: torch.randn(value.shape) for name, value in expected.items()}
    if _draws(learner_state) == _draws(drawn_normal) or _rescaled(learner_state, expected):
        return "wrong-random-init"  # torch.randn's numbers, or torch.rand's moved to another range (rand - 0.5)
    # Right maths, other seeded weights: created in another order or way (a weight drawn twice), as the hint says.
    return "param-init-order"


def _rescaled(state: dict, expected: dict[str, torch.Tensor]) -> bool:
    """``state`` holds ``expected``'s numbers, each in its place, under one a * x + b other than x."""
    names = sorted(expected)
    if any(not isinstance(state.get(n), torch.Tensor) or state[n].shape != expected[n].shape for n in names):
        return False
    x = torch.cat([expected[n].flatten().double() for n in names])
    y = torch.cat([state[n].flatten().double() for n in names])
    if x.numel() < 3 or x.std() == 0:
        return False
    a = ((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum()
    b = y.mean() - a * x.mean()
    fits = torch.allclose(a * x + b, y, atol=1e-5, rtol=1e-4)
    return bool(fits) and not (abs(float(a) - 1) < 1e-6 and abs(float(b)) < 1e-6)


def holds_weights(state: dict, expected: dict[str, torch.Tensor]) -> bool:
    """``state`` holds every weight of ``expected``, equal to it."""
    return all(k in state and torch.equal(state[k], v) for k, v in expected.items())


def _same_layout(state: dict, expected: dict) -> bool:
    """The same parameter names and shapes as documented, and no tensor held twice where the documented hold two."""
    learned = parameters_only({k: v for k, v in state.items() if isinstance(v, torch.Tensor)})
    if learned.keys() != expected.keys() or any(learned[k].shape != v.shape for k, v in expected.items()):
        return False
    names = list(expected)
    return not any(
        torch.equal(learned[a], learned[b]) and not torch.equal(expected[a], expected[b])
        for i, a in enumerate(names)
        for b in names[i + 1 :]
        if learned[a].shape == learned[b].shape
    )


def _computes_as_documented(learner: LearnerWorkers, stage: int, cls: str, args: list, state: dict) -> bool:
    """The learner's ``cls(*args)`` holding ``state`` returns the documented output on a probe input."""
    d_in = args[0]
    x = (
        torch.rand(2, min(args[2], 5), d_in, generator=generator("maths"))
        if len(args) > 2
        else torch.rand(5, d_in, generator=generator("maths"))
    )
    try:
        reply = build(learner, stage, cls, args, state=state, inputs=[x])
    except LearnerFailure:
        return False
    return not reply["rejected"] and agrees(reply["outputs"][0], documented.output(cls, args, state, x))


def _draws(state: dict) -> list[float]:
    """Every random number a module's weights hold, sorted: the mask buffer is not drawn."""
    values = [v for k, v in state.items() if isinstance(v, torch.Tensor) and k.split(".")[-1] != "mask"]
    return sorted(x for v in values for x in v.flatten().tolist())


ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")  # of a call's arguments


def expect_inputs_kept(learner: LearnerWorkers, stage: int, cases: dict[str, list]) -> None:
    """Each function, called on its arguments, leaves them as they were: the caller still needs them."""
    for function, args in cases.items():
        reply = cast(dict, learner.request(stage, "call", function=function, args=list(args)))
        for index, (before, after) in enumerate(zip(args, reply["args_after"])):
            if isinstance(after, torch.Tensor) and not torch.equal(after.to("cpu"), before):
                which = "its argument" if len(args) == 1 else f"its {ORDINALS[index]} argument"
                raise CheckFailed(
                    f"{function} changed {which} in place: after the call it holds other numbers than the "
                    "caller passed",
                    "input-overwritten",
                )


def call(learner: LearnerWorkers, stage: int, function: str, *args, **kwargs) -> object:
    """``function(*args, **kwargs)`` in the learner's worker; an exception names the call that raised it."""
    try:
        return cast(dict, learner.request(stage, "call", function=function, args=list(args), kwargs=kwargs))["result"]
    except LearnerFailure as failure:
        if failure.kind == "exception" and failure.during is None:
            failure.during = described_call(function, list(args), kwargs)
        raise


def expect_input_dependent(outputs: list, what: str) -> None:
    """Different inputs giving one identical output point to a copied, not computed, answer."""
    tensors = [o for o in outputs if isinstance(o, torch.Tensor)]
    if len(tensors) >= 2 and all(t.shape == tensors[0].shape and torch.equal(t, tensors[0]) for t in tensors[1:]):
        raise CheckFailed(f"{what}: the same output came back for different inputs", "hard-coded")


def expect_book_signature(learner: LearnerWorkers, source: bytes | None, stage: int, classes: dict[str, list]) -> None:
    """note.signature: each class's constructor, read from the judge's own copy of the file, takes the book's
    parameters in the book's order with its defaults. ``classes``: name -> arguments it is built with first (a
    stub's NotImplementedError answers for it)."""
    for cls, args in classes.items():
        build(learner, stage, cls, args)
        written, book = init_signature(source, cls), BOOK_SIGNATURES[cls]
        if written is not None and written != book and not extends_the_book(written, book):
            raise CheckFailed(
                f"your {cls}({written}) is not the book's {cls}({book}). The grader passed the book's "
                "arguments by name where your parameters have the book's names, so the maths was graded "
                "as you wrote it; code written for the book passes them by position, and would put them "
                "in other parameters or fail",
                "signature",
            )
