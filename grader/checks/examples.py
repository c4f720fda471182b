"""Small public examples that tell the common mistakes apart, for the visible checks.

The documents' own examples cannot: their multi-head example has head_dim = 1 (so sqrt(head_dim)
= 1 and a missing scaling changes nothing), and their inputs fill the whole context. These use
head_dim = 2, fewer tokens than context_length, and d_in, d_out and the number of tokens all
different, with random weights injected; the expected output comes from grader.checks.documented,
so the student release can ship them.
"""

import zlib

import torch

from grader.checks import documented
from grader.checks.attention_probe import describe_weights, showing_attention
from grader.checks.documented import DOCUMENTED
from grader.checks.support import (
    CheckFailed,
    LearnerFailure,
    build_with_weights,
    expect_close,
    expect_document_values,
    expect_seeded_module_values,
    generator,
    parameters_only,
    reference_state,
)
from grader.diagnosis import attend, linear, multihead_variants, single_head_variants
from grader.verdict import attention_evidence

SHAPE_ERRORS = ("size of tensor", "must match", "doesn't match the broadcast shape")


def build_causal(learner, stage: int, cls: str, args: list, state: dict, inputs: list, **options) -> dict:
    """build_with_weights, naming the mask that was not cut to the number of tokens.

    Named only when proven: a shape error on fewer tokens than context_length, while the same
    module runs on exactly context_length tokens.
    """
    try:
        return build_with_weights(learner, stage, cls, args, state, inputs=inputs, **options)
    except LearnerFailure as failure:
        b, num_tokens, d_in = inputs[0].shape
        context_length = args[2]
        shape_error = failure.kind == "exception" and any(e in failure.message for e in SHAPE_ERRORS)
        if shape_error and num_tokens < context_length:
            full = torch.rand(b, context_length, d_in, generator=generator("full context"))
            try:
                build_with_weights(learner, stage, cls, args, state, inputs=[full])
            except LearnerFailure:
                raise failure from None
            raise CheckFailed(f"{cls}{tuple(args)} on {num_tokens} tokens (fewer than context_length "
                              f"{context_length}) raised {failure}, and runs on {context_length} tokens",
                              "mask-not-truncated") from None
        raise


# class -> (constructor arguments, input shape)
EXAMPLES = {
    "SelfAttention_v1": ([3, 4], (5, 3)),
    "SelfAttention_v2": ([3, 4], (5, 3)),
    "CausalAttention": ([3, 4, 6, 0.0], (2, 5, 3)),
    "MultiHeadAttention": ([3, 4, 6, 0.0, 2], (2, 5, 3)),
}
PROJECTIONS = ("W_query", "W_key", "W_value")


def _variants(cls: str, args: list, state: dict, x: torch.Tensor) -> dict[str, torch.Tensor]:
    if cls == "MultiHeadAttention":
        return multihead_variants(x, state, args[4])
    if cls == "SelfAttention_v1":
        q, k, v = (x @ state[name] for name in PROJECTIONS)
    else:
        q, k, v = (linear(x, state, name) for name in PROJECTIONS)
    return single_head_variants(q, k, v, causal=cls == "CausalAttention", d_in=args[0])


def expect_example(learner, stage: int, cls: str) -> None:
    """``cls`` with random documented weights injected must give the documented output on the example."""
    args, shape = EXAMPLES[cls]
    state = parameters_only(reference_state(DOCUMENTED[cls], args, seed=zlib.crc32(cls.encode())))
    x = torch.rand(*shape, generator=generator(f"example.{cls}"))
    actual = build_causal(learner, stage, cls, args, state, [x])["outputs"][0]
    heads = args[4] if cls == "MultiHeadAttention" else 1
    with showing_attention(learner, stage, cls, heads=heads):
        expect_close(actual, documented.output(cls, args, state, x),
                     f"{cls}{tuple(args)} with random weights on a {shape} input",
                     lambda: _variants(cls, args, state, x))


# Functions whose result is a matrix of attention weights: a failure shows them as a heat map.
WEIGHT_FUNCTIONS = ("mask_and_renormalize", "causal_softmax")


