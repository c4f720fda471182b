"""Stage 6 (bonus): scaled_dot_product_attention, judged against torch's own F.scaled_dot_product_attention.

The judge computes the expected outputs with torch's function in float64 (bfloat16 inputs are
widened exactly), or takes them from the book's printed values; the learner's function runs in its
worker on float32 or bfloat16 tensors. Each call passes only the keyword arguments a case sets, so
a missing parameter costs only the checks that need it.
"""

from typing import cast

import torch

from grader.judge.checks.device_note import expect_device_followed
from grader.judge.checks.documented import DOCUMENTED
from grader.judge.checks.examples import fail_if_example_fails
from grader.judge.checks.sdpa_cases import (
    FUNCTION,
    STAGE,
    Case,
    example_cases,
    expect_cases,
    float32_evidence,
    mixed_mask,
    qkv,
    run_telling_leading_dims,
)
from grader.judge.checks.shortcut import ATTENTION_BY_HAND, expect_not_spelled, expect_work_recorded, switched_off_reply
from grader.judge.checks.support import (
    QKV,
    CheckFailed,
    LearnerTensor,
    call,
    check,
    expect_close,
    expect_inputs_kept,
    generator,
    reference_state,
)
from grader.judge.document_values import document_values
from grader.judge.verdict import agrees
from grader.runner.document_examples import journey, journey_batch
from grader.sandbox.workers import LearnerFailure, LearnerWorkers

# bfloat16 keeps 8 significant bits: a right answer computed in bfloat16 throughout lies within a
# few hundredths of torch's (measured: at most 0.018 of 1 + |value| on these inputs).
BF16_ATOL = BF16_RTOL = 0.04


# The visible checks ------------------------------------------------------------------------


def _projections(state: dict, x: torch.Tensor) -> list[torch.Tensor]:
    return [x @ state[f"{name}.weight"].T for name in ("W_query", "W_key", "W_value")]


def _document_results(learner: LearnerWorkers) -> dict[str, object]:
    """The book's examples computed with the learner's function on the book's queries, keys and values."""
    x, batch = journey(torch.device("cpu")), journey_batch(torch.device("cpu"))
    sa_v2 = _projections(reference_state(DOCUMENTED["SelfAttention_v2"], [3, 2], seed=789), x)
    causal = _projections(reference_state(DOCUMENTED["CausalAttention"], [3, 2, 6, 0.0], seed=123), batch)
    mha = reference_state(DOCUMENTED["MultiHeadAttention"], [3, 2, 6, 0.0, 2], seed=123)
    heads = [t.view(2, 6, 2, 1).transpose(1, 2) for t in _projections(mha, batch)]  # (b, heads, tokens, head_dim)
    # each call as a case: one that raises is rerun as its first matrix alone, which tells a dimension counted
    # from the start (the book's multi-head call is the first with leading dimensions)
    run = lambda case: run_telling_leading_dims(learner, case)  # noqa: E731
    context = run(Case(*cast(QKV, heads), {"is_causal": True}))
    if isinstance(context, torch.Tensor) and tuple(context.shape) == (2, 2, 6, 1):
        merged = context.to(torch.float32).transpose(1, 2).reshape(2, 6, 2)
        context = merged @ mha["out_proj.weight"].T + mha["out_proj.bias"]
    return {
        "stage1.all_context_vecs": run(Case(x, x, x, {"scale": 1.0})),  # the book's unscaled attention
        "stage2.sa_v2_output": run(Case(*cast(QKV, sa_v2))),
        "stage4.masked_context_vecs": run(Case(*cast(QKV, sa_v2), {"is_causal": True})),
        "stage4.causal_attention_output": run(Case(*cast(QKV, causal), {"is_causal": True})),
        "stage5.multihead_output": context,
    }


