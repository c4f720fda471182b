"""Stage 5: MultiHeadAttentionWrapper (judged with stand-in heads) and MultiHeadAttention.

In this stage's worker, `CausalAttention` is a stand-in with the documented attributes whose
forward is W_value(x): the wrapper is graded on what it does with its heads, so a mistake in
stage 4 costs nothing here.
"""

from collections.abc import Sequence

import torch

from grader.judge.checks import documented
from grader.judge.checks.attention_probe import showing_attention
from grader.judge.checks.causal import expect_causal_and_independent, run_injected
from grader.judge.checks.device_note import expect_module_dtype_followed, expect_no_fixed_device
from grader.judge.checks.dropout_probe import expect_dropout_on_weights, one_head_state
from grader.judge.checks.examples import expect_example, explain_with_example
from grader.judge.checks.module_structure import (
    expect_documented_mask,
    expect_forward_keeps_buffers,
    expect_projection_biases,
    expect_trainable,
    mask_buffer_hint,
)
from grader.judge.checks.naming import out_proj_hint
from grader.judge.checks.shortcut import expect_attention_by_hand
from grader.judge.checks.support import (
    CheckFailed,
    build,
    check,
    expect_all_close,
    expect_book_signature,
    expect_close,
    expect_document_values,
    expect_documented_names,
    generator,
    holds_weights,
    init_order_hint,
    reference_state,
)
from grader.judge.diagnosis import multihead_variants
from grader.judge.document_values import document_values, errata
from grader.runner.document_examples import journey_batch
from grader.sandbox.workers import LearnerFailure

STAGE = 5
WRAPPER = "MultiHeadAttentionWrapper"
# (batch, num_tokens, d_in, d_out, context_length, num_heads)
WRAPPER_SHAPES = [(1, 1, 3, 2, 4, 1), (3, 5, 4, 2, 8, 3), (2, 6, 3, 4, 6, 2)]
MHA_SHAPES = [(1, 1, 3, 4, 4, 2), (3, 5, 4, 6, 8, 3), (2, 6, 3, 8, 6, 4), (4, 7, 6, 6, 7, 1), (2, 4, 5, 12, 6, 6)]


def expect_concatenated_heads(reply: dict, what: str, num_heads: int) -> torch.Tensor:
    """The wrapper's output must be its heads' outputs side by side, in order."""
    heads = reply["head_outputs"][0]
    if len(heads) != num_heads:
        raise CheckFailed(f"{what}: expected {num_heads} heads in self.heads, found {len(heads)}", "wrapper-head-count")
    output = reply["outputs"][0]
    if not all(isinstance(h, torch.Tensor) for h in heads):
        raise CheckFailed(f"{what}: a head returned no tensor")
    expect_close(
        output,
        torch.cat(heads, dim=-1),
        f"{what}: the output against its heads' outputs concatenated",
        variants={
            **{
                f"wrapper-concat-dim:the heads joined along dim={dim}, the {axis}": torch.cat(heads, dim=dim)
                for dim, axis in ((1, "tokens' axis"), (0, "batch's axis"))
            },
            # torch.stack(heads, dim=-1) flattened: each feature of every head, then the next feature
            "wrapper-concat-dim:the heads stacked on a new last axis and flattened, their features interleaved": (
                torch.stack(heads, dim=-1).flatten(-2)
            ),
        },
    )
    return output


@check("document.MultiHeadAttentionWrapper", visible=True, target=WRAPPER)
def test_document_wrapper(learner):
    args: list = [3, 2, 6, 0.0, 2]  # ints and a float, as build takes them
    reply = build(
        learner,
        STAGE,
        WRAPPER,
        args,
        seed=123,
        inputs=[journey_batch(torch.device("cpu"))],
        heads=True,
        return_state=True,
    )
    expect_concatenated_heads(reply, "MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2)", 2)
    expected_state = reference_state(documented.MultiHeadAttentionWrapper, args, seed=123)
    learner_state = reply["state"]
    if not any(k.startswith("heads.") for k in learner_state):
        raise CheckFailed(
            "the wrapper's state_dict holds no heads: keep them in an nn.ModuleList (a plain Python "
            "list hides them from .parameters(), state_dict() and .to())",
            "heads-not-registered",
        )
    widths = sorted({tuple(v.shape)[0] for k, v in learner_state.items() if k.endswith("W_query.weight")})
    if widths and widths != [args[1]]:
        raise CheckFailed(
            f"MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2) builds heads {', '.join(map(str, widths))} "
            f"feature(s) wide (their W_query's outputs): each head is a whole CausalAttention(d_in, d_out, ...) "
            f"with d_out = {args[1]} outputs",
            "wrapper-head-size",
        )
    if not holds_weights(learner_state, expected_state):
        raise CheckFailed(
            "with torch.manual_seed(123) the heads' weights are not the book's: build the heads in a "
            "list comprehension, CausalAttention(d_in, d_out, context_length, dropout, qkv_bias) each",
            init_order_hint(learner, STAGE, WRAPPER, args, 123, maths_checked=True),
        )
    # The heads hold the book's weights and are concatenated in order: what the book prints follows.
    batch = journey_batch(torch.device("cpu"))
    output = torch.cat(
        [
            documented.attention(batch, learner_state, f"heads.{h}.", causal=True, transposed=True)
            for h in range(args[-1])
        ],
        dim=-1,
    )
    value = next(v for v in document_values(STAGE) if v.id == "stage5.wrapper_output")
    problem = value.check(output)
    if problem is not None:
        raise CheckFailed(f"{value.citation}: {problem}")
    expect_document_values(learner, STAGE, ["stage5.exercise_3_2_shape"])


