"""Whether a function ignores one of its arguments: the same result for two values of it, the others held; or
gives other results for one same call.

Every documented function's result depends on each of its tensor arguments (the scores on the query, the context
vector on the weights, the renormalised weights on the weights given); two draws of one argument, the others the
same, that give one identical result prove the code never reads it (a variable set from the worked example, such
as query = inputs[1], or a result built from a shape alone).
"""

import torch

from grader.judge.checks.probe_sizes import FUNCTIONS
from grader.judge.checks.support import ORDINALS, call
from grader.judge.tensor_diff import described_call
from grader.sandbox.workers import LearnerFailure, LearnerWorkers

SEED = 9200
REPEATS = 3  # the same call made again, each after one with other numbers


def ignored_argument(learner: LearnerWorkers, stage: int, function: str) -> tuple[str, str] | None:
    """(the claim in words, its hint) that ``function`` ignores one of its tensor arguments, proven by two calls that
    differ in that argument alone and return one identical tensor (argument-ignored); or, first, that it returns
    other numbers for one same call, which a documented function never does (results-vary: memory read before it
    is written, torch.empty filled with +=). None where neither is proven (or a call fails)."""
    if function not in FUNCTIONS:
        return None
    probe = FUNCTIONS[function]
    base = probe.arguments(probe.base, torch.Generator().manual_seed(SEED))
    other = probe.arguments(probe.base, torch.Generator().manual_seed(SEED + 1))
    first = _result(learner, stage, function, base)
    if first is None:
        return None
    # the same call again, after calls with other numbers (whose freed memory a torch.empty may be given): the
    # same result each time, or memory read before it is written
    agains = []
    for _ in range(REPEATS):
        _result(learner, stage, function, other)
        agains.append(_result(learner, stage, function, base))
    if any(again is not None and again.shape == first.shape and _differ(again, first) for again in agains):
        return (
            f"{function} gave other numbers for the very same call, {described_call(function, base)}, made twice: "
            "it reads memory it never wrote (torch.empty holds whatever was there before: fill each entry with =, "
            "or start from torch.zeros), or draws random numbers, where the same inputs always give the same result",
            "results-vary",
        )
    for index, (kept, changed) in enumerate(zip(base, other)):
        if not (isinstance(kept, torch.Tensor) and kept.is_floating_point()) or torch.equal(kept, changed):
            continue
        args = [*base[:index], changed, *base[index + 1 :]]
        second = _result(learner, stage, function, args)
        if second is not None and second.shape == first.shape and torch.equal(second, first):
            which = "its argument" if len(base) == 1 else f"its {ORDINALS[index]} argument"
            return (
                f"{function} gives the same result whatever {which} holds: {described_call(function, base)} and "
                f"the same call with other numbers in {which} return one identical tensor, so the code never reads "
                "it (a variable set from the worked example, such as query = inputs[1], or a result built from a "
                "shape alone)",
                "argument-ignored",
            )
    return None


def _result(learner: LearnerWorkers, stage: int, function: str, args: list) -> torch.Tensor | None:
    try:
        result = call(learner, stage, function, *args)
    except LearnerFailure:
        return None
    return result if isinstance(result, torch.Tensor) else None


def _differ(one: torch.Tensor, other: torch.Tensor) -> bool:
    """Whether two results of one same call differ at all, NaN where NaN (single-threaded CPU: bit for bit)."""
    return not torch.equal(one.isnan(), other.isnan()) or bool((one.nan_to_num() != other.nan_to_num()).any())
