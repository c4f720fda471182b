"""Stage 2: SelfAttention_v1 (nn.Parameter) and SelfAttention_v2 (nn.Linear)."""

from typing import cast

import torch

from grader.judge.checks.attention_probe import expect_attention, showing_attention
from grader.judge.checks.device_note import device_hint, module_dtype_failure, raise_dtype_failures
from grader.judge.checks.examples import expect_example, expect_seeded_values_explained
from grader.judge.checks.module_structure import expect_trainable
from grader.judge.checks.shortcut import expect_attention_by_hand
from grader.judge.checks.support import (
    QKV,
    CheckFailed,
    build,
    build_with_weights,
    check,
    expect_all_close,
    expect_book_signature,
    expect_documented_names,
    expect_input_dependent,
    generator,
    reference_output,
    reference_state,
    some_right,
)
from grader.judge.class_source import init_parameters
from grader.judge.diagnosis import single_head_variants

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
    expect_seeded_values_explained(learner, STAGE, V1_VALUES, "SelfAttention_v1", [3, 2], seed=123)


@check("document.SelfAttention_v2", visible=True, target="SelfAttention_v2")
def test_document_self_attention_v2(learner):
    expect_seeded_values_explained(learner, STAGE, V2_VALUES, "SelfAttention_v2", [3, 2], seed=789)


@check("example.SelfAttention_v2", visible=True, target="SelfAttention_v2")
def test_example_self_attention_v2(learner):
    """Visible: the worked examples build v2 without biases; here qkv_bias=True, and the biases must take part."""
    expect_example(learner, STAGE, "SelfAttention_v2", qkv_bias=True)


def _projections(state: dict, x: torch.Tensor, linear: bool) -> list[torch.Tensor]:
    if linear:
        return [x @ state[f"{n}.weight"].T + state.get(f"{n}.bias", 0) for n in NAMES]
    return [x @ state[n] for n in NAMES]


def _random_check(learner, reference, cls: str, linear: bool, source: bytes | None = None) -> None:
    rng, cases = generator(f"random.{cls}"), cast(list[tuple], [])
    # A v2 that takes no qkv_bias (read from the judge's copy of the file) is graded without biases here:
    # the structure check alone prices the missing parameter.
    biased = linear and "qkv_bias" in (init_parameters(source, cls) or ["qkv_bias"])
    for index, (num_tokens, d_in, d_out) in enumerate(SHAPES):
        args = [d_in, d_out] + ([index == 3 and biased] if linear else [])  # the last v2 case has biases
        state = reference_state(reference.name(cls), args, seed=1000 + index)
        x = torch.rand(num_tokens, d_in, generator=rng)
        try:
            reply = build_with_weights(learner, STAGE, cls, args, state, inputs=[x])
        except CheckFailed as failed:  # weights refused (a bias qkv_bias asked for): the cases before may be right
            failed.some_right = some_right(cases)
            raise
        expected = reference_output(reference.name(cls), args, state, x)
        cases.append(
            (
                reply["outputs"][0],
                expected,
                f"{cls}{tuple(args)} on {num_tokens} token(s)",
                lambda state=state, x=x, d_in=d_in: single_head_variants(
                    *cast(QKV, _projections(state, x, linear)), causal=False, d_in=d_in
                ),
            )
        )
    with showing_attention(learner, STAGE, cls):
        expect_all_close(cases)
    expect_input_dependent([output for output, *_ in cases[2:]], cls)


@check("random.SelfAttention_v1", target="SelfAttention_v1")
def test_random_self_attention_v1(learner, reference):
    _random_check(learner, reference, "SelfAttention_v1", linear=False)


@check("random.SelfAttention_v2", target="SelfAttention_v2")
def test_random_self_attention_v2(learner, reference, learner_source):
    _random_check(learner, reference, "SelfAttention_v2", linear=True, source=learner_source[STAGE])


@check("property.attention_rows")
def test_attention_weights_are_distributions(learner):
    """Each module's attention weights, read with one-hot tokens and W_value = I, are the expected ones."""
    rng = generator("property.attention_rows")
    for cls in ("SelfAttention_v1", "SelfAttention_v2"):
        expect_attention(learner, STAGE, cls, n=5, heads=1, rng=rng)


