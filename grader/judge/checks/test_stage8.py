"""Stage 8 (bonus): GroupedQueryAttention.

The visible checks judge with torch's own grouped-query attention (F.scaled_dot_product_attention
with enable_gqa=True) on the documented structure, never with solutions/. The learner may compute
the attention by hand or with their stage 6 function; while this stage is graded, stage 6 stands
in as torch's own (grader.runner.standins), so a mistake in stage 6 costs nothing here.
"""

import math
import zlib
from typing import cast

import torch

from grader.judge.checks.causal import expect_causal_and_independent, run_injected
from grader.judge.checks.delegation import expect_attention_by_hand_or_delegated
from grader.judge.checks.device_note import expect_module_dtype_followed, expect_no_fixed_device
from grader.judge.checks.dropout_probe import expect_dropout_on_weights, one_head_state
from grader.judge.checks.examples import build_causal
from grader.judge.checks.gqa_reference import (
    CLS,
    STAGE,
    DocumentedGroupedQueryAttention,
    creation_order_hint,
    grouped_variants,
    kv_projection_hint,
    layout_hint,
    qkv_biases,
    torch_gqa,
)
from grader.judge.checks.module_structure import (
    expect_documented_mask,
    expect_forward_keeps_buffers,
    expect_projection_biases,
    expect_trainable,
    mask_buffer_hint,
)
from grader.judge.checks.naming import out_proj_hint
from grader.judge.checks.support import (
    CheckFailed,
    build,
    check,
    expect_all_close,
    expect_book_signature,
    expect_close,
    expect_documented_names,
    generator,
    holds_weights,
    parameters_only,
    reference_output,
    reference_state,
    under_documented_names,
)
from grader.judge.verdict import Variants
from grader.runner.document_examples import journey_batch
from grader.sandbox.workers import LearnerFailure

# The guide's worked examples: a seeded module on stage 4's batch, and GPT-2 small's sizes with 4 groups.
DOCUMENTED_ARGS = [3, 8, 6, 0.0, 4, 2]
DOCUMENTED_SEED = 123
GPT2_ARGS = [768, 768, 1024, 0.0, 12, 4]
GPT2_PARAMETERS, GPT2_MULTIHEAD_PARAMETERS = 1_573_632, 2_360_064
GPT2_CACHED = 2 * 4 * 64  # key and value features per token with 4 groups of head_dim 64
# The small public example: head_dim = 2, two groups of two heads (so tiling differs from
# interleaving), fewer tokens than context_length, d_in, d_out and the number of tokens all different.
EXAMPLE_ARGS: list  # ints and a float, as build takes them
EXAMPLE_ARGS, EXAMPLE_SHAPE = [3, 12, 6, 0.0, 6, 2], (2, 5, 3)  # groups of 3 heads: 3 != num_kv_groups
# (batch, num_tokens, d_in, d_out, context_length, num_heads, num_kv_groups, qkv_bias): one token and
# one group (multi-query), groups of three, as many groups as heads, a bias, d_in > head_dim.
RANDOM_SHAPES = [
    (1, 1, 3, 4, 4, 2, 1, False),
    (3, 5, 4, 12, 8, 6, 2, False),
    (2, 6, 3, 8, 6, 4, 4, False),
    (2, 7, 6, 8, 7, 4, 1, False),
    (2, 4, 5, 12, 6, 6, 3, False),
    (2, 5, 4, 8, 6, 4, 2, True),
]


def _example(learner) -> None:
    """The small public example, with random documented weights put in: named mistakes where proven."""
    state = parameters_only(
        reference_state(DocumentedGroupedQueryAttention, EXAMPLE_ARGS, seed=zlib.crc32(CLS.encode()))
    )
    x = torch.rand(*EXAMPLE_SHAPE, generator=generator(f"example.{CLS}"))
    heads, groups = EXAMPLE_ARGS[4], EXAMPLE_ARGS[5]
    try:
        actual = build_causal(learner, STAGE, CLS, EXAMPLE_ARGS, state, [x])["outputs"][0]
        expect_close(
            actual,
            torch_gqa(x, state, heads, groups),
            f"{CLS}(3, {EXAMPLE_ARGS[1]}, 6, 0.0, num_heads={heads}, num_kv_groups={groups}) with random weights on a "
            f"{EXAMPLE_SHAPE} input",
            lambda: grouped_variants(x, state, heads, groups),
        )
    except CheckFailed as failed:  # weights of other shapes, or biases the documented weights do not replace
        hint = failed.hint or layout_hint(
            _parameters(build(learner, STAGE, CLS, EXAMPLE_ARGS), EXAMPLE_ARGS), EXAMPLE_ARGS
        )
        raise CheckFailed(failed.message, hint, failed.evidence) from None


