"""Whether a function takes a torch shortcut around what its exercise builds by hand.

What grants the check: the function gives the right answer, as the judge computes it, in a worker
where torch's own route is switched off before the learner's file loads (grader.runner.routes).
Nothing the worker says about itself can stand in for that answer. What vetoes it:

1. The stage file as the judge staged it (grader.judge.source_scan): the names the function and the
   helpers it refers to spell, and any reach into what the grader records, anywhere in the file.
2. The recorder in the worker: the torch operations the function reached while it ran.
3. What the recorder did not see: a function that gave the right answer without showing the
   recorder the work every right answer does (an exponential, for a softmax) ran where the
   recorder could not see it.

Learner code runs beside the recorder and can switch it off or rewrite what it saw: the second and
third lines may only take credit away.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from grader.core.stages import STAGE_MODULES
from grader.judge.checks.support import CheckFailed, build, parameters_only, reference_output, reference_state
from grader.judge.exception_hints import refused_call
from grader.judge.routes_off import ATTENTION_OFF, SOFTMAX_OFF, SOLVERS_OFF
from grader.judge.source_scan import MODULE_LEVEL, Use, scan_source
from grader.judge.verdict import agrees
from grader.runner.implementation import Implementation
from grader.runner.route_names import SwitchedOff
from grader.runner.routes import RouteSwitchedOff
from grader.runner.shortcuts import ATTENTION, SOFTMAX
from grader.sandbox.workers import LearnerFailure, LearnerWorkers

# Every exponential a softmax written by hand may run, as the recorder names it (function and aten names).
EXPONENTIALS = frozenset(
    {
        "exp",
        "exp_",
        "exp2",
        "exp2_",
        "special_exp2",
        "expm1",
        "expm1_",
        "special_expm1",
        "pow",
        "pow_",
        "__pow__",
        "__rpow__",
        "__ipow__",
        "float_power",
        "float_power_",
        "logsumexp",
        "special_logsumexp",
    }
)
# Least squares, pseudo-inverses, solvers and inverses: fitting v1 to v2 instead of copying.
SOLVERS = frozenset(
    {"linalg_lstsq", "lstsq", "linalg_pinv", "pinverse", "linalg_solve", "solve", "linalg_inv", "inverse"}
)
SOLVER_SPELLINGS = SOLVERS | {
    "pinv",
    "inv",
    "solve_ex",
    "inv_ex",
    "lu_solve",
    "cholesky_solve",
    "cholesky_inverse",
    "triangular_solve",
    "solve_triangular",
    "tensorsolve",
    "tensorinv",
}
# Where the seeded weights of a shortcut check's module come from.
SHORTCUT_SEED = 1500
SHOWN_AT_MOST = 5


@dataclass(frozen=True)
class Shortcut:
    """A torch route around what an exercise builds, and what any right answer shows the recorder."""

    recorded: frozenset[str]  # the route, as the recorder names the operations
    spelled: frozenset[str]  # the route, as source code spells it (functions, methods, modules)
    why: str  # why the route earns nothing, in the learner's words
    work: frozenset[str] | None  # operations, one of which every right answer runs; None: any operation at all
    work_in_words: str
    switched_off: SwitchedOff  # what the check's worker runs without
    switched_off_in_words: str


SOFTMAX_BY_HAND = Shortcut(
    recorded=frozenset(SOFTMAX),
    # and autograd, whose formulas compute a softmax as the gradient of logsumexp
    spelled=frozenset(SOFTMAX)
    | {"Softmax", "LogSoftmax", "Softmax2d", "softmin", "Softmin"}
    | {"grad", "backward", "vjp", "jacrev", "jacfwd", "jacobian", "hessian"},
    why="softmax_naive is the softmax written by hand",
    work=EXPONENTIALS,
    work_in_words="exponential (torch.exp)",
    switched_off=SOFTMAX_OFF,
    switched_off_in_words="torch's softmax and attention",
)
ATTENTION_BY_HAND = Shortcut(
    recorded=frozenset(ATTENTION),
    spelled=frozenset(ATTENTION) | {"MultiheadAttention"},
    why="the attention is yours to compute",
    work=EXPONENTIALS | SOFTMAX | {"softmin"},
    work_in_words="softmax or exponential",
    switched_off=ATTENTION_OFF,
    switched_off_in_words="torch's attention",
)
TRANSFER_BY_COPY = Shortcut(
    recorded=SOLVERS | ATTENTION,
    spelled=SOLVER_SPELLINGS | ATTENTION | {"MultiheadAttention"},
    why="the weights are copied, not fitted",
    work=None,
    work_in_words="operation at all",
    switched_off=SOLVERS_OFF,
    switched_off_in_words="torch's solvers, inverses and attention",
)


def expect_not_spelled(sources: dict[int, bytes | None], stage: int, target: str, shortcut: Shortcut) -> None:
    """Fail when the stage file reaches into what the grader records, anywhere, or ``target`` spells ``shortcut``.

    Reaching in anywhere voids every function the stage's shortcut checks judge: such code can
    hide any of them. The check runs before any learner code, so a worker that fails cannot hide it.
    """
    source = sources.get(stage)
    if source is None:  # no copy from the session (or no file): the other two lines still judge
        return
    try:
        scan = scan_source(source)
    except RecursionError:
        raise CheckFailed(
            f"{target} earns nothing: {STAGE_MODULES[stage]}.py nests its code deeper than the grader "
            "reads, which only hides it",
            "recorder-tampered",
            from_source=True,
        ) from None
    if scan.tampering:
        raise CheckFailed(
            f"{target} earns nothing: {STAGE_MODULES[stage]}.py reaches into what the grader sees of "
            f"your code ({_listed(scan.tampering)}). Switching off PyTorch's function or dispatch "
            "modes, or reading the grader's frames and objects, is not allowed",
            "recorder-tampered",
            from_source=True,
        )
    spelled = scan.uses_reached_from(target, shortcut.spelled)
    if spelled:
        raise CheckFailed(
            f"{target} uses torch's own {_listed(spelled)}: {shortcut.why}", "banned-api", from_source=True
        )


def switched_off_reply(shortcut: Shortcut, what: str, ask: Callable[[SwitchedOff], dict]) -> dict:
    """``ask(switched_off)``'s reply: the learner's code run where ``shortcut``'s route is switched off.
    Code that called the route fails (banned-api), whether the error reached the judge or the probe caught it."""
    try:
        reply = ask(shortcut.switched_off)
    except LearnerFailure as failure:
        if failure.type == RouteSwitchedOff.__name__:
            raise _called_route(shortcut, what, failure.message) from None
        raise
    caught = [reply.get("raised"), *(step.get("raised") for step in reply.get("steps") or [])]
    for raised in caught:
        if raised and raised[0] == RouteSwitchedOff.__name__:
            raise _called_route(shortcut, what, raised[1])
    return reply


def _called_route(shortcut: Shortcut, what: str, message: str) -> CheckFailed:
    return CheckFailed(f"{what} {refused_call(message, f'this check switches off: {shortcut.why}')}", "banned-api")


def expect_work_recorded(ops: Sequence[str], shortcut: Shortcut, right: bool, what: str) -> None:
    """Fail unless the answer, given with ``shortcut``'s route switched off, is ``right``; fail when the
    recorder saw the shortcut, or saw none of the work behind a right answer."""
    used = sorted(set(ops) & shortcut.recorded)
    if used:
        raise CheckFailed(f"{what} reaches torch's own {', '.join(used)}: {shortcut.why}", "banned-api")
    seen = set(ops) if shortcut.work is None else set(ops) & shortcut.work
    if right and not seen:
        raise CheckFailed(
            f"{what} gave the right answer, but the grader could not see the operations it runs (it "
            f"saw no {shortcut.work_in_words}). Switching off PyTorch's function or dispatch modes is "
            "not allowed; compute with PyTorch's own operations on the tensors",
            "recorder-tampered",
        )
    if not right:
        raise CheckFailed(
            f"{what} gave no right answer here, with {shortcut.switched_off_in_words} switched off: this check "
            "credits a right answer computed by hand",
            "results-first",
        )


def expect_attention_by_hand(
    learner: LearnerWorkers,
    sources: dict[int, bytes | None],
    reference: Implementation,
    stage: int,
    cls: str,
    args: list,
    x: torch.Tensor,
) -> dict:
    """The shortcut check of an attention module: its forward, recorded, with the reference's weights.

    Returns the worker's reply, for what else the check asks of the module.
    """
    expect_not_spelled(sources, stage, cls, ATTENTION_BY_HAND)
    state = parameters_only(reference_state(reference.name(cls), args, SHORTCUT_SEED))
    reply = switched_off_reply(
        ATTENTION_BY_HAND,
        f"{cls}.forward",
        lambda off: build(learner, stage, cls, args, state=state, inputs=[x], record=True, switched_off=off),
    )
    right = not reply["rejected"] and agrees(reply["outputs"][0], reference_output(reference.name(cls), args, state, x))
    expect_work_recorded(reply["ops"], ATTENTION_BY_HAND, right, f"{cls}.forward")
    return reply


def _listed(uses: list[Use]) -> str:
    """Each name once, where it first stands: `_getframe (line 12, in softmax_naive)`."""
    first: dict[str, Use] = {}
    for use in uses:
        first.setdefault(use.name, use)
    shown = [
        f"{use.name} (line {use.line}, {'at ' if use.where == MODULE_LEVEL else 'in '}{use.where})"
        for use in list(first.values())[:SHOWN_AT_MOST]
    ]
    more = len(first) - SHOWN_AT_MOST
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")
