"""Stage 4: masking the future (two ways), dropout, and CausalAttention."""

from typing import cast

import torch

from grader.judge.checks import documented
from grader.judge.checks.attention_probe import showing_attention
from grader.judge.checks.causal import expect_causal_and_independent, run_injected
from grader.judge.checks.device_note import (
    expect_device_followed,
    expect_dtype_followed,
    expect_module_dtype_followed,
    expect_no_fixed_device,
)
from grader.judge.checks.dropout_probe import expect_dropout_on_weights
from grader.judge.checks.examples import (
    expect_example,
    expect_function_values_explained,
    expect_seeded_values_explained,
)
from grader.judge.checks.module_structure import (
    expect_documented_mask,
    expect_forward_keeps_buffers,
    expect_projection_biases,
    expect_trainable,
    mask_buffer_hint,
)
from grader.judge.checks.shortcut import expect_attention_by_hand
from grader.judge.checks.support import (
    CheckFailed,
    agrees,
    build,
    call,
    check,
    expect_all_close,
    expect_book_signature,
    expect_close,
    expect_documented_names,
    expect_input_dependent,
    expect_inputs_kept,
    generator,
)
from grader.judge.diagnosis import causal_softmax_variants, linear, renormalize_variants, single_head_variants
from grader.judge.tensor_diff import describe_value
from grader.sandbox.workers import LearnerFailure

STAGE = 4
# (batch, num_tokens, d_in, d_out, context_length): one token, fewer tokens than the context,
# the book's, d_in > d_out
SHAPES = [(1, 1, 3, 2, 4), (3, 5, 4, 6, 8), (2, 6, 3, 2, 6), (4, 7, 6, 3, 7)]
PROJECTIONS = ("W_query", "W_key", "W_value")


@check("document.mask_and_renormalize", visible=True, target="mask_and_renormalize")
def test_document_mask_and_renormalize(learner):
    expect_function_values_explained(learner, STAGE, ["stage4.masked_renormalized_weights"], "mask_and_renormalize")


@check("document.causal_softmax", visible=True, target="causal_softmax")
def test_document_causal_softmax(learner, device):
    expect_function_values_explained(learner, STAGE, [
        "stage4.causal_softmax_weights", "stage4.masked_context_vecs", "stage4.once_upon_causal_weights",
        "stage4.dropout_of_causal_weights", "stage4.once_upon_dropout_of_causal_weights",
    ], "causal_softmax", device=device)  # fmt: skip


@check("document.CausalAttention", visible=True, target="CausalAttention")
def test_document_causal_attention(learner):
    expect_seeded_values_explained(
        learner,
        STAGE,
        ["stage4.causal_attention_output", "stage4.once_upon_causal_attention_output"],
        "CausalAttention",
        [3, 2, 6, 0.0],
        seed=123,
    )


@check("example.CausalAttention", visible=True, target="CausalAttention")
def test_example_causal_attention(learner):
    expect_example(learner, STAGE, "CausalAttention")


def _causal_weights(rng: torch.Generator) -> list[torch.Tensor]:
    shapes = [(1, 1), (4, 4), (7, 7), (5, 5)]  # one matrix, as in the book: batches are a note
    return [torch.softmax(torch.randn(*shape, generator=rng), dim=-1) for shape in shapes]


@check("random.mask_and_renormalize", target="mask_and_renormalize")
def test_random_mask_and_renormalize(learner, reference):
    cases = []
    for weights in _causal_weights(generator("random.mask_and_renormalize")):
        cases.append(
            (
                call(learner, STAGE, "mask_and_renormalize", weights),
                reference.mask_and_renormalize(weights),
                f"mask_and_renormalize of {tuple(weights.shape)} weights",
                lambda weights=weights: renormalize_variants(weights),
            )
        )
    expect_all_close(cases)
    expect_input_dependent([output for output, *_ in cases[1:3]], "mask_and_renormalize")


@check("random.causal_softmax", target="causal_softmax")
def test_random_causal_softmax(learner, reference):
    rng, cases = generator("random.causal_softmax"), []
    for shape, d_k in [((1, 1), 2), ((4, 4), 2), ((6, 6), 8), ((5, 5), 16)]:
        scores = torch.randn(*shape, generator=rng) * 3
        cases.append(
            (
                call(learner, STAGE, "causal_softmax", scores, d_k),
                reference.causal_softmax(scores, d_k),
                f"causal_softmax of {shape} scores, d_k={d_k}",
                lambda scores=scores, d_k=d_k: causal_softmax_variants(scores, d_k),
            )
        )
    expect_all_close(cases)
    expect_input_dependent([output for output, *_ in cases[1:3]], "causal_softmax")


