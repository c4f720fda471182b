"""Stage 8's references: the documented GroupedQueryAttention, torch's own grouped attention, the outputs of
its usual mistakes, and the hints a parameter layout proves."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from grader.judge.checks.support import agrees, build, generator, holds_weights, parameters_only, reference_state
from grader.judge.diagnosis import attend, linear, weight_variants
from grader.sandbox.workers import LearnerFailure

STAGE = 8


CLS = "GroupedQueryAttention"


PROJECTIONS = ("W_query", "W_key", "W_value")


class DocumentedGroupedQueryAttention(nn.Module):
    """The documented weights of GroupedQueryAttention, created in the documented order; no forward."""

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        num_kv_groups: int,
        qkv_bias: bool = False,
    ):
        super().__init__()
        kv_width = num_kv_groups * (d_out // num_heads)
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, kv_width, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, kv_width, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)


def torch_gqa(x: torch.Tensor, state: dict[str, torch.Tensor], num_heads: int, num_kv_groups: int) -> torch.Tensor:
    """What GroupedQueryAttention holding ``state`` returns for x (b, n, d_in), by torch's own GQA."""
    b, n, _ = x.shape
    queries, keys, values = (linear(x, state, name) for name in PROJECTIONS)
    head_dim = queries.shape[-1] // num_heads

    def split(t: torch.Tensor, heads: int) -> torch.Tensor:  # (b, n, heads * head_dim) -> (b, heads, n, head_dim)
        return t.reshape(b, n, heads, head_dim).transpose(1, 2)

    context = F.scaled_dot_product_attention(
        split(queries, num_heads),
        split(keys, num_kv_groups),
        split(values, num_kv_groups),
        is_causal=True,
        enable_gqa=True,
    )
    return linear(context.transpose(1, 2).reshape(b, n, -1), state, "out_proj")


def grouped_variants(
    x: torch.Tensor, state: dict[str, torch.Tensor], num_heads: int, num_kv_groups: int
) -> dict[str, torch.Tensor]:
    """Outputs of the usual mistakes in GroupedQueryAttention, for x (b, n, d_in)."""
    b, n, d_in = x.shape
    q, k, v = (linear(x, state, name) for name in PROJECTIONS)
    d_out = q.shape[-1]
    head_dim, group_size = d_out // num_heads, num_heads // num_kv_groups

    def split(t: torch.Tensor, heads: int) -> torch.Tensor:
        return t.reshape(b, n, heads, head_dim).transpose(1, 2)

    def output(context: torch.Tensor) -> torch.Tensor:  # (b, heads, n, head_dim) -> out_proj of the merged heads
        return linear(context.transpose(1, 2).reshape(b, n, d_out), state, "out_proj")

    queries = split(q, num_heads)
    keys, values = (split(t, num_kv_groups).repeat_interleave(group_size, dim=1) for t in (k, v))
    right = {"divisor": head_dim**0.5, "causal": True}
    variants = {
        name: output(weights @ values)
        for name, weights in weight_variants(queries, keys, causal=True, d_in=d_in).items()
    }
    variants["missing-out-proj"] = attend(queries, keys, values, **right).transpose(1, 2).reshape(b, n, d_out)
    # a float "keep" mask (1 on the past, 0 on the future) handed to an attention function, which adds it: the
    # future keeps its score, the past gains 1
    keep = torch.ones(n, n).tril()
    scores = queries @ keys.transpose(-2, -1) / head_dim**0.5 + keep
    variants["mask-not-causal:a float mask of 1 (keep) and 0 (hide) is added to the scores, which hides nothing"] = (
        output(torch.softmax(scores, dim=-1) @ values)
    )
    if num_kv_groups > 1 and group_size > 1:  # head h reads group h % num_kv_groups: the groups repeated as a whole
        tiled_keys, tiled_values = (split(t, num_kv_groups).repeat(1, group_size, 1, 1) for t in (k, v))
        variants["kv-groups-tiled"] = output(attend(queries, tiled_keys, tiled_values, **right))
    if num_heads > 1:
        # Heads split with reshape(b, heads, n, head_dim), without the transpose; merged back the right way.
        flat_queries, flat_keys, flat_values = (
            t.reshape(b, heads, n, head_dim) for t, heads in ((q, num_heads), (k, num_kv_groups), (v, num_kv_groups))
        )
        variants["heads-split-wrong"] = output(
            attend(
                flat_queries,
                flat_keys.repeat_interleave(group_size, dim=1),
                flat_values.repeat_interleave(group_size, dim=1),
                **right,
            )
        )
        # Heads never moved in front of the tokens, (b, n, heads, head_dim), given to an attention function (stage
        # 6's, torch's) as they are: each token's heads attend over its key/value groups, causally.
        kept_q, kept_k, kept_v = (t.reshape(b, n, -1, head_dim) for t in (q, k, v))
        across_heads = F.scaled_dot_product_attention(kept_q, kept_k, kept_v, is_causal=True, enable_gqa=True)
        variants[
            "heads-split-wrong:the queries, keys and values reach the attention as (b, num_tokens, heads, head_dim), "
            "without transpose(1, 2): each token's heads attend to one another instead of the tokens"
        ] = linear(across_heads.reshape(b, n, d_out), state, "out_proj")
        # Heads split the right way, merged back without transposing: tokens and heads mixed.
        variants["heads-merged-wrong"] = linear(
            attend(queries, keys, values, **right).reshape(b, n, d_out), state, "out_proj"
        )
    divisors = {
        f"sqrt(d_out) = sqrt({d_out})": d_out,
        f"sqrt({num_kv_groups * head_dim}), the width of W_key's output": num_kv_groups * head_dim,
        # where each group is one head this is no scaling at all: the two then tie, and neither is named
        f"sqrt({group_size}), the number of query heads a key/value group serves": group_size,
    }
    # scale=head_dim handed to an attention function (stage 6's, torch's), which multiplies the scores by it
    variants[
        f"scale-as-divisor:the scores are multiplied by head_dim = {head_dim} (scale=head_dim), not by "
        f"1/sqrt({head_dim})"
    ] = output(attend(queries, keys, values, divisor=1 / head_dim, causal=True))
    for label, divisor in divisors.items():
        if divisor != head_dim:
            variants[f"wrong-scaling:the scores are divided by {label}, not sqrt(head_dim)"] = output(
                attend(queries, keys, values, divisor=divisor**0.5, causal=True)
            )
    return variants