@check(f"document.{FUNCTION}", visible=True, target=FUNCTION)
def test_document_sdpa(learner):
    values = {v.id: v for v in document_values()}
    problems = []
    for value_id, result in _document_results(learner).items():
        problem = values[value_id].check(result)
        if problem is not None:
            problems.append(f"{values[value_id].citation}: {problem}")
    if problems:
        failed = CheckFailed(
            "the book's attention outputs, recomputed with your function from the book's queries, "
            "keys and values, are not reproduced:\n" + "\n".join(problems[:3])
        )
        fail_if_example_fails(failed, lambda: expect_cases(learner, example_cases()))
        raise CheckFailed(
            f"{failed.message}\n{FUNCTION} gives the right results on the small examples: compare "
            "your code with the book's steps"
        )


@check(f"example.{FUNCTION}", visible=True, target=FUNCTION)
def test_example_sdpa(learner):
    expect_cases(learner, example_cases())


# The hidden checks -------------------------------------------------------------------------

# (leading dims, L, S, E, Ev): one token; more queries than keys; one, then two leading dims;
# L = S; many keys, wide keys
SHAPES = [((), 1, 1, 4, 4), ((), 5, 3, 8, 2), ((3,), 4, 7, 4, 6), ((2, 3), 6, 6, 8, 5), ((2, 2), 3, 9, 16, 3)]


@check("random.shapes", target=FUNCTION)
def test_random_shapes(learner):
    rng = generator("random.shapes")
    cases = [Case(*cast(QKV, qkv(rng, *shape))) for shape in SHAPES]
    cases += [
        Case(*cast(QKV, qkv(rng, (2,), 4, 6, 8, 3)), {"scale": 0.3}),
        Case(*cast(QKV, qkv(rng, (), 5, 5, 4, 4)), {"scale": 2.0}),
    ]
    # a scale like any other: `scale or ...` misses it
    cases.append(Case(*cast(QKV, qkv(rng, (), 3, 4, 2, 2)), {"scale": 0.0}))
    expect_cases(learner, cases)


@check("random.is_causal", target=FUNCTION)
def test_random_causal(learner):
    rng = generator("random.is_causal")
    shapes = [((), 1, 1, 4, 4), ((), 4, 4, 4, 3), ((2,), 3, 7, 8, 4), ((2, 3), 7, 3, 4, 5), ((3,), 6, 10, 16, 2)]
    cases = [Case(*cast(QKV, qkv(rng, *shape)), {"is_causal": True}) for shape in shapes]
    cases.append(Case(*cast(QKV, qkv(rng, (2,), 4, 6, 8, 3)), {"is_causal": True, "scale": 0.4}))
    expect_cases(learner, cases)


@check("random.bool_mask", target=FUNCTION)
def test_random_bool_mask(learner):
    rng = generator("random.bool_mask")
    # (leading dims, L, S, E, Ev, the mask's shape): the mask broadcasts over what it lacks or holds as 1
    shapes = [
        ((), 4, 6, 8, 3, (4, 6)),
        ((2,), 5, 7, 4, 4, (1, 5, 7)),
        ((2, 3), 4, 5, 8, 6, (2, 1, 4, 5)),
        ((2, 3), 4, 5, 8, 6, (2, 1, 1, 5)),
        ((2, 3), 6, 6, 4, 4, (3, 6, 6)),
    ]
    expect_cases(
        learner, [Case(*cast(QKV, qkv(rng, *shape[:5])), {"attn_mask": mixed_mask(rng, shape[5])}) for shape in shapes]
    )


@check("random.float_mask", target=FUNCTION)
def test_random_float_mask(learner):
    rng = generator("random.float_mask")
    later = torch.ones(5, 7, dtype=torch.bool).triu(diagonal=1)
    cases = [
        Case(*cast(QKV, qkv(rng, (), 4, 6, 8, 3)), {"attn_mask": torch.randn(4, 6, generator=rng) * 2}),
        Case(  # per key
            *cast(QKV, qkv(rng, (2, 3), 4, 5, 8, 6)), {"attn_mask": torch.randn(2, 1, 1, 5, generator=rng) * 3}
        ),
        Case(
            # -inf hides the later keys, as a causal mask written in floats does
            *cast(QKV, qkv(rng, (2,), 5, 7, 4, 4)),
            {"attn_mask": torch.randn(1, 5, 7, generator=rng).masked_fill(later, -torch.inf)},
        ),
        Case(*cast(QKV, qkv(rng, (3,), 4, 4, 4, 2)), {"attn_mask": torch.randn(4, 4, generator=rng) * 2, "scale": 0.5}),
    ]
    expect_cases(learner, cases)