@check("structure.SelfAttention_v1", visible=True, target="SelfAttention_v1")
def test_structure_v1(learner):
    shape = build(learner, STAGE, "SelfAttention_v1", [4, 3])["structure"]
    if not shape["weighted_modules"]:
        expect_documented_names(
            "SelfAttention_v1",
            [[name, "Parameter"] for name in shape["direct_parameters"]],
            [[name, "Parameter"] for name in NAMES],
        )
    if shape["direct_parameters"] != list(NAMES) or shape["weighted_modules"]:
        plain = [name for name in NAMES if name in shape["plain_tensors"]]
        # three nn.Linear and no parameter of its own: SelfAttention_v2's layers under v1's name
        linears = not shape["direct_parameters"] and [kind for _, kind in shape["modules"]] == ["Linear"] * len(NAMES)
        hint = (
            "not-parameters"
            if plain
            else "param-init-order"
            if sorted(shape["direct_parameters"]) == sorted(NAMES) and not shape["modules"]
            else "weights-layout"
            if linears
            else None
        )
        raise CheckFailed(
            "SelfAttention_v1 should hold exactly three nn.Parameter named W_query, W_key, W_value, created in that "
            f"order; it holds parameters {shape['direct_parameters']} and modules {shape['modules']}"
            + (f", and plain tensors {plain}" if plain else "")
            + (
                ": nn.Linear layers, SelfAttention_v2's way, each weight (d_out, d_in) and drawn otherwise than "
                "the book's torch.rand(d_in, d_out)"
                if linears
                else ""
            ),
            hint,
        )
    wrong = [(n, s) for n, s in shape["parameters"] if s != [4, 3]]
    if wrong:
        transposed = all(s == [3, 4] for _, s in wrong)
        raise CheckFailed(
            f"SelfAttention_v1(4, 3): each weight should have shape (d_in, d_out) = (4, 3); got {wrong}"
            + (": (d_out, d_in), nn.Linear's layout" if transposed else ""),
            "weights-layout" if transposed else "wrong-shape",
        )
    expect_trainable("SelfAttention_v1", shape, learner, STAGE, [4, 3])


@check("structure.SelfAttention_v2", visible=True, target="SelfAttention_v2")
def test_structure_v2(learner):
    """Visible: qkv_bias's two settings are the only place a learner sees that the bias follows the argument."""
    for bias in (False, True):
        shape = build(learner, STAGE, "SelfAttention_v2", [4, 3, bias])["structure"]
        expect_documented_names("SelfAttention_v2", shape["weighted_modules"], [[n, "Linear"] for n in NAMES])
        if shape["weighted_modules"] != [[n, "Linear"] for n in NAMES]:
            raise CheckFailed(
                "SelfAttention_v2 should hold three nn.Linear named W_query, W_key, W_value, created "
                f"in that order; it holds {shape['weighted_modules']}"
            )
        expected = [
            [f"{n}.{p}", s] for n in NAMES for p, s in (("weight", [3, 4]), ("bias", [3])) if p == "weight" or bias
        ]
        if shape["parameters"] != expected:
            held = [name for name, _ in shape["parameters"]]
            # the weights as documented, and a bias where qkv_bias says none, or none where it says one
            weights_right = [[n, s] for n, s in shape["parameters"] if n.endswith(".weight")] == [
                [n, s] for n, s in expected if str(n).endswith(".weight")
            ]
            biased = {name.removesuffix(".bias") for name in held if name.endswith(".bias")}
            astray = [n for n in NAMES if (n in biased) != bias]
            hint = (
                "qkv-bias-ignored"
                if weights_right and astray and all(s == [3] for n, s in shape["parameters"] if n.endswith(".bias"))
                else "wrong-shape"
                if held == [name for name, _ in expected]
                else None
            )
            which = (
                f" ({', '.join(astray)} {'without' if bias else 'with'} a bias)" if hint == "qkv-bias-ignored" else ""
            )
            raise CheckFailed(
                f"SelfAttention_v2(4, 3, qkv_bias={bias}) should hold {expected}; "
                f"it holds {shape['parameters']}{which}",
                hint,
            )
    expect_trainable("SelfAttention_v2", shape, learner, STAGE, [4, 3])


def _shortcut_check(learner, learner_source, reference, cls: str) -> None:
    x = torch.rand(6, 3, generator=generator(f"shortcut.{cls}"))
    expect_attention_by_hand(learner, learner_source, reference, STAGE, cls, [3, 2], x)


@check("shortcut.SelfAttention_v1", target="SelfAttention_v1")
def test_shortcut_v1(learner, learner_source, reference):
    _shortcut_check(learner, learner_source, reference, "SelfAttention_v1")


@check("shortcut.SelfAttention_v2", target="SelfAttention_v2")
def test_shortcut_v2(learner, learner_source, reference):
    _shortcut_check(learner, learner_source, reference, "SelfAttention_v2")


@check("note.fixed_device", visible=True)
def test_no_fixed_device(learner):
    """A note: a forward that makes a tensor without device= (a scale, a mask) fails on a GPU; it costs nothing
    unless an instructor prices it."""
    x = torch.rand(4, 3, generator=generator("note.fixed_device"))  # (num_tokens, d_in): the book's 2-D inputs
    found = [
        device_hint(build(learner, STAGE, cls, [3, 2], device_input=x), cls)
        for cls in ("SelfAttention_v1", "SelfAttention_v2")
    ]
    if failed := [f for f in found if f is not None]:
        raise CheckFailed("\n".join(f.message for f in failed), failed[0].hint)


@check("note.fixed_dtype", visible=True)
def test_no_fixed_dtype(learner):
    """A note: a module made float64 (.double()) computes in float64."""
    x = torch.rand(4, 3, generator=generator("note.fixed_dtype"))
    raise_dtype_failures(
        [module_dtype_failure(learner, STAGE, cls, [3, 2], x) for cls in ("SelfAttention_v1", "SelfAttention_v2")]
    )


@check("note.signature", visible=True)
def test_book_signature(learner, learner_source):
    """A note: the book's signature, which the checks do not need (they call by the book's names)."""
    expect_book_signature(
        learner, learner_source[STAGE], STAGE, {"SelfAttention_v1": [3, 2], "SelfAttention_v2": [3, 2]}
    )
