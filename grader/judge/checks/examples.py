"""Small public examples that tell the common mistakes apart, for the visible checks.

The documents' own examples cannot: their multi-head example has head_dim = 1 (so sqrt(head_dim)
= 1 and a missing scaling changes nothing), and their inputs fill the whole context. These use
head_dim = 2, fewer tokens than context_length, and d_in, d_out and the number of tokens all
different, with random weights injected; the expected output comes from grader.judge.checks.documented,
so the student release can ship them.
"""

import zlib
from typing import cast

import torch

from grader.judge.checks import documented
from grader.judge.checks.attention_probe import describe_weights, showing_attention
from grader.judge.checks.documented import DOCUMENTED
from grader.judge.checks.support import (
    CheckFailed,
    LearnerFailure,
    build,
    build_with_weights,
    expect_close,
    expect_document_values,
    expect_seeded_module_values,
    generator,
    holds_weights,
    parameters_only,
    reference_state,
)
from grader.judge.diagnosis import (
    attend,
    causal_softmax_variants,
    linear,
    multihead_variants,
    renormalize_variants,
    simple_attention_variants,
    single_head_variants,
    softmax_variants,
)
from grader.judge.verdict import attention_evidence
from grader.runner.book_calls import SIGNATURE_REFUSED

SHAPE_ERRORS = ("size of tensor", "must match", "doesn't match the broadcast shape")


def build_causal(learner, stage: int, cls: str, args: list, state: dict, inputs: list, **options) -> dict:
    """build_with_weights, naming the mask that was not cut to the number of tokens.

    Named only when proven: a shape error on fewer tokens than context_length, while the same
    module runs on exactly context_length tokens.
    """
    try:
        return build_with_weights(learner, stage, cls, args, state, inputs=inputs, **options)
    except LearnerFailure as failure:
        if inputs[0].dim() != 3:  # a module without a mask (stage 2): nothing to cut
            raise
        b, num_tokens, d_in = inputs[0].shape
        context_length = args[2]
        shape_error = failure.kind == "exception" and any(e in failure.message for e in SHAPE_ERRORS)
        if shape_error and num_tokens < context_length:
            full = torch.rand(b, context_length, d_in, generator=generator("full context"))
            try:
                build_with_weights(learner, stage, cls, args, state, inputs=[full])
            except LearnerFailure:
                raise failure from None
            raise CheckFailed(
                f"{cls}{tuple(args)} on {num_tokens} tokens (fewer than context_length "
                f"{context_length}) raised {failure}; on exactly {context_length} tokens it runs",
                "mask-not-truncated",
            ) from None
        raise


# class -> the constructor arguments of the book's seeded example
DOCUMENTED_ARGS: dict[str, list] = {
    "SelfAttention_v1": [3, 2],
    "SelfAttention_v2": [3, 2],
    "CausalAttention": [3, 2, 6, 0.0],
    "MultiHeadAttention": [3, 2, 6, 0.0, 2],
}
# class -> (constructor arguments, input shape)
EXAMPLES: dict[str, tuple[list, tuple[int, ...]]] = {
    "SelfAttention_v1": ([3, 4], (5, 3)),
    "SelfAttention_v2": ([3, 4], (5, 3)),
    "CausalAttention": ([3, 4, 6, 0.0], (2, 5, 3)),
    "MultiHeadAttention": ([3, 4, 6, 0.0, 2], (2, 5, 3)),
}
# class -> the worked example's input shape (the six-token sentence, batched twice for the later modules)
WORKED_SHAPES = {"SelfAttention_v1": (6, 3), "SelfAttention_v2": (6, 3), "CausalAttention": (2, 6, 3)}
WORKED_SHAPES["MultiHeadAttention"] = WORKED_SHAPES["CausalAttention"]
PROJECTIONS = ("W_query", "W_key", "W_value")


def _variants(cls: str, args: list, state: dict, x: torch.Tensor) -> dict[str, torch.Tensor]:
    if cls == "MultiHeadAttention":
        return multihead_variants(x, state, args[4])
    if cls == "SelfAttention_v1":
        q, k, v = (x @ state[name] for name in PROJECTIONS)
    else:
        q, k, v = (linear(x, state, name) for name in PROJECTIONS)
    return single_head_variants(q, k, v, causal=cls == "CausalAttention", d_in=args[0])


