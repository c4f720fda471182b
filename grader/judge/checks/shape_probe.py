"""Differential probing: why a module raises or returns another shape, proven by runs that differ in one size.

When a check of a module fails because the learner's code raised or returned a tensor of another shape, the
judge builds the module again on sizes of its own where every dimension differs from every other (batch 3,
5 tokens, d_in 4, d_out 6, context_length 7, 3 heads), and then once per variation that makes one size equal
to another or to the worked example's: d_in = d_out, tokens = context_length, a batch of one, one head, as
many key/value groups as heads, and all the worked example's sizes at once. What runs and what does not
proves a cause: code that runs only when d_in == d_out has d_in where d_out belongs. A cause is named only
where the runs that succeed are exactly those its rule allows (RULES); every run is listed either way, so a
learner sees the shapes that ran beside the one that failed.
"""

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import cast

import torch

from grader.judge.diagnosis import WORKED_EXAMPLE_D_OUT
from grader.judge.tensor_diff import describe_value, described_call
from grader.judge.verdict import CheckFailed
from grader.runner.protocol import Foreign
from grader.sandbox.workers import LearnerFailure, LearnerWorkers

# Classes whose constructor takes heads, and key/value groups; the wrapper's output is num_heads * d_out wide.
HEADED = {"MultiHeadAttentionWrapper", "MultiHeadAttention", "MultiHeadAttentionKV", "GroupedQueryAttention"}
BATCHED = HEADED | {"CausalAttention"}
PROBED = BATCHED | {"SelfAttention_v1", "SelfAttention_v2"}
SEED = 9100
RUNS_HEADING = (
    "Run again on sizes of the judge's own, one size changed at a time (✓: ran and returned the documented shape):"
)
RUNS_LISTED_UNDER = "(the runs that tell why are listed under {check})"  # a later check of the same target
# torch's own words that say the cause of the base run's error themselves: no run is needed to tell it, and
# the runs that succeed would point elsewhere (a view of a transposed tensor works with one head).
SAID_BY_TORCH = ("view size is not compatible with input tensor's size and stride",)
TUPLE_RETURNED = "returned a tuple"  # how a run that returned a tuple begins its outcome
# How much of a learner's error a run's line quotes.
ERROR_CHARS = 160


@dataclass(frozen=True)
class Sizes:
    batch: int = 3
    tokens: int = 5
    d_in: int = 4
    d_out: int = 6
    context: int = 7
    heads: int = 3
    kv_groups: int = 1

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
        return (self.batch, self.tokens, self.d_in) if cls in BATCHED else (self.tokens, self.d_in)

    def out_shape(self, cls: str) -> tuple[int, ...]:
        width = self.heads * self.d_out if cls == "MultiHeadAttentionWrapper" else self.d_out
        return (self.batch, self.tokens, width) if cls in BATCHED else (self.tokens, width)


# Every size apart from every other; GQA's groups: 6 heads in 2 groups, so that a repeat count of
# num_kv_groups (2) differs from num_heads // num_kv_groups (3).
BASE = {cls: Sizes() for cls in PROBED} | {"GroupedQueryAttention": Sizes(d_out=12, heads=6, kv_groups=2)}
# The worked examples' sizes (the book's batch of two 6 x 3 inputs, d_out 2, two heads).
EXAMPLE = Sizes(batch=2, tokens=6, d_in=3, d_out=WORKED_EXAMPLE_D_OUT, context=6, heads=2, kv_groups=1)
DOUBLED = Sizes(**{name: 2 * size for name, size in vars(EXAMPLE).items() if name != "kv_groups"})

