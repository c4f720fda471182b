"""Whether a function ignores one of its arguments: the same result for two values of it, the others held.

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


def ignored_argument(learner: LearnerWorkers, stage: int, function: str) -> str | None:
    """The claim, in words, that ``function`` ignores one of its tensor arguments, proven by two calls that differ
    in that argument alone and return one identical tensor; None where no argument is ignored (or a call fails)."""
    if function not in FUNCTIONS:
        return None
    probe = FUNCTIONS[function]
    base = probe.arguments(probe.base, torch.Generator().manual_seed(SEED))
    other = probe.arguments(probe.base, torch.Generator().manual_seed(SEED + 1))
    first = _result(learner, stage, function, base)
    if first is None:
        return None
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
                "shape alone)"
            )
    return None


def _result(learner: LearnerWorkers, stage: int, function: str, args: list) -> torch.Tensor | None:
    try:
        result = call(learner, stage, function, *args)
    except LearnerFailure:
        return None
    return result if isinstance(result, torch.Tensor) else None
