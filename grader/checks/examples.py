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
from grader.checks.attention_probe import showing_attention
from grader.checks.causal import build_causal
from grader.checks.documented import DOCUMENTED
from grader.checks.support import (
    CheckFailed,
    LearnerFailure,
    expect_close,
    expect_seeded_module_values,
    generator,
    parameters_only,
    reference_state,
)
from grader.diagnosis import linear, multihead_variants, single_head_variants

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