EXAMPLE_RUN = "the worked example's sizes"
NO_LEADING_RUN = "no leading dimensions, (L, E)"  # scaled dot-product attention on matrices alone
# Every size of the worked example doubled: what the example's sizes satisfy as relations (tokens =
# context_length, d_out = num_heads, d_out divisible by num_heads) still holds, only the numbers differ. Code
# that runs on the example and not here has a number written in it; code that runs on both needs a relation.
DOUBLED_RUN = "the worked example's sizes, each doubled"
# (name, what it changes): one size made equal to another, or every size the worked example's.
VARIATIONS = {
    "d_in = d_out": lambda s, cls: replace(s, d_in=s.d_out),
    "d_in a multiple of num_heads": lambda s, cls: replace(s, d_in=3 * s.heads) if cls in HEADED else None,
    "tokens = context_length": lambda s, cls: replace(s, tokens=s.context) if cls in BATCHED else None,
    "a batch of one": lambda s, cls: replace(s, batch=1) if cls in BATCHED else None,
    "one head": lambda s, cls: replace(s, heads=1, kv_groups=1) if cls in HEADED else None,
    "as many key/value groups as heads": (
        lambda s, cls: replace(s, kv_groups=s.heads) if cls == "GroupedQueryAttention" else None
    ),
    # num_kv_groups == num_heads // num_kv_groups: a repeat count of either is right
    "num_heads = num_kv_groups²": (
        lambda s, cls: replace(s, heads=s.kv_groups**2) if cls == "GroupedQueryAttention" else None
    ),
    EXAMPLE_RUN: lambda s, cls: EXAMPLE if cls != "GroupedQueryAttention" else None,
    DOUBLED_RUN: lambda s, cls: DOUBLED if cls != "GroupedQueryAttention" else None,
}

# hint -> (the runs that must succeed, the runs that may succeed too): named only where the runs that
# succeed are the required ones and no others but those allowed. First match wins. The worked example's
# sizes (and the same doubled) make several sizes equal at once, so they may run beside any single change
# that explains the rest; a number written in the code is proven only where the doubled sizes do not run.
WORKED = frozenset({EXAMPLE_RUN, DOUBLED_RUN})
RULES: list[tuple[str, frozenset[str], frozenset[str]]] = [
    ("mask-not-truncated", frozenset({"tokens = context_length"}), WORKED),
    ("d-in-for-d-out", frozenset({"d_in = d_out"}), frozenset({"d_in a multiple of num_heads"}) | WORKED),
    # a divisibility test of d_in instead of d_out: any multiple of num_heads, or one head, passes it
    ("d-in-for-d-out", frozenset({"d_in = d_out", "d_in a multiple of num_heads", "one head"}), WORKED),
    ("kv-repeat-count", frozenset({"num_heads = num_kv_groups²"}), frozenset({"one head"})),
    ("kv-heads-count", frozenset({"as many key/value groups as heads"}), frozenset({"one head"})),
    ("heads-width-wrong", frozenset({"one head"}), WORKED),
    ("batch-fixed", frozenset({"a batch of one"}), WORKED),
    ("sizes-hard-coded", frozenset({EXAMPLE_RUN}), frozenset()),
    # a function: any run that takes the worked example's tokens or features, and only those
    (
        "sizes-hard-coded",
        frozenset({"6 tokens, as in the worked example"}),
        frozenset({EXAMPLE_RUN, "3 features, as in the worked example"}),
    ),
    ("sizes-hard-coded", frozenset({"3 features, as in the worked example"}), frozenset({EXAMPLE_RUN})),
    # a mask indexed as (L, S) runs on query matrices alone too; anything else that runs only there counts the
    # inputs' dimensions from the start
    (
        "mask-leading-dims",
        frozenset({"a mask without leading dimensions, (L, S)"}),
        frozenset({"no mask", NO_LEADING_RUN}),
    ),
    (
        "leading-dims",
        frozenset({NO_LEADING_RUN}),
        frozenset({"a mask without leading dimensions, (L, S)", "no mask", "as many queries as keys"}),
    ),
]
# What each named cause says, after the runs: the claim they prove.
CLAIMS = {
    "mask-not-truncated": "It runs only when the input is as long as context_length: the mask is not cut to "
    "the input's num_tokens.",
    "d-in-for-d-out": "What runs needs d_in to be what d_out should be (equal to it, or a multiple of num_heads): "
    "somewhere d_in stands where d_out belongs (a view, a reshape, a divisibility test or a layer's size).",
    "kv-repeat-count": "It runs only where num_kv_groups == num_heads // num_kv_groups: each group must serve "
    "num_heads // num_kv_groups query heads, so repeat the keys and values that many times.",
    "kv-heads-count": "It runs only where num_kv_groups == num_heads: the keys and values, num_kv_groups heads, "
    "are used as num_heads heads.",
    "heads-width-wrong": "It runs with one head, not with several: the heads are split or merged with the "
    "wrong width or axis.",
    "wrapper-head-size": "It gives the documented width with one head, not with several: each head must "
    "return d_out features, num_heads * d_out in all.",
    "batch-fixed": "It runs only on a batch of one: a batch size is fixed (or squeezed away) somewhere.",
    "sizes-hard-coded": "It runs on the worked example's sizes and not on the same sizes doubled, which relate "
    "to one another as the example's do: a size is written as a number instead of being read from the input or "
    "the constructor's arguments.",
    "returns-tuple": "It returns a tuple where one tensor is documented.",
    "kv-projection-size": "It runs only where num_kv_groups == num_heads // num_kv_groups, and W_key gives other than "
    "num_kv_groups * head_dim features: the keys and values are projected to the wrong width.",
    "leading-dims": "It runs on (L, E) matrices alone, not with leading dimensions in front: a dimension is "
    "counted from the start (dim 1, size(0)) where it should be counted from the end.",
    "mask-leading-dims": "It runs with a mask of shape (L, S), not with one whose leading dimensions broadcast over "
    "the batch and heads: the mask is reshaped or indexed as if it had two dimensions.",
}