@check("document.MultiHeadAttention", visible=True, target="MultiHeadAttention")
def test_document_multihead(learner):
    try:
        expect_document_values(learner, STAGE, ["stage5.multihead_output", "stage5.exercise_3_3_parameter_count"])
    except CheckFailed as failed:
        copied = next(e for e in errata() if e.id == "erratum.002_multihead_scaling")
        if copied.check(learner.request(STAGE, "recipe", calls=copied.uses, name=copied.recipe)) is None:
            raise CheckFailed(
                failed.message + "\nYour MultiHeadAttention reproduces a known slip in a retelling of the chapter, "
                "which divides by sqrt(d_out) instead of sqrt(head_dim) (see docs/errata.md)",
                "wrong-scaling",
            ) from None
        hint = init_order_hint(learner, STAGE, "MultiHeadAttention", [3, 2, 6, 0.0, 2], 123)
        if hint is not None:
            raise CheckFailed(failed.message, hint) from None
        explain_with_example(learner, STAGE, "MultiHeadAttention", failed, 123)


@check("example.MultiHeadAttention", visible=True, target="MultiHeadAttention")
def test_example_multihead(learner):
    expect_example(learner, STAGE, "MultiHeadAttention")


def expect_wrapper_shapes(learner, rng: torch.Generator, shapes: Sequence[tuple[int, ...]]) -> None:
    """The wrapper on each (batch, num_tokens, d_in, d_out, context_length, num_heads): its heads' outputs side by
    side, num_heads * d_out features."""
    for b, n, d_in, d_out, context_length, num_heads in shapes:
        args = [d_in, d_out, context_length, 0.0, num_heads]
        reply = build(learner, STAGE, WRAPPER, args, inputs=[torch.rand(b, n, d_in, generator=rng)], heads=True)
        output = expect_concatenated_heads(reply, f"MultiHeadAttentionWrapper{tuple(args)}", num_heads)
        if tuple(output.shape) != (b, n, num_heads * d_out):
            raise CheckFailed(
                f"MultiHeadAttentionWrapper{tuple(args)}: expected shape {(b, n, num_heads * d_out)}, "
                f"got {tuple(output.shape)}",
                "wrong-shape",
            )


@check("example.MultiHeadAttentionWrapper", visible=True, target=WRAPPER)
def test_example_wrapper(learner):
    """Three heads and five tokens, where the worked example has two and six."""
    expect_wrapper_shapes(learner, generator("example.MultiHeadAttentionWrapper"), [(2, 5, 3, 2, 6, 3)])


@check("random.MultiHeadAttentionWrapper", target=WRAPPER)
def test_random_wrapper(learner):
    expect_wrapper_shapes(learner, generator("random.MultiHeadAttentionWrapper"), WRAPPER_SHAPES)


@check("random.MultiHeadAttention", target="MultiHeadAttention")
def test_random_multihead(learner, reference):
    rng, cases = generator("random.MultiHeadAttention"), []
    for index, (b, n, d_in, d_out, context_length, num_heads) in enumerate(MHA_SHAPES):
        args = [d_in, d_out, context_length, 0.0, num_heads]
        x = torch.rand(b, n, d_in, generator=rng)
        actual, expected, state = run_injected(learner, reference, STAGE, "MultiHeadAttention", args, 9000 + index, x)
        cases.append(
            (
                actual,
                expected,
                f"MultiHeadAttention{tuple(args)} on a {(b, n, d_in)} batch",
                lambda x=x, state=state, num_heads=num_heads: multihead_variants(x, state, num_heads),
            )
        )
    with showing_attention(learner, STAGE, "MultiHeadAttention", heads=2):
        expect_all_close(cases)


