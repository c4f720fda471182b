"""A stage that may hand its attention to the learner's own stage 6 function, never to torch's.

Stage 6's public function is called scaled_dot_product_attention, as torch's is. The judge's
reading of the stage file (grader.judge.source_scan) finds that name wherever the code spells it; here
each spelling is told apart by where the name comes from: the learner's own stage files (the
package `exercises`, imported by name, as a module, or relatively) or anywhere else
(torch.nn.functional). While a later stage is graded, stage 6 stands in as torch's own function
(grader.runner.standins), so the recorder sees torch's attention run for a learner who calls
their stage 6: it is excused exactly when the file's own spelling shows that call, which
gains nothing a call of stage 6 would not.
"""

import ast
from dataclasses import dataclass, replace
from typing import cast

import torch

from grader.judge.checks.shortcut import (
    ATTENTION_BY_HAND,
    SHORTCUT_SEED,
    Shortcut,
    expect_not_spelled,
    expect_work_recorded,
    switched_off_reply,
)
from grader.judge.checks.support import CheckFailed, build, parameters_only, reference_output, reference_state
from grader.judge.routes_off import ATTENTION_OFF_BUT_STAND_IN
from grader.judge.source_scan import Use, scan_source
from grader.judge.verdict import agrees
from grader.runner.implementation import SUBMISSION_PACKAGE, Implementation
from grader.runner.shortcuts import ATTENTION
from grader.sandbox.workers import LearnerWorkers

# Stage 6's name that torch's function bears too.
DELEGATED = frozenset({"scaled_dot_product_attention"})
# What the recorder sees when torch's scaled_dot_product_attention runs (the stage 6 stand-in).
SDPA_OPS = frozenset(op for op in ATTENTION if "scaled_dot_product" in op)
SHOWN_AT_MOST = 5


@dataclass(frozen=True)
class OwnSpellings:
    """Where a stage file takes names from the learner's own stage files: (name, line) pairs."""

    imported: frozenset[tuple[str, int]]  # from exercises.<stage> import name
    attributes: frozenset[tuple[str, int]]  # <a module of exercises>.name
    elsewhere: frozenset[tuple[str, int]]  # the same (name, line) spelt another way too: torch's, say
    star_from_own_only: bool  # `from exercises.<stage> import *`, and no other star import

    def excuses(self, use: Use) -> bool:
        """``use`` names the learner's own function, not torch's."""
        key = (use.name, use.line)
        if key in self.elsewhere:
            return False
        if use.how in ("import", "attribute"):
            return key in self.imported | self.attributes
        if use.how == "string":  # an import inside a function names what it takes in a string constant
            return key in self.imported
        if use.how == "global":  # a name no statement of the file binds: only a star import can have
            return self.star_from_own_only
        return False


def own_spellings(source: bytes | str) -> OwnSpellings:
    """Which spellings of ``source`` take a name from the learner's own stage files (SUBMISSION_PACKAGE)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return OwnSpellings(frozenset(), frozenset(), frozenset(), False)
    rebound = _rebound_names(tree)
    modules: dict[str, str] = {}  # a local name -> the module of the learner's it stands for
    imported: set[tuple[str, int]]
    attributes: set[tuple[str, int]]
    elsewhere: set[tuple[str, int]]
    stars: list[bool]
    imported, attributes, elsewhere, stars = set(), set(), set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            from_own = node.level > 0 or (node.module or "").split(".")[0] == SUBMISSION_PACKAGE
            for alias in node.names:
                if alias.name == "*":
                    stars.append(from_own)
                    continue
                (imported if from_own else elsewhere).add((alias.name, node.lineno))
                package_itself = node.module in (None, SUBMISSION_PACKAGE) if from_own else False
                if package_itself:  # from exercises import stage6_sdpa: a module of the learner's
                    modules[alias.asname or alias.name] = f"{SUBMISSION_PACKAGE}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == SUBMISSION_PACKAGE:
                    bound = alias.asname or SUBMISSION_PACKAGE
                    modules[bound] = alias.name if alias.asname else SUBMISSION_PACKAGE
    modules = {name: path for name, path in modules.items() if name not in rebound}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            from_own = _module_path(node.value, modules) is not None
            (attributes if from_own else elsewhere).add((node.attr, cast(int, node.end_lineno)))  # set by ast.parse
    return OwnSpellings(frozenset(imported), frozenset(attributes), frozenset(elsewhere), bool(stars) and all(stars))


def _module_path(node: ast.AST, modules: dict[str, str]) -> str | None:
    """The learner's module an expression stands for (`s6`, `exercises.stage6_sdpa`), else None."""
    if isinstance(node, ast.Name):
        return modules.get(node.id)
    if isinstance(node, ast.Attribute):
        parent = _module_path(node.value, modules)
        return None if parent is None else f"{parent}.{node.attr}"
    return None