def kv_projection_hint(parameters: list, args: list) -> str | None:
    """kv-projection-size when a module's parameters ([name, shape] pairs) size W_key or W_value d_out,
    as in MultiHeadAttention, where ``CLS(*args)`` has num_kv_groups * head_dim."""
    d_in, d_out, heads, groups = args[0], args[1], args[4], args[5]
    shapes = {name: list(shape) for name, shape in parameters}
    sized_as_multihead = [d_out, d_in] in (shapes.get("W_key.weight"), shapes.get("W_value.weight"))
    return "kv-projection-size" if groups != heads and sized_as_multihead else None


def layout_hint(parameters: list, args: list) -> str | None:
    """What a module's parameters prove wrong for ``CLS(*args)``: the key/value projections' size, or
    biases that qkv_bias did not ask for."""
    qkv_bias = args[6] if len(args) > 6 else False
    biased = not qkv_bias and qkv_biases(parameters)
    return kv_projection_hint(parameters, args) or ("qkv-bias-ignored" if biased else None)


def qkv_biases(parameters: list) -> list[str]:
    """The biases of W_query, W_key and W_value among a module's parameters ([name, shape] pairs)."""
    return [name for name, _ in parameters if name.endswith(".bias") and name != "out_proj.bias"]


def creation_order_hint(learner, args: list, seed: int, learner_state: dict) -> str | None:
    """param-init-order when proven: the learner's seeded weights have the documented names and
    shapes but other numbers, while with the documented weights put in it computes torch's GQA."""
    expected = parameters_only(reference_state(DocumentedGroupedQueryAttention, args, seed))
    learned = {k: v for k, v in learner_state.items() if isinstance(v, torch.Tensor) and k.split(".")[-1] != "mask"}
    if holds_weights(learned, expected):
        return None
    if learned.keys() != expected.keys() or any(learned[k].shape != v.shape for k, v in expected.items()):
        return None
    x = torch.rand(2, min(args[2], 5), args[0], generator=generator("maths"))
    try:
        reply = build(learner, STAGE, CLS, args, state=expected, inputs=[x])
    except LearnerFailure:
        return None
    right = not reply["rejected"] and agrees(reply["outputs"][0], torch_gqa(x, expected, args[4], args[5]))
    return "param-init-order" if right else None