@check("property.MultiHeadAttention", target="MultiHeadAttention")
def test_multihead_properties(learner, reference):
    expect_causal_and_independent(
        learner,
        reference,
        STAGE,
        "MultiHeadAttention",
        [5, 6, 10, 0.5, 3],
        lambda x, state: multihead_variants(x, state, 3),
    )


@check("property.dropout.MultiHeadAttention", visible=True, target="MultiHeadAttention")
def test_multihead_dropout(learner):
    expect_dropout_on_weights(
        learner, STAGE, "MultiHeadAttention", args_for=lambda n, d_out: [n, d_out, n, 0.5, 1], state_for=one_head_state
    )


@check("structure.MultiHeadAttentionWrapper", visible=True, target=WRAPPER)
def test_wrapper_structure(learner):
    shape = build(learner, STAGE, WRAPPER, [3, 4, 6, 0.5, 2])["structure"]
    top = [m for m in shape["weighted_modules"] if "." not in m[0]]  # a parameter-free extra costs nothing
    heads = [m for m in shape["modules"] if m[0].count(".") == 1 and m[0].startswith("heads.")]
    if top != [["heads", "ModuleList"]] or len(heads) != 2:
        extra = [name for name, _ in top if name != "heads"]  # the heads right, and a layer of its own beside them
        raise CheckFailed(
            f"MultiHeadAttentionWrapper(..., num_heads=2) should hold one nn.ModuleList named heads "
            f"with 2 distinct heads; it holds {top}, with {len(heads)} distinct head module(s)",
            "wrapper-extra-layer" if ["heads", "ModuleList"] in top and extra and len(heads) == 2 else None,
        )
    parameters = dict((name, size) for name, size in shape["parameters"])
    size = parameters.get("heads.0.W_query.weight")
    if size is not None and size != [4, 3]:
        raise CheckFailed(
            f"MultiHeadAttentionWrapper(3, 4, 6, 0.5, num_heads=2): each head's W_query should be "
            f"nn.Linear(3, 4), weight (4, 3); it is {tuple(size)}",
            "wrapper-head-size" if size == [2, 3] else None,
        )
    biased = "heads.0.W_query.bias" in parameters
    dropout = shape["dropout_p"].get("heads.0.dropout")
    if biased or dropout != 0.5:
        swapped = isinstance(dropout, bool)  # a bool where the rate goes: qkv_bias went in dropout's place
        raise CheckFailed(
            f"MultiHeadAttentionWrapper(3, 4, 6, dropout=0.5, num_heads=2, qkv_bias=False): its heads "
            f"should have dropout 0.5 and no bias; head 1 has dropout {dropout} and "
            f"{'a' if biased else 'no'} bias",
            "arguments-swapped" if swapped else "dropout-not-passed" if dropout != 0.5 else "qkv-bias-ignored",
        )
    with_bias = dict(build(learner, STAGE, WRAPPER, [3, 4, 6, 0.5, 2, True])["structure"]["parameters"])
    if "heads.0.W_query.bias" not in with_bias:
        raise CheckFailed(
            "MultiHeadAttentionWrapper(3, 4, 6, 0.5, num_heads=2, qkv_bias=True): its heads should have biases; "
            "head 1 has none: pass qkv_bias on to each CausalAttention",
            "qkv-bias-ignored",
        )
    expect_trainable(WRAPPER, shape, learner, STAGE, None)  # its heads: stage 4 stand-ins