def _masked_renormalized(w: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    return (w * keep) / (w * keep).sum(-1, keepdim=True)


def _causal(scores: torch.Tensor, d_k: float, hidden: torch.Tensor, **options) -> torch.Tensor:
    return torch.softmax(scores.masked_fill(hidden, -torch.inf) / d_k**0.5, **{"dim": -1, **options})


def _function_example(function: str) -> tuple[list, torch.Tensor, dict[str, torch.Tensor]]:
    """(arguments, expected result, known mistakes' results) of a function's small example."""
    rng = generator(f"example.{function}")
    inputs, n = torch.rand(5, 3, generator=rng), 5
    below, above = torch.tril(torch.ones(n, n)), torch.triu(torch.ones(n, n))
    hidden = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
    if function == "attention_scores":
        return [inputs, inputs[2]], inputs @ inputs[2], {}
    if function == "softmax_naive":
        x = torch.randn(6, generator=rng)
        return [x], torch.softmax(x, dim=0), {"softmax-not-exponentiated": x / x.sum(),
                                             "softmax-not-exponentiated:the numerator has exp() but the sum below it does not": x.exp() / x.sum()}
    if function == "context_vector":
        weights = torch.softmax(torch.randn(n, generator=rng), dim=0)
        return [inputs, weights], weights @ inputs, {}
    if function == "simple_self_attention":
        return [inputs], attend(inputs, inputs, inputs, divisor=None), {
            "softmax-wrong-dim": attend(inputs, inputs, inputs, divisor=None, softmax_dim=-2),
            "softmax-not-exponentiated": attend(inputs, inputs, inputs, divisor=None, exponentiate=False),
            "wrong-scaling:the scores are divided by sqrt(d_in)": attend(inputs, inputs, inputs, divisor=3**0.5),
            "wrong-scaling:the scores are divided by sqrt(num_tokens)": attend(inputs, inputs, inputs, divisor=n**0.5)}
    w = torch.softmax(torch.randn(n, n, generator=rng), dim=-1)
    if function == "mask_and_renormalize":
        return [w], _masked_renormalized(w, below), {
            "mask-not-renormalized": w * below, "mask-not-causal": w,
            "mask-includes-diagonal": _masked_renormalized(w, torch.tril(torch.ones(n, n), diagonal=-1)),
            "mask-wrong-triangle": _masked_renormalized(w, above), "mask-wrong-triangle:and the rows are not renormalized": w * above}
    scores, d_k = torch.randn(n, n, generator=rng) * 3, 3
    if function == "causal_softmax":
        diagonal_too = torch.triu(torch.ones(n, n, dtype=torch.bool))
        return [scores, d_k], _causal(scores, d_k, hidden), {
            "missing-scaling": _causal(scores, 1, hidden),
            "wrong-scaling:the scores are divided by d_k itself": _causal(scores, d_k**2, hidden),
            "wrong-scaling:the scores are divided by sqrt(num_tokens)": _causal(scores, n, hidden),
            "scaling-after-softmax": _causal(scores, 1, hidden) / d_k**0.5,
            "mask-zero-instead-of-inf": torch.softmax(scores.masked_fill(hidden, 0.0) / d_k**0.5, dim=-1),
            "mask-includes-diagonal": _causal(scores, d_k, diagonal_too),
            "mask-wrong-triangle": _causal(scores, d_k, ~diagonal_too),
            "softmax-wrong-dim": _causal(scores, d_k, hidden, dim=-2),
            "mask-not-causal": torch.softmax(scores / d_k**0.5, dim=-1)}
    raise ValueError(f"no example for {function}")


def expect_function_example(learner, stage: int, function: str) -> None:
    """``function`` on its small example: the right result, or a named mistake when the result proves one."""
    args, expected, variants = _function_example(function)
    actual = learner.request(stage, "call", function=function, args=args)["result"]
    try:
        expect_close(actual, expected, f"{function} on a small example", variants)
    except CheckFailed as failed:
        if function in WEIGHT_FUNCTIONS and isinstance(actual, torch.Tensor) and actual.shape == expected.shape:
            scores = args[0] if function == "causal_softmax" else None  # the raw scores: the fit finds the divisor
            note = f"yours: {describe_weights(actual, scores)}. Expected: {describe_weights(expected, scores)}"
            failed.evidence = attention_evidence(f"{function}: attention weights of a small example (rows: queries, "
                                                 "columns: keys)", expected, actual, note)
        raise


def expect_function_values_explained(learner, stage: int, ids: list[str], function: str,
                                     upstream_ids: tuple[str, ...] = (), device: str = "cpu") -> None:
    """The documents' values of a function; when they differ, its small example names the mistake it proves.

    ``upstream_ids``: the values of the functions whose results these values are computed from. When
    those are wrong too and the function is right on its own example, the function is not to blame:
    it is judged on its own inputs, and passes.
    """
    try:
        expect_document_values(learner, stage, ids, device)
    except CheckFailed as failed:
        try:
            expect_function_example(learner, stage, function)
        except CheckFailed as example:
            raise CheckFailed(f"{failed.message}\nOn a smaller example: {example.message}", example.hint,
                              example.evidence) from None
        except LearnerFailure:
            raise failed from None
        if upstream_ids and _values_differ(learner, stage, list(upstream_ids)):
            return  # right on its own inputs: the values above differ because of what it was given
        raise CheckFailed(f"{failed.message}\n{function} gives the right result on a small example: compare your "
                          "code with the worked example's steps") from None


def _values_differ(learner, stage: int, ids: list[str]) -> bool:
    try:
        expect_document_values(learner, stage, ids)
    except CheckFailed:
        return True
    return False


def expect_seeded_values_explained(learner, stage: int, ids: list[str], cls: str, args: list, seed: int) -> None:
    """The documents' values of a seeded module; when they differ without a proven cause, the small
    example says whether the maths or the weights' creation is to blame, and names what it proves."""
    try:
        expect_seeded_module_values(learner, stage, ids, cls, args, seed)
    except CheckFailed as failed:
        if failed.hint is not None:
            raise
        explain_with_example(learner, stage, cls, failed)


def explain_with_example(learner, stage: int, cls: str, failed: CheckFailed) -> None:
    """Fail with ``failed``, told apart by the small example: a mistake in the maths (named when
    proven) or in how the weights are created."""
    try:
        expect_example(learner, stage, cls)
    except CheckFailed as example:
        raise CheckFailed(f"{failed.message}\nOn a smaller example: {example.message}", example.hint,
                          example.evidence) from None
    except LearnerFailure:
        raise failed from None
    raise CheckFailed(f"{failed.message}\nWith the documented weights put into it, your {cls} computes the right "
                      "output on a small example: look at how it creates its weights.") from None
