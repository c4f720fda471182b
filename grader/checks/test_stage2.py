"""Stage 2: SelfAttention_v1 (nn.Parameter) and SelfAttention_v2 (nn.Linear)."""

import torch

from grader.checks.shortcut import expect_attention_by_hand
from grader.checks.support import (
    CheckFailed,
    build,
    build_with_weights,
    check,
    expect_close,
    expect_input_dependent,
    expect_seeded_module_values,
    generator,
    reference_output,
    reference_state,
)
from grader.diagnosis import single_head_variants

STAGE = 2
# (num_tokens, d_in, d_out): one token, d_out > d_in, the book's, d_in > d_out
SHAPES = [(1, 3, 2), (5, 2, 7), (6, 3, 2), (8, 6, 3)]
NAMES = ("W_query", "W_key", "W_value")

V1_VALUES = [
    "stage2.query_2", "stage2.key_2", "stage2.value_2", "stage2.attn_scores_22", "stage2.attn_scores_2",
    "stage2.attn_weights_2", "stage2.context_vec_2", "stage2.sa_v1_output", "stage2.once_upon_W_query",
    "stage2.once_upon_queries", "stage2.once_upon_scores", "stage2.once_upon_scaled_scores",
    "stage2.once_upon_attention_weights", "stage2.once_upon_sa_v1_output", "stage3.v1_before_transfer",
]  # fmt: skip
V2_VALUES = [
    "stage2.sa_v2_output", "stage2.once_upon_sa_v2_output", "stage3.v2_output",
    "stage4.sa_v2_attn_weights", "stage4.masked_scores",
]  # fmt: skip


@check("document.SelfAttention_v1", visible=True, target="SelfAttention_v1")
def test_document_self_attention_v1(learner):
    expect_seeded_module_values(learner, STAGE, V1_VALUES, "SelfAttention_v1", [3, 2], seed=123)


@check("document.SelfAttention_v2", visible=True, target="SelfAttention_v2")
def test_document_self_attention_v2(learner):
    expect_seeded_module_values(learner, STAGE, V2_VALUES, "SelfAttention_v2", [3, 2], seed=789)


def _projections(state: dict, x: torch.Tensor, linear: bool) -> list[torch.Tensor]:
    if linear:
        return [x @ state[f"{n}.weight"].T + state.get(f"{n}.bias", 0) for n in NAMES]
    return [x @ state[n] for n in NAMES]


def _random_check(learner, reference, cls: str, linear: bool) -> None:
    rng, outputs = generator(f"random.{cls}"), []
    for index, (num_tokens, d_in, d_out) in enumerate(SHAPES):
        args = [d_in, d_out] + ([index == 3] if linear else [])  # the last v2 case has biases
        state = reference_state(reference.name(cls), args, seed=1000 + index)
        x = torch.rand(num_tokens, d_in, generator=rng)
        reply = build_with_weights(learner, STAGE, cls, args, state, inputs=[x])
        outputs.append(reply["outputs"][0])
        expected = reference_output(reference.name(cls), args, state, x)
        expect_close(outputs[-1], expected, f"{cls}{tuple(args)} on {num_tokens} token(s)",
                     lambda: single_head_variants(*_projections(state, x, linear), causal=False))
    expect_input_dependent(outputs[2:], cls)


@check("random.SelfAttention_v1", target="SelfAttention_v1")
def test_random_self_attention_v1(learner, reference):
    _random_check(learner, reference, "SelfAttention_v1", linear=False)


@check("random.SelfAttention_v2", target="SelfAttention_v2")
def test_random_self_attention_v2(learner, reference):
    _random_check(learner, reference, "SelfAttention_v2", linear=True)


@check("property.attention_rows")
def test_attention_weights_are_distributions(learner):
    """With x = I and W_value = I a module returns its own attention weights: rows must sum to 1."""
    n = 5
    rng = generator("property.attention_rows")
    eye = torch.eye(n)
    cases = {
        "SelfAttention_v1": {"W_query": torch.randn(n, n, generator=rng), "W_key": torch.randn(n, n, generator=rng),
                             "W_value": eye},
        "SelfAttention_v2": {"W_query.weight": torch.randn(n, n, generator=rng),
                             "W_key.weight": torch.randn(n, n, generator=rng), "W_value.weight": eye},
    }
    for cls, state in cases.items():
        weights = build(learner, STAGE, cls, [n, n], state=state, inputs=[eye])["outputs"][0]
        if not isinstance(weights, torch.Tensor) or weights.shape != (n, n):
            raise CheckFailed(f"{cls} on 5 tokens of size 5 gave no (5, 5) result", "wrong-shape")
        if (weights < 0).any():
            raise CheckFailed(f"{cls}: an attention weight is negative", "softmax-not-exponentiated")
        expect_close(weights.sum(dim=-1), torch.ones(n), f"{cls}: the sum of each row of attention weights",
                     variants={"softmax-wrong-dim": weights.sum(dim=0)})


@check("structure.SelfAttention_v1")
def test_structure_v1(learner):
    shape = build(learner, STAGE, "SelfAttention_v1", [4, 3])["structure"]
    if shape["direct_parameters"] != list(NAMES) or shape["modules"]:
        raise CheckFailed(
            "SelfAttention_v1 should hold exactly three nn.Parameter named W_query, W_key, W_value, created in that "
            f"order; it holds parameters {shape['direct_parameters']} and modules {shape['modules']}",
            "param-init-order" if sorted(shape["direct_parameters"]) == sorted(NAMES) else None,
        )
    wrong = [(n, s) for n, s in shape["parameters"] if s != [4, 3]]
    if wrong:
        raise CheckFailed(f"SelfAttention_v1(4, 3): each weight should have shape (d_in, d_out) = (4, 3); got {wrong}",
                          "wrong-shape")


@check("structure.SelfAttention_v2")
def test_structure_v2(learner):
    for bias in (False, True):
        shape = build(learner, STAGE, "SelfAttention_v2", [4, 3, bias])["structure"]
        if shape["modules"] != [[n, "Linear"] for n in NAMES]:
            raise CheckFailed("SelfAttention_v2 should hold three nn.Linear named W_query, W_key, W_value, created "
                              f"in that order; it holds {shape['modules']}")
        expected = [[f"{n}.{p}", s] for n in NAMES for p, s in (("weight", [3, 4]), ("bias", [3])) if p == "weight" or bias]
        if shape["parameters"] != expected:
            raise CheckFailed(f"SelfAttention_v2(4, 3, qkv_bias={bias}) should hold {expected}; "
                              f"it holds {shape['parameters']}", "wrong-shape")


def _shortcut_check(learner, learner_source, reference, cls: str) -> None:
    x = torch.rand(6, 3, generator=generator(f"shortcut.{cls}"))
    expect_attention_by_hand(learner, learner_source, reference, STAGE, cls, [3, 2], x)


@check("shortcut.SelfAttention_v1", target="SelfAttention_v1")
def test_shortcut_v1(learner, learner_source, reference):
    _shortcut_check(learner, learner_source, reference, "SelfAttention_v1")


@check("shortcut.SelfAttention_v2", target="SelfAttention_v2")
def test_shortcut_v2(learner, learner_source, reference):
    _shortcut_check(learner, learner_source, reference, "SelfAttention_v2")