@dataclass(frozen=True)
class Run:
    name: str  # "" for the base run
    call: str  # what was called, in words: "MultiHeadAttention(4, 6, 7, 0, 3) on x (3, 5, 4)"
    outcome: str  # the shape it returned, or what it raised
    ok: bool
    failure: tuple = ()  # how it failed, as signature() says it

    def line(self) -> str:
        head = f"{self.name}: " if self.name else ""
        return f"  {'✓' if self.ok else '✗'} {head}{self.call}: {self.outcome}"


def qualifies(failure: BaseException) -> bool:
    """A failure the probe may explain: the learner's code raised, or a check failed naming no cause (a result of
    another shape, weights of other sizes than documented, ...). The probe's own base run then tells whether
    shapes are at fault at all."""
    if isinstance(failure, LearnerFailure):
        return failure.kind == "exception" and failure.type != "RouteSwitchedOff"
    return isinstance(failure, CheckFailed) and failure.hint in (None, "wrong-shape")


def signature(failure: BaseException) -> tuple:
    """How a failure shows itself, to tell whether a check failed as the probe's base run did: an exception by its
    type and the learner's line, else a result of another shape (or weights of other shapes)."""
    if isinstance(failure, LearnerFailure):
        return ("raised", failure.type, failure.where)
    return ("shape",)


def probed(target: str) -> bool:
    return target in PROBED or target in FUNCTIONS


