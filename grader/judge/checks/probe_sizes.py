"""The runs of the shape probe (shape_probe.py): the sizes a module is built on and called with, and a
function's arguments, once as the judge's own sizes (each apart from every other) and once per variation that
makes one size equal to another or to the worked example's."""

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from grader.judge.diagnosis import WORKED_EXAMPLE_D_OUT

# Classes whose constructor takes heads, and key/value groups; the wrapper's output is num_heads * d_out wide.
HEADED = {"MultiHeadAttentionWrapper", "MultiHeadAttention", "MultiHeadAttentionKV", "GroupedQueryAttention"}
BATCHED = HEADED | {"CausalAttention"}
PROBED = BATCHED | {"SelfAttention_v1", "SelfAttention_v2"}


@dataclass(frozen=True)
class Sizes:
    batch: int = 3
    tokens: int = 5
    d_in: int = 4
    d_out: int = 6
    context: int = 7
    heads: int = 3
    kv_groups: int = 1
    batched: bool = False  # a single-sequence module (stage 2's) given a leading batch dimension

    def args(self, cls: str) -> list:
        """The constructor's arguments, as the book calls it (dropout 0: the probe is about shapes)."""
        if cls in ("SelfAttention_v1", "SelfAttention_v2"):
            return [self.d_in, self.d_out]
        if cls == "CausalAttention":
            return [self.d_in, self.d_out, self.context, 0.0]
        if cls == "GroupedQueryAttention":
            return [self.d_in, self.d_out, self.context, 0.0, self.heads, self.kv_groups]
        return [self.d_in, self.d_out, self.context, 0.0, self.heads]

    def x_shape(self, cls: str) -> tuple[int, ...]:
        return (self.batch, self.tokens, self.d_in) if cls in BATCHED or self.batched else (self.tokens, self.d_in)

    def out_shape(self, cls: str) -> tuple[int, ...]:
        width = self.heads * self.d_out if cls == "MultiHeadAttentionWrapper" else self.d_out
        return (self.batch, self.tokens, width) if cls in BATCHED or self.batched else (self.tokens, width)


# Every size apart from every other; GQA's groups: 6 heads in 2 groups, so that a repeat count of
# num_kv_groups (2) differs from num_heads // num_kv_groups (3).
# The wrapper's heads each hold d_out features: its d_out need not be a multiple of num_heads, and here is not.
BASE = {cls: Sizes() for cls in PROBED} | {
    "GroupedQueryAttention": Sizes(d_out=12, heads=6, kv_groups=2),
    "MultiHeadAttentionWrapper": Sizes(d_out=8),
}
# The worked examples' sizes (the book's batch of two 6 x 3 inputs, d_out 2, two heads).
EXAMPLE = Sizes(batch=2, tokens=6, d_in=3, d_out=WORKED_EXAMPLE_D_OUT, context=6, heads=2, kv_groups=1)
DOUBLED = Sizes(**{name: 2 * size for name, size in vars(EXAMPLE).items() if name != "kv_groups"})

