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

import re
from dataclasses import dataclass
from typing import cast

import torch

from grader.judge.checks.attention_probe import computes_transposed
from grader.judge.checks.probe_sizes import (
    BASE,
    BATCHED_RUN,
    DOUBLED_RUN,
    EXAMPLE_RUN,
    FULL_MASK_RUN,
    FUNCTIONS,
    NO_LEADING_RUN,
    ONE_FEATURE,
    ONE_LEADING_RUN,
    PROBED,
    SQUARE_HEADS,
    SQUARE_INPUTS,
    TOKENS_AS_OUTPUTS,
    VALUE_WIDTH_RUN,
    VARIATIONS,
    Call,
    Sizes,
)
from grader.judge.exception_hints import hint_for_exception
from grader.judge.tensor_diff import describe_value, described_call
from grader.judge.verdict import CheckFailed
from grader.runner.protocol import Foreign
from grader.sandbox.workers import LearnerFailure, LearnerWorkers

SEED = 9100
RUNS_HEADING = (
    "Run again on sizes of the judge's own, one size changed at a time (✓: ran and returned the documented shape):"
)
RUNS_LISTED_UNDER = "(the runs that tell why are listed under {check})"  # a later check of the same target
# torch's own words that say the cause of the base run's error themselves: no run is needed to tell it, and
# the runs that succeed would point elsewhere (a view of a transposed tensor works with one head).
SAID_BY_TORCH = ("view size is not compatible with input tensor's size and stride",)
EXPANDED = "The expanded size of the tensor"  # torch's words for an expand of an axis that is not of size 1
TUPLE_RETURNED = "returned a tuple"  # how a run that returned a tuple begins its outcome
# How much of a learner's error a run's line quotes.
ERROR_CHARS = 160


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
    # num_kv_groups where num_heads // num_kv_groups belongs: a repeat count fits where the two agree; a head
    # index divided by it (arange(num_heads) // num_kv_groups) fits there, and where every group is one head
    (
        "kv-repeat-count",
        frozenset({"num_heads = num_kv_groups²"}),
        frozenset({"one head", "as many key/value groups as heads"}),
    ),
    ("kv-heads-count", frozenset({"as many key/value groups as heads"}), frozenset({"one head"})),
    ("heads-width-wrong", frozenset({"one head"}), WORKED | {ONE_FEATURE, SQUARE_HEADS}),
    ("heads-width-wrong", frozenset({ONE_FEATURE}), WORKED | {SQUARE_HEADS}),
    # a transpose missing after the split, or on other axes: only a (b, heads, tokens, head_dim) of equal axes runs
    ("heads-split-wrong", frozenset({SQUARE_HEADS}), frozenset({"one head"})),
    ("batch-fixed", frozenset({"a batch of one"}), WORKED),
    ("tokens-for-features", frozenset({SQUARE_INPUTS}), WORKED),
    ("tokens-for-features", frozenset({TOKENS_AS_OUTPUTS}), WORKED),
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
        frozenset({"no mask", NO_LEADING_RUN, FULL_MASK_RUN, ONE_LEADING_RUN}),
    ),
    # a mask indexed (scores[~mask] = ...) where it should broadcast: it runs where the mask has the scores' shape
    ("mask-leading-dims", frozenset({FULL_MASK_RUN}), frozenset({"no mask", NO_LEADING_RUN, ONE_LEADING_RUN})),
    # an output shaped from the queries (out.view(query.shape)): it runs where the values are as wide
    ("value-width", frozenset({VALUE_WIDTH_RUN}), frozenset()),
    (
        "leading-dims",
        frozenset({NO_LEADING_RUN}),
        frozenset({"a mask without leading dimensions, (L, S)", "no mask", "as many queries as keys", ONE_LEADING_RUN}),
    ),
    # something that takes exactly three dimensions (torch.bmm, a 3-D view): only a stack of matrices runs
    ("leading-dims", frozenset({ONE_LEADING_RUN}), frozenset()),
    # stage 4's functions: the first dimension read as a batch (scores[0]), so the documented (n, n) fails
    ("leading-dims", frozenset({BATCHED_RUN}), WORKED),
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
    "wrapper-concat-dim": "It gives the documented width with one head, not with several, and each head holds "
    "d_out features as documented: their outputs are combined otherwise than concatenated along the last "
    "dimension (summed, averaged, or joined along another axis), where num_heads * d_out features belong.",
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
    "value-width": "It runs only where the values are as wide as the queries (Ev = E): the output is (..., L, Ev), "
    "value's width, and something shapes it from the queries instead.",
    "heads-split-wrong": "It runs only where num_tokens, num_heads and head_dim are equal, where (b, num_heads, "
    "num_tokens, head_dim) keeps its shape with any two of its last three axes swapped: a transpose after the "
    "split into heads is missing, or swaps other axes (the keys' is transpose(2, 3), their last two).",
    "tokens-for-features": "It runs only where num_tokens == d_in: somewhere the token axis meets the feature "
    "axis (weights of the tokens broadcast along the features, a product with inputs where inputs.T belongs).",
    "kv-expanded": "It runs only where num_kv_groups == num_heads (or 1): .expand() repeats only an axis of size 1, "
    "and the keys' heads axis holds num_kv_groups groups.",
    "weights-transposed-in-forward": "It runs only when d_in == d_out, and there it computes x @ W.T: weights "
    "documented as (d_in, d_out) are used as if they were nn.Linear's (d_out, d_in).",
    "input-length-refused": "It runs only when the input is as long as context_length, and what stops the others is "
    "a check of your own: inputs may be shorter than context_length.",
}
# What a rule's runs prove where a raise or assert of the learner's own stops those that fail: its check asks
# for what the rule's claim says (d_in where d_out belongs, the example's numbers, a batch of one) or, for an
# input as long as context_length, refuses shorter ones. A cause in a view or a mask is then unproven.
OWN_CHECK_CAUSES = {
    "mask-not-truncated": "input-length-refused",
    "d-in-for-d-out": "d-in-for-d-out",
    "sizes-hard-coded": "sizes-hard-coded",
    "batch-fixed": "batch-fixed",
    "mask-leading-dims": "mask-leading-dims",
    "leading-dims": "leading-dims",
}
OWN_CHECK_CLAIM = (
    "It runs only with {runs}, and what stops the other runs is a check of your own (a raise or an assert): it "
    "refuses sizes the docstring allows."
)
# What a rule's runs prove where they say more than its hint's CLAIMS: (hint, the runs it needs) -> the claim.
RULE_CLAIMS = {
    ("heads-width-wrong", frozenset({ONE_FEATURE})): "It runs only where each head has one feature (d_out = "
    "num_heads, as in the worked example's 2 heads of d_out 2): num_heads stands where head_dim belongs, or the "
    "other way round, in a view or reshape that splits or merges the heads.",
    ("leading-dims", frozenset({BATCHED_RUN})): "It runs on a batch of matrices, (B, n, n), and not on the documented "
    "(n, n) matrix: something takes the first dimension as the batch (scores[0], ones_like(scores[0])) where "
    "the weights may have none; count from the end (the last two dimensions are the matrix).",
    ("tokens-for-features", frozenset({TOKENS_AS_OUTPUTS})): "It runs only where num_tokens == d_out: a product "
    "pairs the token axis of the queries, keys or values with their feature axis (queries.T @ keys, a (d_out, "
    "d_out) matrix, where queries @ keys.T compares every token with every other).",
    ("leading-dims", frozenset({ONE_LEADING_RUN})): "It runs on a stack of matrices, (H, L, E), and not with two "
    "leading dimensions or none: something takes exactly three dimensions (torch.bmm, a 3-D view or index) where "
    "matmul (@) and dimensions counted from the end take any number.",
    ("kv-repeat-count", frozenset({"as many key/value groups as heads"})): "It runs only where num_kv_groups == "
    "num_heads, where no group is shared: the keys and values reach the query heads without the right repeat "
    "(num_heads // num_kv_groups times along the heads axis, dim=1).",
    ("heads-width-wrong", frozenset({"as many key/value groups as heads"})): "It runs only where num_kv_groups == "
    "num_heads, and what stops it is the merge of the heads: a view to the keys' width, num_kv_groups * head_dim, "
    "where d_out belongs.",
    ("mask-leading-dims", frozenset({FULL_MASK_RUN})): "It runs with a mask of the scores' own shape, not with "
    "one whose leading dimensions (or their absence) broadcast to it: the mask is indexed (scores[~mask] = ...) "
    "or reshaped where it should broadcast, as masked_fill and + do.",
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
    rule = next(((hint, needed) for hint, needed, allowed in RULES if needed <= ran <= needed | allowed), None)
    cause = rule[0] if rule else None
    if cause == "kv-repeat-count" and _kv_width_wrong(learner, stage, target, cases[0][1]):
        cause = "kv-projection-size"  # keys and values of the wrong width fit only where the two counts agree too
    elif cause == "kv-repeat-count" and _kv_viewed_as_group_size(first.outcome, cases[0][1]):
        cause = "kv-heads-count"  # keys and values of the right width, viewed as num_heads // num_kv_groups heads
    elif cause == "kv-heads-count" and EXPANDED in first.outcome:
        cause = "kv-expanded"  # torch's expand repeats only an axis of size 1: the groups' axis is num_kv_groups
    elif cause == "kv-heads-count" and _merged_as_kv_width(first.outcome, cases[0][1]):
        cause = "heads-width-wrong"  # the heads merged back to the keys' width, not d_out
    elif cause == "kv-heads-count" and not _kv_viewed_as(first.outcome, cases[0][1], cases[0][1].heads):
        cause = "kv-repeat-count"  # split right, the groups never reach the query heads: no repeat, or a wrong one
    elif cause == "d-in-for-d-out" and target == "SelfAttention_v1" and _uses_transposed(learner, stage, target):
        cause = "weights-transposed-in-forward"  # (d_in, d_out) weights multiplied as x @ W.T
    if cause == "tokens-for-features" and first.failure[:1] != ("raised",):
        cause = None  # a result of another shape that happens to fit square inputs: no axis meets the other
    if cause is not None and first.failure[:2] == ("raised", "TypeError") and cause != "returns-tuple":
        cause = None  # a value of the wrong type (a float count, an int where a tensor belongs): no size says why
    own_check = cause is not None and _own_check(learner, first)
    if own_check:
        cause = OWN_CHECK_CAUSES.get(cause or "")  # the learner's own raise or assert stops the runs
    if cause is None and any(run.outcome.startswith(TUPLE_RETURNED) for run in runs):
        cause = "returns-tuple"  # a fact of its own, whatever else fails: one tensor is documented
    if cause == "heads-width-wrong" and target == "MultiHeadAttentionWrapper":
        # heads of d_out features each, as documented: what fails is how their outputs are combined
        cause = "wrapper-concat-dim" if _heads_full_width(learner, stage, target, cases[0][1]) else "wrapper-head-size"
    # no run proves a size: the error's own words may still say why (an attribute missing, a refused argument)
    told = hint_for_exception(first.outcome) if cause is None and first.failure[:1] == ("raised",) else None
    words = [RUNS_HEADING, *(run.line() for run in runs)]
    if cause is not None and own_check and rule and cause != "input-length-refused":
        words.append(OWN_CHECK_CLAIM.format(runs="; ".join(sorted(rule[1]))))
    elif cause is not None:
        words.append(RULE_CLAIMS.get((cause, rule[1]), CLAIMS[cause]) if rule else CLAIMS[cause])
    return "\n".join(words), cause or told, first.failure


def _uses_transposed(learner: LearnerWorkers, stage: int, cls: str) -> bool:
    try:
        return computes_transposed(learner, stage, cls)
    except (LearnerFailure, CheckFailed):
        return False


def _own_check(learner: LearnerWorkers, run: Run) -> bool:
    """``run`` failed at a raise or assert statement of the learner's own, as the judge's copy of the file reads."""
    where = run.failure[2] if run.failure[:1] == ("raised",) else None
    return learner.source_line(where).startswith(("raise ", "raise(", "assert ", "assert("))


# torch's words for a view that does not fit: "shape '[3, 5, 3, 2]' is invalid for input of size 60"
VIEW_ERROR = re.compile(r"shape '\[([-\d, ]+)\]' is invalid for input of size (\d+)")


def _kv_viewed_as_group_size(outcome: str, sizes: Sizes) -> bool:
    """``outcome`` is a view of keys or values of the documented width as (batch, tokens, num_heads //
    num_kv_groups, head_dim)."""
    return _kv_viewed_as(outcome, sizes, sizes.heads // sizes.kv_groups)


def _kv_viewed_as(outcome: str, sizes: Sizes, heads: int) -> bool:
    """``outcome`` is a view of keys or values of the documented width (batch x tokens x num_kv_groups x
    head_dim numbers) as (batch, tokens, ``heads``, head_dim)."""
    head_dim = sizes.d_out // sizes.heads
    held = sizes.batch * sizes.tokens * sizes.kv_groups * head_dim
    return _view_refused(outcome) == ([sizes.batch, sizes.tokens, heads, head_dim], held)


def _merged_as_kv_width(outcome: str, sizes: Sizes) -> bool:
    """``outcome`` is a view of the attention's context (batch x tokens x d_out numbers) as (batch, tokens,
    num_kv_groups * head_dim): the heads merged back to the keys' width."""
    kv_width = sizes.kv_groups * (sizes.d_out // sizes.heads)
    return _view_refused(outcome) == ([sizes.batch, sizes.tokens, kv_width], sizes.batch * sizes.tokens * sizes.d_out)


def _view_refused(outcome: str) -> tuple[list[int], int] | None:
    """The shape a view asked for and the number of values it was given, where torch's error says so."""
    found = VIEW_ERROR.search(outcome)
    return ([int(size) for size in found.group(1).split(",")], int(found.group(2))) if found else None


def _kv_width_wrong(learner: LearnerWorkers, stage: int, cls: str, sizes: Sizes) -> bool:
    """W_key gives other than num_kv_groups * head_dim features on ``sizes`` (False where it cannot be read)."""
    try:
        reply = cast(dict, learner.request(stage, "module", cls=cls, args=sizes.args(cls), seed=SEED, inputs=[]))
    except LearnerFailure:
        return False
    held = dict((name, size) for name, size in reply["structure"]["parameters"])
    documented = sizes.kv_groups * (sizes.d_out // sizes.heads)
    return "W_key.weight" in held and held["W_key.weight"][0] != documented


def _heads_full_width(learner: LearnerWorkers, stage: int, cls: str, sizes: Sizes) -> bool:
    """Every weight that takes the d_in inputs gives d_out features on ``sizes``: the heads are as wide as
    documented (False where the module cannot be read)."""
    try:
        reply = cast(dict, learner.request(stage, "module", cls=cls, args=sizes.args(cls), seed=SEED, inputs=[]))
    except LearnerFailure:
        return False
    weights = [size for _, size in reply["structure"]["parameters"] if len(size) == 2 and size[1] == sizes.d_in]
    return bool(weights) and all(size[0] == sizes.d_out for size in weights)


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


def _call_run(learner: LearnerWorkers, stage: int, function: str, name: str, case: Call) -> Run:
    probe = FUNCTIONS[function]
    args = probe.arguments(case, torch.Generator().manual_seed(SEED))
    call = described_call(function, args)
    try:
        reply = cast(dict, learner.request(stage, "call", function=function, args=args))
    except LearnerFailure as failure:
        return _raised(name, call, failure)
    return Run(name, call, *_outcome(reply["result"], probe.out_shape(case)), ("shape",))