def diagnose(learner: LearnerWorkers, stage: int, target: str) -> tuple[str, str | None, tuple] | None:
    """(the runs in words, the cause they prove or None, how the base run failed) for the module or function
    ``target``; None where the base run succeeds, so the failure lies in what the check alone does. A check's
    failure is told by these runs only where it fails as the base run does (signature)."""
    if target in FUNCTIONS:
        cases = [("", FUNCTIONS[target].base)] + [
            (name, vary(FUNCTIONS[target].base)) for name, vary in FUNCTIONS[target].variations.items()
        ]
        run = lambda name, case: _call_run(learner, stage, target, name, case)  # noqa: E731
    else:
        base = BASE[target]
        cases = [("", base)] + [
            (name, sizes)
            for name, vary in VARIATIONS.items()
            if (sizes := vary(base, target)) is not None and sizes.d_out % sizes.heads == 0
        ]
        run = lambda name, sizes: _module_run(learner, stage, target, name, sizes)  # noqa: E731
    first = run(*cases[0])
    if first.ok or any(words in first.outcome for words in SAID_BY_TORCH):
        return None
    runs = [first, *(run(name, case) for name, case in cases[1:])]
    ran = frozenset(run.name for run in runs if run.ok)
    cause = next((hint for hint, needed, allowed in RULES if needed <= ran <= needed | allowed), None)
    if cause == "kv-repeat-count" and _kv_width_wrong(learner, stage, target, cases[0][1]):
        cause = "kv-projection-size"  # keys and values of the wrong width fit only where the two counts agree too
    if cause is None and any(run.outcome.startswith(TUPLE_RETURNED) for run in runs):
        cause = "returns-tuple"  # a fact of its own, whatever else fails: one tensor is documented
    if cause == "heads-width-wrong" and target == "MultiHeadAttentionWrapper":
        cause = "wrapper-head-size"
    words = [RUNS_HEADING, *(run.line() for run in runs)]
    if cause is not None:
        words.append(CLAIMS[cause])
    return "\n".join(words), cause, first.failure