def _rebound_names(tree: ast.Module) -> set[str]:
    """Names the file binds otherwise than by importing: such a name may stand for anything."""
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    names |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    names |= {
        a.arg
        for n in ast.walk(tree)
        if isinstance(n, ast.arguments)
        for a in [*n.posonlyargs, *n.args, *n.kwonlyargs, *filter(None, [n.vararg, n.kwarg])]
    }
    names |= {n.name for n in ast.walk(tree) if isinstance(n, ast.ExceptHandler) and n.name}
    names |= {name for n in ast.walk(tree) if isinstance(n, (ast.Global, ast.Nonlocal)) for name in n.names}
    return names


def expect_attention_by_hand_or_delegated(
    learner: LearnerWorkers,
    sources: dict[int, bytes | None],
    reference: Implementation,
    stage: int,
    cls: str,
    args: list,
    x: torch.Tensor,
) -> dict:
    """The shortcut check of an attention module that may call the learner's stage 6 function.

    As grader.judge.checks.shortcut.expect_attention_by_hand, except that scaled_dot_product_attention
    taken from the learner's own stage files is theirs: the recorder's sight of torch's attention
    is then the stage 6 stand-in at work. Returns the worker's reply.
    """
    shortcut = delegated_shortcut(sources, stage, cls)
    state = parameters_only(reference_state(reference.name(cls), args, SHORTCUT_SEED))
    reply = switched_off_reply(
        shortcut,
        f"{cls}.forward",
        lambda off: build(learner, stage, cls, args, state=state, inputs=[x], record=True, switched_off=off),
    )
    right = not reply["rejected"] and agrees(reply["outputs"][0], reference_output(reference.name(cls), args, state, x))
    expect_work_recorded(reply["ops"], shortcut, right, f"{cls}.forward")
    return reply


def delegated_shortcut(sources: dict[int, bytes | None], stage: int, cls: str) -> Shortcut:
    """ATTENTION_BY_HAND as it applies to ``cls``, whose file may call the learner's own stage 6 function:
    torch's attention spelled in the file earns nothing (CheckFailed, banned-api); the stage 6 function
    taken from the learner's files makes torch's attention ops, which its stand-in runs, count as work."""
    expect_not_spelled(sources, stage, cls, replace(ATTENTION_BY_HAND, spelled=ATTENTION_BY_HAND.spelled - DELEGATED))
    source = sources.get(stage)
    # Without the file the judge cannot tell whose attention ran: it claims nothing of it.
    delegates = True
    if source is not None:
        spelled = scan_source(source).uses_reached_from(cls, DELEGATED)
        mine = own_spellings(source)
        torch_uses = [use for use in spelled if not mine.excuses(use)]
        if torch_uses:
            shown = ", ".join(f"{use.name} (line {use.line}, in {use.where})" for use in torch_uses[:SHOWN_AT_MOST])
            raise CheckFailed(
                f"{cls} uses torch's own {shown}: the attention is yours to compute, by hand or with "
                "your stage 6 function (from exercises.stage6_sdpa import scaled_dot_product_attention)",
                "banned-api",
            )
        delegates = bool(spelled)
    shortcut = ATTENTION_BY_HAND
    if delegates:
        shortcut = replace(
            ATTENTION_BY_HAND,
            recorded=ATTENTION_BY_HAND.recorded - SDPA_OPS,
            work=cast(frozenset[str], ATTENTION_BY_HAND.work) | SDPA_OPS,  # a set of operations, not None
            work_in_words="softmax, exponential or call of your stage 6 function",
            switched_off=ATTENTION_OFF_BUT_STAND_IN,
            switched_off_in_words="torch's attention (but for your stage 6 function)",
        )
    return shortcut
