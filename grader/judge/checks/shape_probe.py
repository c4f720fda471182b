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
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import torch

from grader.judge.checks.attention_probe import computes_transposed
from grader.judge.checks.probe_sizes import (
    BASE,
    BATCH_ADDED,
    COUNTED,
    FEATURE_EDGES,
    FEATURED,
    FUNCTION_EDGES,
    FUNCTIONS,
    MODULE_EDGES,
    PROBED,
    SINGLE_TOKEN,
    SPLIT,
    TOKEN_EDGES,
    VARIATIONS,
    Call,
    Sizes,
)
from grader.judge.checks.shape_rules import (
    CLAIMS,
    EDGE_CAUSES,
    OWN_CHECK_CAUSES,
    OWN_CHECK_CLAIM,
    ROW_PAST_ONE_TOKEN,
    ROW_PAST_ONE_TOKEN_CLAIM,
    RULE_CLAIMS,
    RULES,
    TOKENS_FOLDED_CLAIM,
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
NONE_RETURNED = "returned None,"  # how a run that returned nothing begins its outcome
# How much of a learner's error a run's line quotes.
ERROR_CHARS = 160


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
    """How a failure shows itself, to tell whether a check failed as one of the probe's runs did: an exception by its
    type and the learner's line, else a result of another shape (or weights of other shapes)."""
    if isinstance(failure, LearnerFailure):
        return ("raised", failure.type, failure.where)
    return ("shape",)


def probed(target: str) -> bool:
    return target in PROBED or target in FUNCTIONS


def diagnose(learner: LearnerWorkers, stage: int, target: str) -> tuple[str, str | None, frozenset] | None:
    """(the runs in words, the cause they prove or None, how the runs that failed failed) for the module or
    function ``target``; None where the base run succeeds, so the failure lies in what the check alone does. A
    check's failure is told by these runs only where it fails as one of them does (signature): a check on sizes of
    its own may fail as the doubled sizes do (an index past the example's 6 tokens) where the base run returned
    another shape."""
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
            if (sizes := vary(base, target)) is not None and (sizes.d_out % sizes.heads == 0 or target not in SPLIT)
        ]
        run = lambda name, sizes: _module_run(learner, stage, target, name, sizes)  # noqa: E731
    first = run(*cases[0])
    if first.ok:
        return _edge_diagnosis(first, run, target, cases[0][1])
    if any(words in first.outcome for words in SAID_BY_TORCH):
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
    # every documented size: nothing is returned at all (a batch stage 2's modules need not take may raise instead)
    if cause is None and all(run.outcome.startswith(NONE_RETURNED) for run in runs if run.name != BATCH_ADDED):
        cause = "returns-none"
    if own_check and rule and rule[0] == "heads-width-wrong" and target == "MultiHeadAttentionWrapper":
        cause = "wrapper-head-size"  # a check of its own asks num_heads to divide d_out, as the heads' split does
    if cause == "heads-width-wrong" and target == "MultiHeadAttentionWrapper":
        # heads of d_out features each, as documented: what fails is how their outputs are combined
        cause = "wrapper-concat-dim" if _heads_full_width(learner, stage, target, cases[0][1]) else "wrapper-head-size"
    folded = cause is None and target in SPLIT and _tokens_folded(runs, [sizes for _, sizes in cases])
    # no run proves a size: the error's own words may still say why (an attribute missing, a refused argument)
    told = hint_for_exception(first.outcome) if cause is None and first.failure[:1] == ("raised",) else None
    words = [RUNS_HEADING, *(run.line() for run in runs)]
    # a proven cause tells every run that failed; an error's own words (told) tell only the base run's
    failures = frozenset(run.failure for run in runs if not run.ok) if cause or folded else frozenset({first.failure})
    if folded:
        words.append(TOKENS_FOLDED_CLAIM)
        return "\n".join(words), "heads-merged-wrong", failures
    if cause is not None and own_check and rule and cause != "input-length-refused":
        words.append(OWN_CHECK_CLAIM.format(runs="; ".join(sorted(rule[1]))))
    elif cause is not None:
        words.append(RULE_CLAIMS.get((cause, rule[1]), CLAIMS[cause]) if rule else CLAIMS[cause])
    return "\n".join(words), cause or told, failures


# torch's words for a product of mismatched matrices: "mat1 and mat2 shapes cannot be multiplied (3x30 and 6x6)"
PRODUCT_ERROR = re.compile(r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and")


def _tokens_folded(runs: list[Run], sizes: list[Sizes]) -> bool:
    """Every run raised at a product given (batch, num_tokens * d_out): the tokens folded into the features."""
    found = [PRODUCT_ERROR.search(run.outcome) for run in runs]
    return all(
        f is not None and (int(f.group(1)), int(f.group(2))) == (s.batch, s.tokens * s.d_out)
        for f, s in zip(found, sizes)
    )


def _edge_diagnosis(first: Run, run: Callable, target: str, base: object) -> tuple[str, str | None, frozenset] | None:
    """Where the base run succeeds: the edges (sizes below the judge's own) run too, and one that fails alone
    proves its cause, for a check that failed as it did; None where every edge runs (or several fail)."""
    if target in FUNCTIONS:
        edges = (
            FUNCTION_EDGES | (FEATURE_EDGES if target in FEATURED else {}) | (TOKEN_EDGES if target in COUNTED else {})
        )
        varied = [(name, vary(base)) for name, vary in edges.items()]
    else:
        varied = [(name, vary(base, target)) for name, vary in MODULE_EDGES.items()]
    runs = [run(name, case) for name, case in varied]
    failed = [r for r in runs if not r.ok]
    if len(failed) != 1 or failed[0].outcome.startswith(TUPLE_RETURNED):
        return None
    cause, claim = EDGE_CAUSES[failed[0].name]
    if failed[0].name == SINGLE_TOKEN and failed[0].failure[:2] == ("raised", "IndexError"):
        # no lost axis: an index past the one token (inputs[1]) where torch says so, else nothing the runs prove
        if (past := re.search(ROW_PAST_ONE_TOKEN, failed[0].outcome)) is None:
            return None
        cause, claim = "sizes-hard-coded", ROW_PAST_ONE_TOKEN_CLAIM.format(index=past[1])
    words = [RUNS_HEADING, first.line(), *(r.line() for r in runs), claim]
    return "\n".join(words), cause, frozenset({failed[0].failure})


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