@check("document.GroupedQueryAttention", visible=True, target=CLS)
def test_document(learner):
    batch = journey_batch(torch.device("cpu"))
    reply = build(learner, STAGE, CLS, DOCUMENTED_ARGS, seed=DOCUMENTED_SEED, inputs=[batch], return_state=True)
    expected_state = parameters_only(reference_state(DocumentedGroupedQueryAttention, DOCUMENTED_ARGS, DOCUMENTED_SEED))
    what = (
        f"torch.manual_seed({DOCUMENTED_SEED}); {CLS}(3, 8, 6, 0.0, num_heads=4, num_kv_groups=2) on stage 4's "
        "batch (the guide's worked example)"
    )
    holds = holds_weights(reply["state"], expected_state)
    try:  # the mistakes' outputs are the learner's only with the guide's weights
        expect_close(
            reply["outputs"][0],
            torch_gqa(batch, expected_state, 4, 2),
            what,
            (lambda: grouped_variants(batch, expected_state, 4, 2)) if holds else None,
        )
    except CheckFailed as failed:
        if not holds:
            hint = creation_order_hint(learner, DOCUMENTED_ARGS, DOCUMENTED_SEED, reply["state"]) or layout_hint(
                _parameters(reply, DOCUMENTED_ARGS), DOCUMENTED_ARGS
            )
            raise CheckFailed(
                f"{failed.message}\nWith seed {DOCUMENTED_SEED} its weights are not the guide's: create "
                "W_query, W_key, W_value, then out_proj, as nn.Linear each",
                hint,
            ) from None
        if failed.hint is not None:
            raise
        try:
            _example(learner)
        except CheckFailed as example:
            raise CheckFailed(f"{failed.message}\nOn a smaller example: {example.message}", example.hint) from None
        raise CheckFailed(
            f"{failed.message}\nIts seeded weights are the guide's, and it computes the right output on "
            "a small example: look at what differs with these arguments"
        ) from None
    parameters = _parameters(build(learner, STAGE, CLS, GPT2_ARGS), GPT2_ARGS)
    shapes = dict(parameters)
    count = sum(math.prod(shape) for shape in shapes.values())
    cached = sum(shapes.get(f"{name}.weight", [0])[0] for name in ("W_key", "W_value"))  # per token: a KV cache's share
    if (count, cached) != (GPT2_PARAMETERS, GPT2_CACHED):
        raise CheckFailed(
            f"{CLS}(768, 768, 1024, 0.0, num_heads=12, num_kv_groups=4), GPT-2 small's sizes with 4 "
            f"key/value groups, has {count:,} parameters and computes {cached:,} key and value features "
            f"per token, what a KV cache keeps; the guide's worked example has {GPT2_PARAMETERS:,} and "
            f"2 x 4 x 64 = {GPT2_CACHED} (MultiHeadAttention: {GPT2_MULTIHEAD_PARAMETERS:,} and "
            f"2 x 768 = 1,536)",
            layout_hint(parameters, GPT2_ARGS),
        )


@check("example.GroupedQueryAttention", visible=True, target=CLS)
def test_example(learner):
    _example(learner)


@check("random.GroupedQueryAttention", target=CLS)
def test_random(learner, reference):
    rng, cases = generator(f"random.{CLS}"), []
    for index, (b, n, d_in, d_out, context_length, heads, groups, bias) in enumerate(RANDOM_SHAPES):
        args = [d_in, d_out, context_length, 0.0, heads, groups, bias]
        x = torch.rand(b, n, d_in, generator=rng)
        actual, expected, state = run_injected(learner, reference, STAGE, CLS, args, 9800 + index, x)
        cases.append(
            (
                actual,
                expected,
                f"{CLS}{tuple(args)} on a {(b, n, d_in)} batch",
                lambda x=x, state=state, heads=heads, groups=groups: grouped_variants(x, state, heads, groups),
            )
        )
    expect_all_close(cases)