@check("random.enable_gqa", target=FUNCTION)
def test_random_gqa(learner):
    rng = generator("random.enable_gqa")

    def grouped(lead: tuple, kv_heads: int, L: int, S: int, E: int, Ev: int) -> list[torch.Tensor]:
        q, k, v = qkv(rng, lead, L, S, E, Ev)
        return [q, k[..., :kv_heads, :, :], v[..., :kv_heads, :, :]]

    cases = [
        Case(*cast(QKV, grouped((2, 4), 2, 3, 5, 8, 4)), {"enable_gqa": True}),
        Case(*cast(QKV, grouped((6,), 3, 4, 4, 4, 2)), {"enable_gqa": True}),  # heads as the only leading dim
        Case(*cast(QKV, grouped((1, 8), 2, 5, 5, 4, 3)), {"enable_gqa": True, "is_causal": True}),
        Case(*cast(QKV, grouped((2, 3), 1, 4, 6, 4, 4)), {"enable_gqa": True}),  # one key/value head for all
        Case(*cast(QKV, grouped((2, 2), 2, 4, 6, 4, 4)), {"enable_gqa": True}),
    ]  # as many key/value heads as query heads
    expect_cases(learner, cases)


@check("property.masked_rows", target=FUNCTION)
def test_masked_rows_give_zeros(learner):
    rng = generator("property.masked_rows")
    bool_mask = mixed_mask(rng, (4, 6))
    bool_mask[[1, 3]] = False  # queries 2 and 4 may attend to no key
    float_mask = torch.randn(2, 1, 5, 4, generator=rng)
    float_mask[1, 0, 2] = -torch.inf
    padding = mixed_mask(rng, (2, 1, 1, 5))
    padding[0] = False  # the whole first item is padding
    cases = [
        Case(*cast(QKV, qkv(rng, (), 4, 6, 8, 3)), {"attn_mask": bool_mask}),
        Case(*cast(QKV, qkv(rng, (2, 3), 5, 4, 4, 2)), {"attn_mask": float_mask}),
        Case(*cast(QKV, qkv(rng, (2, 3), 3, 5, 4, 4)), {"attn_mask": padding}),
    ]
    expect_cases(learner, cases)


@check("property.bfloat16", visible=True, target=FUNCTION)
def test_bfloat16(learner):
    """Visible: bfloat16 inputs keep their dtype and give torch's values to bfloat16's precision, whatever
    the mask; a constant or tensor made in float32 inside shows only here."""
    rng = generator("property.bfloat16")
    bf16 = lambda *tensors: [t.to(torch.bfloat16) for t in tensors]  # noqa: E731
    q, k, v = bf16(*qkv(rng, (2, 4), 5, 7, 16, 4, spread=0.5))
    cases = [
        Case(*cast(QKV, bf16(*qkv(rng, (2,), 4, 6, 8, 3, spread=0.5)))),
        Case(*cast(QKV, bf16(*qkv(rng, (2, 3), 7, 5, 16, 4, spread=0.5))), {"is_causal": True}),
        Case(q, k, v, {"attn_mask": mixed_mask(rng, (2, 1, 5, 7))}),
        Case(q, k, v, {"attn_mask": (torch.randn(5, 7, generator=rng) * 2).to(torch.bfloat16)}),
        Case(q, k[:, :2], v[:, :2], {"enable_gqa": True}),
    ]
    for case in cases:
        actual, expected = case.run(learner), case.expected()
        try:
            expect_close(actual, expected, str(case), tolerance=BF16_ATOL + BF16_RTOL * expected.abs())
        except CheckFailed as failed:
            failed.evidence = failed.evidence or float32_evidence(learner, case)
            raise
        if cast(LearnerTensor, actual).learner_dtype != "bfloat16":  # expect_close has failed all but a tensor
            raise CheckFailed(
                f"{case} returned {cast(LearnerTensor, actual).learner_dtype} values for bfloat16 inputs: the result "
                "should keep the inputs' dtype (a tensor made inside in another dtype, a mask or a "
                "constant, promotes everything it meets)"
            )