def expect_example(learner, stage: int, cls: str, qkv_bias: bool = False, worked_sizes: bool = False) -> None:
    """``cls`` with random documented weights injected must give the documented output on the example; with
    ``qkv_bias``, built with biases (where its signature takes qkv_bias: else note.signature says so, and the
    example runs without); ``worked_sizes``: on the worked example's sizes instead of the example's."""
    documented_args, shape = (DOCUMENTED_ARGS[cls], WORKED_SHAPES[cls]) if worked_sizes else EXAMPLES[cls]
    x = torch.rand(*shape, generator=generator(f"example.{cls}"))
    batched = len(shape) == 3  # and then a batch of one too, which a squeeze or a fixed batch size mishandles
    args = [*documented_args, True] if qkv_bias else documented_args
    state = parameters_only(reference_state(DOCUMENTED[cls], args, seed=zlib.crc32(cls.encode())))
    try:
        reply = build_causal(learner, stage, cls, args, state, [x, x[:1]] if batched else [x])
    except LearnerFailure as failure:
        if not qkv_bias or SIGNATURE_REFUSED not in failure.message:
            raise
        expect_example(learner, stage, cls)  # no qkv_bias in its signature: the example without biases
        return
    heads = args[4] if cls == "MultiHeadAttention" else 1
    with showing_attention(learner, stage, cls, heads=heads):
        try:
            expect_close(
                reply["outputs"][0],
                documented.output(cls, args, state, x),
                f"{cls}{tuple(args)} with random weights on a {shape} input",
                lambda: _variants(cls, args, state, x),
            )
            if batched:
                expect_close(
                    reply["outputs"][1],
                    documented.output(cls, args, state, x[:1]),
                    f"{cls}{tuple(args)} with random weights on the first item alone, a batch of one",
                )
        except CheckFailed as failed:
            _name_stray_biases(failed, reply, state, cls)
            raise


def _name_stray_biases(failed: CheckFailed, reply: dict, state: dict, cls: str) -> None:
    """``failed`` told qkv-bias-ignored where the module holds projection biases the documented one (qkv_bias=False)
    has not: they kept their random values beside the injected weights, which is what made the results differ."""
    held = [name for name, _ in reply["structure"]["parameters"]]
    stray = [
        name for name in held if name.endswith(".bias") and name not in state and name.split(".")[0] in PROJECTIONS
    ]
    if failed.hint is None and stray:
        failed.message += (
            f"\n{cls} holds the biases {', '.join(stray)} although qkv_bias=False; they keep their random values"
        )
        failed.hint = "qkv-bias-ignored"


# Functions whose result is a matrix of attention weights: a failure shows them as a heat map.
# The functions whose small example shows attention weights: their own result, or (simple_self_attention,
# whose inputs are its values) its output times the inverse of its square inputs.
WEIGHT_FUNCTIONS = ("softmax_naive", "simple_self_attention", "mask_and_renormalize", "causal_softmax")


def _function_example(function: str) -> tuple[list, torch.Tensor, dict[str, torch.Tensor]]:
    """(arguments, expected result, known mistakes' results) of a function's small example."""
    rng = generator(f"example.{function}")
    inputs, n = torch.rand(5, 3, generator=rng), 5
    if function == "attention_scores":
        return [inputs, inputs[2]], inputs @ inputs[2], {}
    if function == "softmax_naive":
        x = torch.randn(6, generator=rng)
        return [x], torch.softmax(x, dim=0), softmax_variants(x)
    if function == "context_vector":
        weights = torch.softmax(torch.randn(n, generator=rng), dim=0)
        return [inputs, weights], weights @ inputs, {}
    if function == "simple_self_attention":  # square and far from singular, for its weights to be read
        inputs = torch.rand(5, 5, generator=rng) + torch.eye(5)
        return [inputs], attend(inputs, inputs, inputs, divisor=None), simple_attention_variants(inputs)
    w = torch.softmax(torch.randn(n, n, generator=rng), dim=-1)
    if function == "mask_and_renormalize":
        return [w], documented.mask_and_renormalize(w), renormalize_variants(w)
    scores, d_k = torch.randn(n, n, generator=rng) * 3, 3
    if function == "causal_softmax":
        return [scores, d_k], documented.causal_softmax(scores, d_k), causal_softmax_variants(scores, d_k)
    raise ValueError(f"no example for {function}")


def expect_function_example(learner, stage: int, function: str) -> None:
    """``function`` on its small example: the right result, or a named mistake when the result proves one."""
    args, expected, variants = _function_example(function)
    actual = learner.request(stage, "call", function=function, args=args)["result"]
    try:
        expect_close(actual, expected, f"{function} on a small example", variants)
    except CheckFailed as failed:
        if function in WEIGHT_FUNCTIONS and isinstance(actual, torch.Tensor) and actual.shape == expected.shape:
            failed.evidence = failed.evidence or _example_weights(function, args[0], expected, actual)
        raise