def _kv_width_wrong(learner: LearnerWorkers, stage: int, cls: str, sizes: Sizes) -> bool:
    """W_key gives other than num_kv_groups * head_dim features on ``sizes`` (False where it cannot be read)."""
    try:
        reply = cast(dict, learner.request(stage, "module", cls=cls, args=sizes.args(cls), seed=SEED, inputs=[]))
    except LearnerFailure:
        return False
    held = dict((name, size) for name, size in reply["structure"]["parameters"])
    documented = sizes.kv_groups * (sizes.d_out // sizes.heads)
    return "W_key.weight" in held and held["W_key.weight"][0] != documented


def _outcome(result: object, expected: tuple[int, ...]) -> tuple[str, bool]:
    if isinstance(result, torch.Tensor) and tuple(result.shape) == expected:
        return f"returned {expected}", True
    if isinstance(result, Foreign) and result.type == "tuple":
        return f"{TUPLE_RETURNED}, documented one tensor of shape {expected}", False
    got = tuple(result.shape) if isinstance(result, torch.Tensor) else describe_value(result)
    return f"returned {got}, documented {expected}", False


def _raised(name: str, call: str, failure: LearnerFailure) -> Run:
    said = str(failure)
    return Run(
        name, call, f"raised {said[:ERROR_CHARS]}{'…' if len(said) > ERROR_CHARS else ''}", False, signature(failure)
    )


def _module_run(learner: LearnerWorkers, stage: int, cls: str, name: str, sizes: Sizes) -> Run:
    args = ", ".join(f"{a:g}" if isinstance(a, float) else str(a) for a in sizes.args(cls))
    call = f"{cls}({args}) on x {sizes.x_shape(cls)}"
    x = torch.rand(*sizes.x_shape(cls), generator=torch.Generator().manual_seed(SEED))
    try:
        reply = cast(dict, learner.request(stage, "module", cls=cls, args=sizes.args(cls), seed=SEED, inputs=[x]))
    except LearnerFailure as failure:
        return _raised(name, call, failure)
    (output,) = reply["outputs"] or [None]
    return Run(name, call, *_outcome(output, sizes.out_shape(cls)), ("shape",))


# Functions ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """A function's sizes: tokens and features (stages 1, 4), or scaled dot-product attention's (stage 6)."""

    tokens: int = 5
    dim: int = 4
    batch: int = 2
    heads: int = 3
    keys: int = 5
    value_dim: int = 7
    mask: str = "leading"  # attn_mask: "leading" (batch, 1, L, S), "2d" (L, S), or "none"
    leading: bool = True  # query, key and value with (batch, heads) in front, or (L, E) alone


@dataclass(frozen=True)
class FunctionProbe:
    arguments: Callable[[Call, torch.Generator], list]  # (Call, generator) -> the call's arguments
    out_shape: Callable[[Call], tuple[int, ...]]  # Call -> the documented shape of its result
    base: Call
    variations: dict


def _sdpa_arguments(c: Call, rng: torch.Generator) -> list:
    lead = (c.batch, c.heads) if c.leading else ()
    query, key = torch.rand(*lead, c.tokens, c.dim, generator=rng), torch.rand(*lead, c.keys, c.dim, generator=rng)
    value = torch.rand(*lead, c.keys, c.value_dim, generator=rng)
    mask = None
    if c.mask != "none":
        mask = torch.rand(*((c.batch, 1) if c.mask == "leading" else ()), c.tokens, c.keys, generator=rng) > 0.3
        mask[..., 0] = True  # every query keeps a key
    return [query, key, value, mask]


# The worked examples' sizes for a function: the book's 6 tokens of 3 features (EXAMPLE's).
EXAMPLE_TOKENS, EXAMPLE_DIM = EXAMPLE.tokens, EXAMPLE.d_in
WORKED_SIZES = {
    "6 tokens, as in the worked example": lambda c: replace(c, tokens=EXAMPLE_TOKENS),
    "3 features, as in the worked example": lambda c: replace(c, dim=EXAMPLE_DIM),
    EXAMPLE_RUN: lambda c: replace(c, tokens=EXAMPLE_TOKENS, dim=EXAMPLE_DIM),
    DOUBLED_RUN: lambda c: replace(c, tokens=2 * EXAMPLE_TOKENS, dim=2 * EXAMPLE_DIM),
}
FUNCTIONS = {
    "attention_scores": FunctionProbe(
        lambda c, g: [torch.rand(c.tokens, c.dim, generator=g), torch.rand(c.dim, generator=g)],
        lambda c: (c.tokens,),
        Call(),
        WORKED_SIZES,
    ),
    "softmax_naive": FunctionProbe(
        lambda c, g: [torch.randn(c.tokens, generator=g)], lambda c: (c.tokens,), Call(), WORKED_SIZES
    ),
    "context_vector": FunctionProbe(
        lambda c, g: [torch.rand(c.tokens, c.dim, generator=g), torch.softmax(torch.randn(c.tokens, generator=g), 0)],
        lambda c: (c.dim,),
        Call(),
        WORKED_SIZES,
    ),
    "simple_self_attention": FunctionProbe(
        lambda c, g: [torch.rand(c.tokens, c.dim, generator=g)], lambda c: (c.tokens, c.dim), Call(), WORKED_SIZES
    ),
    "mask_and_renormalize": FunctionProbe(
        lambda c, g: [torch.softmax(torch.randn(c.tokens, c.tokens, generator=g), -1)],
        lambda c: (c.tokens, c.tokens),
        Call(),
        WORKED_SIZES,
    ),
    "causal_softmax": FunctionProbe(
        lambda c, g: [torch.randn(c.tokens, c.tokens, generator=g), c.dim],
        lambda c: (c.tokens, c.tokens),
        Call(),
        WORKED_SIZES,
    ),
    "scaled_dot_product_attention": FunctionProbe(
        _sdpa_arguments,
        lambda c: (c.batch, c.heads, c.tokens, c.value_dim) if c.leading else (c.tokens, c.value_dim),
        Call(tokens=4, dim=6),
        {
            "a mask without leading dimensions, (L, S)": lambda c: replace(c, mask="2d"),
            "no mask": lambda c: replace(c, mask="none"),
            "as many queries as keys": lambda c: replace(c, tokens=c.keys),
            NO_LEADING_RUN: lambda c: replace(c, leading=False, mask="2d"),
        },
    ),
}


def _call_run(learner: LearnerWorkers, stage: int, function: str, name: str, case: Call) -> Run:
    probe = FUNCTIONS[function]
    args = probe.arguments(case, torch.Generator().manual_seed(SEED))
    call = described_call(function, args)
    try:
        reply = cast(dict, learner.request(stage, "call", function=function, args=args))
    except LearnerFailure as failure:
        return _raised(name, call, failure)
    return Run(name, call, *_outcome(reply["result"], probe.out_shape(case)), ("shape",))