@check("random.CausalAttention", target="CausalAttention")
def test_random_causal_attention(learner, reference):
    rng, cases = generator("random.CausalAttention"), []
    for index, (b, n, d_in, d_out, context_length) in enumerate(SHAPES):
        args = [d_in, d_out, context_length, 0.0]
        x = torch.rand(b, n, d_in, generator=rng)
        actual, expected, state = run_injected(learner, reference, STAGE, "CausalAttention", args, 8000 + index, x)
        cases.append(
            (
                actual,
                expected,
                f"CausalAttention{tuple(args)} on a {(b, n, d_in)} batch",
                # mypy cannot count the generator's three projections, so takes them for causal and d_in too
                lambda x=x, state=state, d_in=d_in: single_head_variants(  # type: ignore[misc]
                    *(linear(x, state, name) for name in PROJECTIONS),  # type: ignore[arg-type]
                    causal=True,
                    d_in=d_in,
                ),
            )
        )
    with showing_attention(learner, STAGE, "CausalAttention"):
        expect_all_close(cases)


@check("property.causal", target="CausalAttention")
def test_causal_attention_properties(learner, reference):
    expect_causal_and_independent(
        learner,
        reference,
        STAGE,
        "CausalAttention",
        [5, 4, 10, 0.5],
        # mypy cannot count the generator's three projections, so takes them for causal and d_in too
        lambda x, state: single_head_variants(*(linear(x, state, name) for name in PROJECTIONS), causal=True),  # type: ignore[misc, arg-type]
    )


@check("property.dropout", visible=True, target="CausalAttention")
def test_causal_attention_dropout(learner):
    expect_dropout_on_weights(
        learner, STAGE, "CausalAttention",
        args_for=lambda n, d_out: [n, d_out, n, 0.5],
        state_for=lambda n, d_out, value: {"W_query.weight": torch.zeros(d_out, n),
                                           "W_key.weight": torch.zeros(d_out, n), "W_value.weight": value},
    )  # fmt: skip


def _function_cases(rng: torch.Generator, *batch: int) -> dict[str, list]:
    return {
        "mask_and_renormalize": [torch.softmax(torch.randn(*batch, 5, 5, generator=rng), dim=-1)],
        "causal_softmax": [torch.randn(*batch, 5, 5, generator=rng), 4],
    }


@check("property.inputs_kept", visible=True)
def test_inputs_kept(learner):
    expect_inputs_kept(learner, STAGE, _function_cases(generator("property.inputs_kept")))


# Notes: what we know beyond the book's code (section 3.5), which makes its masks with torch.ones inside
# the functions, on one matrix. They cost nothing unless an instructor prices them (course.toml [notes]).


@check("note.fixed_device", visible=True)
def test_no_fixed_device(learner):
    cases = _function_cases(generator("note.fixed_device"))
    found = [_failure(lambda: expect_device_followed(learner, STAGE, cases))]
    found.append(
        _failure(lambda: expect_no_fixed_device(learner, STAGE, "CausalAttention", [4, 3, 6, 0.1], torch.rand(2, 5, 4)))
    )
    _raise_each(found)


@check("note.fixed_dtype", visible=True)
def test_no_fixed_dtype(learner):
    cases = _function_cases(generator("note.fixed_dtype"))
    found = [_failure(lambda: expect_dtype_followed(learner, STAGE, cases))]
    x = torch.rand(2, 5, 4, generator=generator("note.fixed_dtype"))
    found.append(_failure(lambda: expect_module_dtype_followed(learner, STAGE, "CausalAttention", [4, 3, 6, 0.1], x)))
    _raise_each(found)


@check("note.batched", visible=True)
def test_batched(learner):
    _raise_each(
        [
            _failure(lambda: _expect_batched(learner, function, args))
            for function, args in _function_cases(generator("note.batched"), 3).items()
        ]
    )