@check("structure.MultiHeadAttention", visible=True, target="MultiHeadAttention")
def test_multihead_structure(learner):
    reply = build(learner, STAGE, "MultiHeadAttention", [4, 6, 5, 0.1, 3])
    shape = reply["structure"]
    expected_linears = [["W_query", [6, 4]], ["W_key", [6, 4]], ["W_value", [6, 4]], ["out_proj", [6, 6]]]
    linears = [[name.removesuffix(".weight"), s] for name, s in shape["parameters"] if name.endswith(".weight")]
    expect_documented_names("MultiHeadAttention", linears, expected_linears)
    if linears != expected_linears:
        hint = (
            ("not-parameters" if shape.get("plain_tensors") else None)  # no weight registered: nothing is missing
            if not linears
            else out_proj_hint(linears, d_in=4, d_out=6)
            or ("param-init-order" if sorted(linears) == sorted(expected_linears) else None)
        )
        raise CheckFailed(
            f"MultiHeadAttention(4, 6, ...) should hold W_query, W_key, W_value (6 x 4) and out_proj "
            f"(6 x 6) weights, in that order; it holds {linears}",
            hint,
        )
    biases = [name for name, _ in shape["parameters"] if name.endswith(".bias") and name != "out_proj.bias"]
    if biases:
        raise CheckFailed(
            f"MultiHeadAttention(4, 6, 5, 0.1, 3) (qkv_bias=False) holds the biases {biases}", "qkv-bias-ignored"
        )
    expect_projection_biases(learner, STAGE, "MultiHeadAttention", [4, 6, 5, 0.1, 3])
    if ["out_proj.bias", [6]] not in shape["parameters"]:
        raise CheckFailed("out_proj should have a bias, whatever qkv_bias says (nn.Linear(d_out, d_out))")
    if ["mask", [5, 5]] not in shape["buffers"]:
        raise CheckFailed(
            f"MultiHeadAttention should register a (context_length, context_length) buffer named mask; "
            f"its buffers are {shape['buffers']}",
            mask_buffer_hint(shape["buffers"]),
        )
    if shape["attributes"].get("head_dim") != 2:
        raise CheckFailed(
            f"MultiHeadAttention(4, 6, 5, 0.1, num_heads=3) should set head_dim = 6 // 3 = 2; "
            f"it has {shape['attributes'].get('head_dim')}"
        )
    expect_trainable("MultiHeadAttention", shape, learner, STAGE, [4, 6, 5, 0.1, 3])
    expect_forward_keeps_buffers(learner, STAGE, "MultiHeadAttention", [4, 6, 5, 0.1, 3], tokens=3)


@check("structure.refused.MultiHeadAttention", visible=True, target="MultiHeadAttention")
def test_heads_refused(learner):
    """The documented error: a d_out that num_heads does not divide is refused while building, whatever the
    remainder (5 % 2 = 1, the docstring's; 6 % 4 = 2)."""
    build(learner, STAGE, "MultiHeadAttention", [4, 6, 5, 0.0, 2])  # a right module builds: what follows is d_out's
    build(learner, STAGE, "MultiHeadAttention", [4, 8, 5, 0.0, 4])
    for d_out, heads in ((5, 2), (6, 4)):
        try:
            build(learner, STAGE, "MultiHeadAttention", [4, d_out, 6, 0.0, heads])
        except LearnerFailure as failure:
            if failure.kind == "exception":  # the same heads build a divisible d_out: the error is the one asked for
                continue
            raise
        raise CheckFailed(
            f"MultiHeadAttention(4, {d_out}, 6, 0.0, num_heads={heads}) was built although d_out = {d_out} features "
            f"cannot be split evenly into {heads} heads: raise an error that says d_out must be divisible by "
            "num_heads",
            "error-not-raised",
        )


@check("note.fixed_device", visible=True, target="MultiHeadAttention")
def test_multihead_no_fixed_device(learner):
    """A note: what we know beyond the book, which costs nothing unless an instructor prices it."""
    expect_no_fixed_device(learner, STAGE, "MultiHeadAttention", [4, 6, 5, 0.1, 3], torch.rand(2, 4, 4))


@check("note.fixed_dtype", visible=True, target="MultiHeadAttention")
def test_multihead_no_fixed_dtype(learner):
    """A note: a module made float64 (.double()) computes in float64."""
    x = torch.rand(2, 4, 4, generator=generator("note.fixed_dtype"))
    expect_module_dtype_followed(learner, STAGE, "MultiHeadAttention", [4, 6, 5, 0.1, 3], x)


@check("shortcut.MultiHeadAttention", target="MultiHeadAttention")
def test_multihead_shortcut(learner, learner_source, reference):
    args = [3, 4, 6, 0.0, 2]
    x = torch.rand(2, 6, 3, generator=generator("shortcut.MultiHeadAttention"))
    reply = expect_attention_by_hand(learner, learner_source, reference, STAGE, "MultiHeadAttention", args, x)
    if any(kind == "MultiheadAttention" for _, kind in reply["structure"]["modules"]):
        raise CheckFailed("MultiHeadAttention holds a torch.nn.MultiheadAttention", "banned-api")


@check("note.signature", visible=True)
def test_book_signature(learner, learner_source):
    """A note: the book's signature, which the checks do not need (they call by the book's names)."""
    expect_book_signature(
        learner,
        learner_source[STAGE],
        STAGE,
        {"MultiHeadAttentionWrapper": [3, 2, 6, 0.0, 2], "MultiHeadAttention": [3, 2, 6, 0.0, 2]},
    )


@check("note.mask_buffer", visible=True, target="MultiHeadAttention")
def test_mask_buffer(learner):
    expect_documented_mask(learner, STAGE, "MultiHeadAttention", [4, 6, 5, 0.1, 3])