EXAMPLE_RUN = "the worked example's sizes"
NO_LEADING_RUN = "no leading dimensions, (L, E)"  # scaled dot-product attention on matrices alone
# matrices alone with L == S: a (..., L) per-row tensor meets (..., L, S) scores only here (no keepdim)
SQUARE_MATRIX_RUN = "no leading dimensions and as many queries as keys, (L, E) with L = S"
FULL_MASK_RUN = "a mask of the scores' own shape, (N, H, L, S)"
VALUE_WIDTH_RUN = "values as wide as the queries, Ev = E"
# Every size of the worked example doubled: what the example's sizes satisfy as relations (tokens =
# context_length, d_out = num_heads, d_out divisible by num_heads) still holds, only the numbers differ. Code
# that runs on the example and not here has a number written in it; code that runs on both needs a relation.
DOUBLED_RUN = "the worked example's sizes, each doubled"
# One feature per head, as in the worked example (d_out 2 over 2 heads): num_heads and head_dim swapped in a
# view, or heads merged one feature each, run here alone. Made with as many heads as d_out, more than d_in, so
# that a head_dim taken from d_in (d_in // num_heads = 0) does not run here by chance.
ONE_FEATURE = "one feature per head, d_out = num_heads"
# As many tokens as heads, and each head as wide: (b, num_heads, num_tokens, head_dim) looks the same with any two
# of its last three axes swapped, so a transpose missing (or on other axes) after the split runs here alone.
SQUARE_HEADS = "as many tokens as heads, each head_dim wide (num_tokens = num_heads = head_dim)"
SPLIT = HEADED - {"MultiHeadAttentionWrapper"}  # the classes that split d_out into heads
ONE_LEADING_RUN = "one leading dimension, (H, L, E)"  # scaled dot-product attention on a stack of matrices
SQUARE_INPUTS = "as many tokens as features (num_tokens = d_in)"  # stage 1: an axis of one met with the other
# stage 2: the token axis of the queries, keys or values met with their feature axis (queries.T @ keys)
TOKENS_AS_OUTPUTS = "as many tokens as output features (num_tokens = d_out)"
# stage 2's modules take one sequence, (num_tokens, d_in): code that unpacks x as (b, num_tokens, d_in) runs on a
# batch alone
BATCH_ADDED = "a leading batch dimension, (b, num_tokens, d_in)"
# (name, what it changes): one size made equal to another, or every size the worked example's.
VARIATIONS = {
    BATCH_ADDED: lambda s, cls: replace(s, batched=True) if cls not in BATCHED else None,
    "d_in = d_out": lambda s, cls: replace(s, d_in=s.d_out),
    "d_in a multiple of num_heads": lambda s, cls: replace(s, d_in=3 * s.heads) if cls in HEADED else None,
    "tokens = context_length": lambda s, cls: replace(s, tokens=s.context) if cls in BATCHED else None,
    "a batch of one": lambda s, cls: replace(s, batch=1) if cls in BATCHED else None,
    # d_out made the tokens' count (not the tokens d_out's, which is the worked example's 6: a size fixed at 6 runs)
    TOKENS_AS_OUTPUTS: lambda s, cls: replace(s, d_out=s.tokens) if cls not in BATCHED else None,
    "one head": lambda s, cls: replace(s, heads=1, kv_groups=1) if cls in HEADED else None,
    ONE_FEATURE: lambda s, cls: replace(s, heads=s.d_out) if cls in HEADED - {"MultiHeadAttentionWrapper"} else None,
    "as many key/value groups as heads": (
        lambda s, cls: replace(s, kv_groups=s.heads) if cls == "GroupedQueryAttention" else None
    ),
    SQUARE_HEADS: lambda s, cls: replace(s, tokens=s.heads, d_out=s.heads**2) if cls in SPLIT else None,
    # num_kv_groups == num_heads // num_kv_groups: a repeat count of either is right
    "num_heads = num_kv_groups²": (
        lambda s, cls: replace(s, heads=s.kv_groups**2) if cls == "GroupedQueryAttention" else None
    ),
    EXAMPLE_RUN: lambda s, cls: EXAMPLE if cls != "GroupedQueryAttention" else None,
    DOUBLED_RUN: lambda s, cls: DOUBLED if cls != "GroupedQueryAttention" else None,
}


@dataclass(frozen=True)
class Call:
    """A function's sizes: tokens and features (stages 1, 4), or scaled dot-product attention's (stage 6)."""

    tokens: int = 5
    dim: int = 4
    batch: int = 2
    heads: int = 3
    keys: int = 5
    value_dim: int = 7
    mask: str = "leading"  # attn_mask: "leading" (batch, 1, L, S), "full" (batch, heads, L, S), "2d" (L, S), "none"
    leading: int = 2  # query, key and value with (batch, heads) in front, (heads,) alone, or none: (L, E)


@dataclass(frozen=True)
class FunctionProbe:
    arguments: Callable[[Call, torch.Generator], list]  # (Call, generator) -> the call's arguments
    out_shape: Callable[[Call], tuple[int, ...]]  # Call -> the documented shape of its result
    base: Call
    variations: dict


def _sdpa_arguments(c: Call, rng: torch.Generator) -> list:
    lead = (c.batch, c.heads)[2 - c.leading :]
    query, key = torch.rand(*lead, c.tokens, c.dim, generator=rng), torch.rand(*lead, c.keys, c.dim, generator=rng)
    value = torch.rand(*lead, c.keys, c.value_dim, generator=rng)
    mask = None
    if c.mask != "none":
        mask = torch.rand(*((c.batch, 1) if c.mask in ("leading", "full") else ()), c.tokens, c.keys, generator=rng)
        mask = mask > 0.3
        mask[..., 0] = True  # every query keeps a key
        if c.mask == "full":  # the same mask, each head's copy of it held: the scores' own shape
            mask = mask.expand(c.batch, c.heads, c.tokens, c.keys).clone()
    return [query, key, value, mask]


# The worked examples' sizes for a function: the book's 6 tokens of 3 features (EXAMPLE's).
EXAMPLE_TOKENS, EXAMPLE_DIM = EXAMPLE.tokens, EXAMPLE.d_in
WORKED_SIZES = {
    "6 tokens, as in the worked example": lambda c: replace(c, tokens=EXAMPLE_TOKENS),
    "3 features, as in the worked example": lambda c: replace(c, dim=EXAMPLE_DIM),
    EXAMPLE_RUN: lambda c: replace(c, tokens=EXAMPLE_TOKENS, dim=EXAMPLE_DIM),
    DOUBLED_RUN: lambda c: replace(c, tokens=2 * EXAMPLE_TOKENS, dim=2 * EXAMPLE_DIM),
}
# Stage 1's functions take inputs (num_tokens, d_in): a product or broadcast that pairs the two axes runs on square
# inputs alone.
TOKEN_SIZES = {**WORKED_SIZES, SQUARE_INPUTS: lambda c: replace(c, tokens=c.dim)}
# Stage 4's functions take (num_tokens, num_tokens) weights or scores, and may be given a batch of them: code that
# reads the first dimension as the batch (scores[0]) runs on the batch alone.
BATCHED_RUN = "a leading batch dimension, (B, n, n)"
SQUARE_SIZES = {**WORKED_SIZES, BATCHED_RUN: lambda c: replace(c, leading=1)}