DROPOUT_P = 0.3
TOKENS = 40


@check("property.dropout", visible=True, target=FUNCTION)
def test_dropout_on_weights(learner):
    """With zero queries every weight is 1/S; with value = I the output is the weights themselves.

    dropout_p = 0.3 must zero about 30% of them and scale the rest by 1/0.7, in a pattern that
    differs from row to row (dropping values would zero whole columns); with a value of ones,
    each output is a row sum of the dropped weights, exactly 0 or 1/0.7 only if dropout hit the output.
    """
    n, b = TOKENS, 4
    query = torch.zeros(b, n, 8)
    key = torch.randn(b, n, 8, generator=generator("property.dropout"))
    eye = torch.eye(n).expand(b, n, n).contiguous()
    even = torch.full((b, n, n), 1.0 / n, dtype=torch.float64)
    undropped = call(learner, STAGE, FUNCTION, query, key, eye)
    if not agrees(undropped, even):
        raise CheckFailed(
            f"{FUNCTION}: the dropout check could not run. With queries of zeros every attention "
            f"weight is 1/{n}, and with value = I the output shows them, but without dropout it does "
            "not: the other checks' messages say what differs; fix that first"
        )
    revealed = call(learner, STAGE, FUNCTION, query, key, eye, dropout_p=DROPOUT_P)
    if not isinstance(revealed, torch.Tensor) or tuple(revealed.shape) != (b, n, n):
        raise CheckFailed(
            f"{FUNCTION} with dropout_p={DROPOUT_P} on a query ({b}, {n}, 8) and a value ({b}, {n}, {n}): "
            f"expected an output of shape ({b}, {n}, {n})",
            "wrong-shape",
        )
    kept = revealed.double() != 0
    dropped = 1 - kept.double().mean().item()
    if dropped < 0.01:
        raise CheckFailed(
            f"{FUNCTION} with dropout_p={DROPOUT_P} dropped no attention weight: dropout_p > 0 drops "
            "weights on every call (a function has no training mode to ask)",
            "dropout-not-applied",
        )
    if bool((kept == kept[:, :1, :]).all()):
        raise CheckFailed(
            f"{FUNCTION}: dropout zeroed whole columns of the attention weights, the same keys for "
            "every query: it hit the values, not the attention weights",
            "dropout-wrong-place",
        )
    if abs(dropped - DROPOUT_P) > 0.05:
        raise CheckFailed(
            f"{FUNCTION} with dropout_p={DROPOUT_P} dropped {dropped:.1%} of the attention weights, "
            f"expected about {DROPOUT_P:.0%}: dropout_p is the fraction dropped"
        )
    scaled = 1 / (n * (1 - DROPOUT_P))
    if not torch.allclose(
        revealed.double()[kept], torch.full((int(kept.sum()),), scaled, dtype=torch.float64), atol=1e-5
    ):
        raise CheckFailed(
            f"{FUNCTION}: the attention weights dropout keeps should be scaled by 1/(1 - dropout_p) = "
            f"{1 / (1 - DROPOUT_P):.4g}, to 1/{n} * {1 / (1 - DROPOUT_P):.4g} = {scaled:.4g}; they "
            f"are {revealed.double()[kept][0].item():.4g}",
            "dropout-not-rescaled",
        )
    sums = call(learner, STAGE, FUNCTION, query, key, torch.ones(b, n, 1), dropout_p=DROPOUT_P)
    rows = cast(torch.Tensor, sums).double().flatten()  # a tensor, as `revealed` above was
    if bool(((rows == 0) | ((rows - 1 / (1 - DROPOUT_P)).abs() < 1e-5)).all()):
        raise CheckFailed(f"{FUNCTION}: dropout hit the output, not the attention weights", "dropout-wrong-place")