def _documented_shapes(args: list) -> dict[str, list]:
    """The documented parameters of GroupedQueryAttention(*args) and their shapes, in creation order."""
    d_in, d_out, heads, groups = args[0], args[1], args[4], args[5]
    bias = len(args) > 6 and args[6]
    kv_width = groups * (d_out // heads)
    shapes = {}
    for name, width, biased in (("W_query", d_out, bias), ("W_key", kv_width, bias), ("W_value", kv_width, bias)):
        shapes[f"{name}.weight"] = [width, d_in]
        if biased:
            shapes[f"{name}.bias"] = [width]
    return {**shapes, "out_proj.weight": [d_out, d_out], "out_proj.bias": [d_out]}


def _parameters(reply: dict, args: list) -> list:
    """The learner's [name, shape] parameters, under the documented names where they pair by creation order."""
    return list(under_documented_names(dict(reply["structure"]["parameters"]), _documented_shapes(args)).items())


@check("property.torch_gqa", target=CLS)
def test_matches_torch_gqa(learner):
    """With its own seeded weights, the module computes torch's GQA of its own projections."""
    rng = generator("property.torch_gqa")
    for b, n, d_in, d_out, context_length, heads, groups, bias in [
        (2, 6, 4, 12, 8, 6, 2, True),
        (3, 5, 6, 8, 5, 4, 1, False),
    ]:
        args = [d_in, d_out, context_length, 0.0, heads, groups, bias]
        x = torch.rand(b, n, d_in, generator=rng)
        reply = build(learner, STAGE, CLS, args, seed=8200 + n, inputs=[x], return_state=True)
        state = under_documented_names(parameters_only(reply["state"]), _documented_shapes(args))
        shapes = {name: list(value.shape) for name, value in state.items() if isinstance(value, torch.Tensor)}
        kv_width = groups * (d_out // heads)
        documented = {
            name: shape
            for name, shape in _documented_shapes(args).items()  # the weights, out_proj's bias
            if not name.endswith(".bias") or name == "out_proj.bias"
        }
        if any(shapes.get(name) != shape for name, shape in documented.items()):
            raise CheckFailed(
                f"{CLS}{tuple(args)} should hold W_query (d_out x d_in), W_key and W_value "
                f"(num_kv_groups * head_dim = {kv_width} x d_in) and out_proj (d_out x d_out) weights; "
                f"it holds {shapes}",
                kv_projection_hint(list(shapes.items()), args),
            )
        expect_close(
            reply["outputs"][0],
            torch_gqa(x, state, heads, groups),
            f"{CLS}{tuple(args)} with its own weights, against torch's F.scaled_dot_product_attention("
            "..., is_causal=True, enable_gqa=True) of its own projections",
            # mypy infers no lambda with a default argument against a Callable[[], ...]: cast it
            cast(
                Variants, lambda x=x, state=state, heads=heads, groups=groups: grouped_variants(x, state, heads, groups)
            ),
        )


@check("property.multihead", target=CLS)
def test_equals_multihead(learner, reference):
    """With as many groups as heads, the same seed gives stage 5's MultiHeadAttention, weights and all."""
    rng = generator("property.multihead")
    for b, n, d_in, d_out, context_length, heads, bias in [(2, 6, 4, 12, 8, 3, False), (1, 4, 3, 4, 4, 2, True)]:
        multihead_args = [d_in, d_out, context_length, 0.0, heads, bias]
        args = [d_in, d_out, context_length, 0.0, heads, heads, bias]
        x = torch.rand(b, n, d_in, generator=rng)
        seed = 8300 + n
        multihead = reference.name("MultiHeadAttention")
        expected_state = parameters_only(reference_state(multihead, multihead_args, seed))
        expected = reference_output(multihead, multihead_args, expected_state, x)
        reply = build(learner, STAGE, CLS, args, seed=seed, inputs=[x], return_state=True)
        what = f"torch.manual_seed({seed}); {CLS}{tuple(args)} against MultiHeadAttention{tuple(multihead_args)}"
        holds = holds_weights(reply["state"], expected_state)
        try:  # the mistakes' outputs are the learner's only with MultiHeadAttention's weights
            expect_close(
                reply["outputs"][0],
                expected,
                what,
                (lambda: grouped_variants(x, expected_state, heads, heads)) if holds else None,
            )
        except CheckFailed as failed:
            if holds:
                raise
            raise CheckFailed(
                f"{failed.message}\nUnder the same seed its weights are not MultiHeadAttention's: with "
                "num_kv_groups == num_heads, W_key and W_value are d_in -> d_out, created after W_query "
                "and before out_proj",
                creation_order_hint(learner, args, seed, reply["state"]),
            ) from None


@check("property.causal", target=CLS)
def test_causal(learner, reference):
    expect_causal_and_independent(
        learner, reference, STAGE, CLS, [5, 8, 10, 0.5, 4, 2], lambda x, state: grouped_variants(x, state, 4, 2)
    )


@check("property.dropout", visible=True, target=CLS)
def test_dropout(learner):
    expect_dropout_on_weights(
        learner, STAGE, CLS, args_for=lambda n, d_out: [n, d_out, n, 0.5, 1, 1], state_for=one_head_state
    )


@check("structure.GroupedQueryAttention", visible=True, target=CLS)
def test_structure(learner):
    args = [4, 8, 5, 0.1, 4, 2]  # head_dim 2, keys and values 2 * 2 = 4 wide
    reply = build(learner, STAGE, CLS, args)
    shape = reply["structure"]
    expected_linears = [["W_query", [8, 4]], ["W_key", [4, 4]], ["W_value", [4, 4]], ["out_proj", [8, 8]]]
    linears = [[name.removesuffix(".weight"), s] for name, s in shape["parameters"] if name.endswith(".weight")]
    expect_documented_names(CLS, linears, expected_linears)
    if linears != expected_linears:
        hint = (
            ("not-parameters" if shape.get("plain_tensors") else None)  # no weight registered: nothing is missing
            if not linears
            else out_proj_hint(linears, d_in=4, d_out=8)
            or kv_projection_hint(shape["parameters"], args)
            or ("param-init-order" if sorted(linears) == sorted(expected_linears) else None)
        )
        raise CheckFailed(
            f"{CLS}(4, 8, 5, 0.1, num_heads=4, num_kv_groups=2) should hold W_query (8 x 4), W_key and "
            f"W_value (num_kv_groups * head_dim = 4 x 4) and out_proj (8 x 8) weights, in that order; "
            f"it holds {linears}",
            hint,
        )
    biases = qkv_biases(shape["parameters"])
    if biases:
        raise CheckFailed(f"{CLS}(4, 8, 5, 0.1, 4, 2) (qkv_bias=False) holds the biases {biases}", "qkv-bias-ignored")
    expect_projection_biases(learner, STAGE, CLS, args)
    expect_trainable(CLS, shape, learner, STAGE, args)
    expect_forward_keeps_buffers(learner, STAGE, CLS, args, tokens=3)
    if ["out_proj.bias", [8]] not in shape["parameters"]:
        raise CheckFailed("out_proj should have a bias, whatever qkv_bias says (nn.Linear(d_out, d_out))")
    if ["mask", [5, 5]] not in shape["buffers"]:
        raise CheckFailed(
            f"{CLS} should register a (context_length, context_length) buffer named mask; its buffers "
            f"are {shape['buffers']}",
            mask_buffer_hint(shape["buffers"]),
        )
    _expect_refused(
        learner,
        [4, 6, 5, 0.0, 4, 2],
        "d_out = 6 features cannot be split evenly into 4 heads: raise an "
        "error that says d_out must be divisible by num_heads",
    )


def _expect_refused(learner, args: list, why: str) -> None:
    """``CLS(*args)`` must raise while building; the caller has seen the same module build for good arguments."""
    try:
        build(learner, STAGE, CLS, args)
    except LearnerFailure as failure:
        if failure.kind == "exception":
            return
        raise
    raise CheckFailed(f"{CLS}{tuple(args)} was built although {why}", "error-not-raised")


@check("note.fixed_device", visible=True, target=CLS)
def test_no_fixed_device(learner):
    """A note: what we know beyond the book, which costs nothing unless an instructor prices it."""
    expect_no_fixed_device(learner, STAGE, CLS, [4, 8, 5, 0.1, 4, 2], torch.rand(2, 4, 4))


@check("note.fixed_dtype", visible=True, target=CLS)
def test_no_fixed_dtype(learner):
    """A note: a module made float64 (.double()) computes in float64."""
    x = torch.rand(2, 4, 4, generator=generator("note.fixed_dtype"))
    expect_module_dtype_followed(learner, STAGE, CLS, [4, 8, 5, 0.1, 4, 2], x)


@check("structure.groups_refused", visible=True, target=CLS)
def test_groups_refused(learner):
    build(learner, STAGE, CLS, [4, 12, 5, 0.0, 6, 3])  # a right module builds: what follows is about the groups
    for args in ([4, 12, 5, 0.0, 6, 4], [4, 8, 5, 0.0, 4, 3]):
        _expect_refused(
            learner,
            args,
            f"{args[4]} query heads cannot be shared evenly among {args[5]} key/value "
            "groups: raise an error that says num_heads must be divisible by num_kv_groups",
        )


@check("shortcut.GroupedQueryAttention", target=CLS)
def test_shortcut(learner, learner_source, reference):
    x = torch.rand(2, 6, 3, generator=generator(f"shortcut.{CLS}"))
    reply = expect_attention_by_hand_or_delegated(
        learner, learner_source, reference, STAGE, CLS, [3, 8, 6, 0.0, 4, 2], x
    )
    if any(kind == "MultiheadAttention" for _, kind in reply["structure"]["modules"]):
        raise CheckFailed(f"{CLS} holds a torch.nn.MultiheadAttention", "banned-api")


@check("note.signature", visible=True)
def test_book_signature(learner, learner_source):
    """A note: the book's signature, which the checks do not need (they call by the book's names)."""
    expect_book_signature(learner, learner_source[STAGE], STAGE, {"GroupedQueryAttention": [4, 8, 5, 0.0, 4, 2]})


@check("note.mask_buffer", visible=True, target=CLS)
def test_mask_buffer(learner):
    expect_documented_mask(learner, STAGE, CLS, [4, 8, 5, 0.1, 4, 2])