def _lead(c: Call) -> tuple[int, ...]:
    """The leading dimensions of a call with ``leading`` of them: (heads,) or (batch, heads) or none."""
    return (c.batch, c.heads)[2 - c.leading :]


FUNCTIONS = {
    "attention_scores": FunctionProbe(
        lambda c, g: [torch.rand(c.tokens, c.dim, generator=g), torch.rand(c.dim, generator=g)],
        lambda c: (c.tokens,),
        Call(),
        TOKEN_SIZES,
    ),
    "softmax_naive": FunctionProbe(
        lambda c, g: [torch.randn(c.tokens, generator=g)], lambda c: (c.tokens,), Call(), WORKED_SIZES
    ),
    "context_vector": FunctionProbe(
        lambda c, g: [torch.rand(c.tokens, c.dim, generator=g), torch.softmax(torch.randn(c.tokens, generator=g), 0)],
        lambda c: (c.dim,),
        Call(),
        TOKEN_SIZES,
    ),
    "simple_self_attention": FunctionProbe(
        lambda c, g: [torch.rand(c.tokens, c.dim, generator=g)], lambda c: (c.tokens, c.dim), Call(), TOKEN_SIZES
    ),
    "mask_and_renormalize": FunctionProbe(
        lambda c, g: [torch.softmax(torch.randn(*_lead(c), c.tokens, c.tokens, generator=g), -1)],
        lambda c: (*_lead(c), c.tokens, c.tokens),
        Call(leading=0),
        SQUARE_SIZES,
    ),
    "causal_softmax": FunctionProbe(
        lambda c, g: [torch.randn(*_lead(c), c.tokens, c.tokens, generator=g), c.dim],
        lambda c: (*_lead(c), c.tokens, c.tokens),
        Call(leading=0),
        SQUARE_SIZES,
    ),
    "scaled_dot_product_attention": FunctionProbe(
        _sdpa_arguments,
        lambda c: (c.batch, c.heads)[2 - c.leading :] + (c.tokens, c.value_dim),
        Call(tokens=4, dim=6),
        {
            "a mask without leading dimensions, (L, S)": lambda c: replace(c, mask="2d"),
            "no mask": lambda c: replace(c, mask="none"),
            FULL_MASK_RUN: lambda c: replace(c, mask="full"),
            VALUE_WIDTH_RUN: lambda c: replace(c, value_dim=c.dim),
            "as many queries as keys": lambda c: replace(c, tokens=c.keys),
            NO_LEADING_RUN: lambda c: replace(c, leading=0, mask="2d"),
            SQUARE_MATRIX_RUN: lambda c: replace(c, leading=0, mask="2d", tokens=c.keys),
            ONE_LEADING_RUN: lambda c: replace(c, leading=1, mask="2d"),
        },
    ),
}


# Where the judge's own sizes run, a check may still fail on sizes below them: each edge is one such size, the
# cause its failure alone proves, and the claim. (name, the module's or function's sizes changed, the hint.)
SINGLE_TOKEN = "a single token"
FEWER_FEATURES = f"{EXAMPLE.d_in - 1} features, fewer than the worked example's {EXAMPLE.d_in}"
MODULE_EDGES = {SINGLE_TOKEN: lambda s, cls: replace(s, tokens=1)}
FUNCTION_EDGES = {SINGLE_TOKEN: lambda c: replace(c, tokens=1)}
# stage 1's functions: inputs (num_tokens, d_in)
FEATURE_EDGES = {FEWER_FEATURES: lambda c: replace(c, dim=EXAMPLE.d_in - 1)}
FEATURED = {"attention_scores", "context_vector", "simple_self_attention"}
# Functions of a number of tokens (stages 1 and 4): one more than the worked example's 6 meets a size fixed at 6.
MORE_TOKENS = f"{EXAMPLE_TOKENS + 1} tokens, one more than the worked example's {EXAMPLE_TOKENS}"
TOKEN_EDGES = {MORE_TOKENS: lambda c: replace(c, tokens=EXAMPLE_TOKENS + 1)}
COUNTED = FEATURED | {"softmax_naive", "mask_and_renormalize", "causal_softmax"}