def _inputs_cases(rng: torch.Generator) -> list[list]:
    q, k, v = qkv(rng, (2,), 4, 6, 8, 3)
    # positional, in the documented order: attn_mask, dropout_p, is_causal
    return [[q, k, v, mixed_mask(rng, (4, 6))], [q, k, v, None, 0.0, True], [q, k, v, torch.randn(4, 6, generator=rng)]]


@check("property.inputs_kept", visible=True, target=FUNCTION)
def test_inputs_kept(learner):
    for args in _inputs_cases(generator("property.inputs_kept")):
        expect_inputs_kept(learner, STAGE, {FUNCTION: args})


@check("note.fixed_device", visible=True, target=FUNCTION)
def test_no_fixed_device(learner):
    """A note: what we know beyond the book, which costs nothing unless an instructor prices it."""
    for args in _inputs_cases(generator("note.fixed_device")):
        expect_device_followed(learner, STAGE, {FUNCTION: args})


# Every keyword argument, at its default: a caller may name any of them.
DEFAULTS = {"attn_mask": None, "dropout_p": 0.0, "is_causal": False, "scale": None, "enable_gqa": False}
SIGNATURE = (
    f"{FUNCTION}(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False)"
)


@check("structure.signature", visible=True, target=FUNCTION)
def test_signature(learner):
    """Callers name the arguments (is_causal=True), or pass the first six in order, as with torch's function.

    Each way of calling is judged against the same function called with the fewest keywords, so
    that a mistake in the maths, which the other checks judge, costs nothing here.
    """
    rng = generator("structure.signature")
    q, k, v = qkv(rng, (2,), 3, 5, 4, 2)
    mask = mixed_mask(rng, (3, 5))
    # (keywords of the call judged against, the other call's keywords and further positional arguments)
    ways: list[tuple[dict, dict, list, str, str]] = [
        ({}, DEFAULTS, [], "with every argument named, at its default", "with query, key and value only"),
        ({"attn_mask": mask}, {}, [mask], "with attn_mask passed 4th, by position", "with attn_mask named"),
        ({"is_causal": True}, {}, [None, 0.0, True], "with is_causal passed 6th, by position", "with is_causal named"),
    ]
    for keywords, named, positional, how, judged_against in ways:
        plain = _called(learner, [q, k, v], keywords, judged_against)
        other = _called(learner, [q, k, v, *positional], named, how)
        if not isinstance(plain, torch.Tensor) or not agrees(other, plain):
            raise CheckFailed(
                f"{FUNCTION} called {how} gives another result than called {judged_against}: "
                f"keep the signature {SIGNATURE}",
                "signature",
            )


def _called(learner: LearnerWorkers, args: list, kwargs: dict, how: str) -> object:
    try:
        return call(learner, STAGE, FUNCTION, *args, **kwargs)
    except LearnerFailure as failure:
        if failure.kind != "exception" or failure.type != "TypeError":
            raise
        raise CheckFailed(
            f"{FUNCTION} called {how} raised {failure}: keep the signature {SIGNATURE}", "signature"
        ) from None


@check(f"shortcut.{FUNCTION}", target=FUNCTION)
def test_sdpa_is_written_by_hand(learner, learner_source):
    expect_not_spelled(learner_source, STAGE, FUNCTION, ATTENTION_BY_HAND)
    rng = generator(f"shortcut.{FUNCTION}")
    case = Case(*cast(QKV, qkv(rng, (2,), 4, 6, 8, 3)), {"attn_mask": mixed_mask(rng, (4, 6))})
    reply = switched_off_reply(
        ATTENTION_BY_HAND,
        FUNCTION,
        lambda off: learner.request(
            STAGE,
            "call",
            function=FUNCTION,
            args=[case.query, case.key, case.value],
            kwargs=case.options,
            record=True,
            switched_off=off,
        ),
    )
    expect_work_recorded(reply["ops"], ATTENTION_BY_HAND, agrees(reply["result"], case.expected()), FUNCTION)