def _example_weights(function: str, first: torch.Tensor, expected: torch.Tensor, actual: torch.Tensor) -> dict:
    """The heat map of a weight function's small example; ``first``: its first argument."""
    title, read = f"{function}: attention weights of a small example (rows: queries, columns: keys)", ""
    scores = first if function in ("causal_softmax", "softmax_naive") else None  # the fit finds the divisor
    if function == "simple_self_attention":  # output = weights @ inputs, inputs square: weights = output @ inputs⁻¹
        inverse = torch.linalg.inv(first.double())
        expected, actual, scores = expected.double() @ inverse, actual.double() @ inverse, first @ first.T
        read = "Worked back from your output: it should be weights @ inputs, and these inputs are square, so the "
        read += "weights are your output @ inverse(inputs). "
    if expected.dim() == 1:  # one query's weights: a map of one row
        # only softmax_naive's weights are one row, and its scores are its first argument
        expected, actual, scores = expected[None], actual[None], cast(torch.Tensor, scores)[None]
        title = f"{function}: the weights of a small example, as one row (columns: keys)"
    causal = function in ("mask_and_renormalize", "causal_softmax")
    yours, right = describe_weights(actual, scores, causal), describe_weights(expected, scores, causal)
    return attention_evidence(title, expected, actual, f"{read}Yours: {yours}. Expected: {right}")


def function_example_failure(learner, stage: int, function: str) -> CheckFailed | None:
    """How a weight function fails its small example (its map as evidence, its proven hint), for a failed
    check of the function that carries no map of its own; None where the example passes or cannot run."""
    try:
        expect_function_example(learner, stage, function)
    except CheckFailed as failed:
        return failed if failed.evidence is not None else None
    except LearnerFailure:
        return None
    return None


def fail_if_example_fails(failed: CheckFailed, run_example) -> None:
    """Raise ``failed`` told apart by a small example: with the example's proven hint and evidence when
    the example fails too, as it is when the learner's code cannot run the example; else return."""
    try:
        run_example()
    except CheckFailed as example:
        raise CheckFailed(
            f"{failed.message}\nOn a smaller example: {example.message}", example.hint, example.evidence
        ) from None
    except LearnerFailure:
        raise failed from None


def expect_function_values_explained(learner, stage: int, ids: list[str], function: str, device: str = "cpu") -> None:
    """The documents' values of a function (judged on its own inputs: see expect_document_values);
    when they differ, its small example names the mistake it proves."""
    try:
        excused = expect_document_values(learner, stage, ids, device, target=function)
    except CheckFailed as failed:
        fail_if_example_fails(failed, lambda: expect_function_example(learner, stage, function))
        raise CheckFailed(
            f"{failed.message}\n{function} gives the right result on a small example: compare your "
            "code with the worked example's steps"
        ) from None
    if excused:  # the worked examples ran it on another function's wrong results: they prove nothing of it
        try:
            expect_function_example(learner, stage, function)
        except CheckFailed as failed:
            raise CheckFailed(
                f"the worked examples run {function} on the results of another function, which are wrong, so "
                f"{function} is judged on its own small example: {failed.message}",
                failed.hint,
                failed.evidence,
            ) from None


def expect_seeded_values_explained(learner, stage: int, ids: list[str], cls: str, args: list, seed: int) -> None:
    """The documents' values of a seeded module; when they differ without a proven cause, the small
    example says whether the maths or the weights' creation is to blame, and names what it proves."""
    try:
        expect_seeded_module_values(learner, stage, ids, cls, args, seed)
    except CheckFailed as failed:
        if failed.hint is not None:
            raise
        explain_with_example(learner, stage, cls, failed, seed)


def explain_with_example(learner, stage: int, cls: str, failed: CheckFailed, seed: int) -> None:
    """Fail with ``failed``, told apart by the small example: a mistake in the maths (named when
    proven) or in how the weights are created."""
    fail_if_example_fails(failed, lambda: expect_example(learner, stage, cls))
    try:  # the small example's sizes may hide what the worked example's show (one feature per head)
        expect_example(learner, stage, cls, worked_sizes=True)
    except CheckFailed as sized:
        raise CheckFailed(
            f"{failed.message}\nWith random documented weights put into it, your {cls} computes the right output "
            f"on a small example, and not on the worked example's sizes, {tuple(DOCUMENTED_ARGS[cls])}: "
            f"{sized.message}",
            sized.hint,
            sized.evidence,
        ) from None
    except LearnerFailure:
        pass  # it cannot run there: the failure as it is says so
    if _holds_documented_weights(learner, stage, cls, seed):
        where = (
            "Its seeded weights are the documented ones too. The worked example runs the module in training "
            "mode, where dropout acts: look at what differs there."
        )
    else:
        where = "With the same seed its weights are not the documented ones: look at how it creates them."
    raise CheckFailed(
        f"{failed.message}\nWith the documented weights put into it, your {cls} computes the right "
        f"output on a small example in eval mode. {where}"
    ) from None


def _holds_documented_weights(learner, stage: int, cls: str, seed: int) -> bool:
    args = DOCUMENTED_ARGS[cls]
    try:
        state = build(learner, stage, cls, args, seed=seed, return_state=True)["state"]
    except LearnerFailure:
        return False
    expected = parameters_only(reference_state(DOCUMENTED[cls], args, seed))
    return holds_weights(state, expected)