def _expect_batched(learner, function: str, args: list) -> None:
    """A batch of matrices gets what each matrix gets alone: the learner's own answers, stacked. Whether those
    answers are right is the other checks' to judge; the hint says batched-inputs only where they are (the
    documented formula, so the release, which has no reference, judges it alike)."""
    alone = [call(learner, STAGE, function, matrix, *args[1:]) for matrix in args[0]]
    if not all(isinstance(a, torch.Tensor) and a.shape == cast(torch.Tensor, alone[0]).shape for a in alone):
        raise CheckFailed(f"{function} of one 5 x 5 matrix returned {describe_value(alone[0])}")
    each_right = all(
        agrees(answer, getattr(documented, function)(matrix, *args[1:])) for answer, matrix in zip(alone, args[0])
    )
    what = f"{function} of a batch of 5 x 5 matrices, shape {tuple(args[0].shape)}, against each matrix given alone"
    try:
        expect_close(call(learner, STAGE, function, *args), torch.stack(cast(list[torch.Tensor], alone)), what)
    except LearnerFailure as failure:
        if failure.kind != "exception":
            raise
        raise CheckFailed(f"{what}: your code raised {failure}", "batched-inputs" if each_right else None) from None
    except CheckFailed as failure:
        raise CheckFailed(failure.message, "batched-inputs" if each_right else None) from None


def _failure(judge) -> CheckFailed | None:
    try:
        judge()
    except CheckFailed as failed:
        return failed
    return None


def _raise_each(found: list[CheckFailed | None]) -> None:
    """One note for every function it concerns: a learner who fixes the first one named sees the others too."""
    failed = [f for f in found if f is not None]
    if failed:
        raise CheckFailed("\n".join(f.message for f in failed), failed[0].hint)


@check("structure.CausalAttention", visible=True, target="CausalAttention")
def test_causal_attention_structure(learner, device):
    reply = build(learner, STAGE, "CausalAttention", [4, 3, 6, 0.1])
    shape = reply["structure"]
    linears = [m for m in shape["modules"] if m[1] == "Linear"]
    expect_documented_names("CausalAttention", linears, [[name, "Linear"] for name in PROJECTIONS])
    if linears != [["W_query", "Linear"], ["W_key", "Linear"], ["W_value", "Linear"]]:
        raise CheckFailed(
            f"CausalAttention should hold nn.Linear W_query, W_key, W_value in that order; it holds {linears}"
        )
    biases = [name for name, _ in shape["parameters"] if name.endswith(".bias")]
    if biases:
        raise CheckFailed(
            f"CausalAttention(4, 3, 6, 0.1) (qkv_bias=False) holds the biases {biases}", "qkv-bias-ignored"
        )
    expect_projection_biases(learner, STAGE, "CausalAttention", [4, 3, 6, 0.1])
    if ["dropout", "Dropout"] not in shape["modules"]:
        rate_kept = shape.get("dropout_kind") in ("float", "int")
        raise CheckFailed(
            "CausalAttention should hold its nn.Dropout as self.dropout"
            + (f"; its self.dropout is the rate itself, a {shape['dropout_kind']}" if rate_kept else ""),
            "dropout-not-layer" if rate_kept else None,
        )
    if ["mask", [6, 6]] not in shape["buffers"] or "mask" not in shape["state_dict"]:
        raise CheckFailed(
            f"CausalAttention(..., context_length=6, ...) should register a (6, 6) buffer named mask; "
            f"its buffers are {shape['buffers']}",
            mask_buffer_hint(shape["buffers"]),
        )
    if not reply["buffers_on"]["mask"].startswith(device):
        raise CheckFailed(f"after .to('{device}') the mask is on {reply['buffers_on']['mask']}", "mask-not-buffer")
    expect_trainable("CausalAttention", shape, learner, STAGE, [4, 3, 6, 0.1])
    expect_forward_keeps_buffers(learner, STAGE, "CausalAttention", [4, 3, 6, 0.1], tokens=3)


@check("shortcut.CausalAttention", target="CausalAttention")
def test_causal_attention_shortcut(learner, learner_source, reference):
    x = torch.rand(2, 6, 3, generator=generator("shortcut.CausalAttention"))
    expect_attention_by_hand(learner, learner_source, reference, STAGE, "CausalAttention", [3, 2, 6, 0.0], x)


@check("note.signature", visible=True)
def test_book_signature(learner, learner_source):
    """A note: the book's signature, which the checks do not need (they call by the book's names)."""
    expect_book_signature(learner, learner_source[STAGE], STAGE, {"CausalAttention": [3, 2, 6, 0.0]})


@check("note.mask_buffer", visible=True, target="CausalAttention")
def test_mask_buffer(learner):
    expect_documented_mask(learner, STAGE, "CausalAttention", [4, 3, 6, 0.1])
