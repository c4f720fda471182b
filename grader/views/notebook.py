"""What a test cell of the nbgrader course prints (grader/notebook.py): a line per check, and the words
nbgrader-reconcile reads back from a graded notebook as evidence."""

from grader.core.hints import explain
from grader.core.report import CheckReport, Status
from grader.runner.escaping import printable

# What the test cells print, which nbgrader-reconcile reads back from a graded notebook as evidence
HIDDEN_LATER = "The hidden checks run when your notebook is graded."
SUMMARY = "{kind} checks of stage {stage}: "  # then earned/possible
NOT_BESIDE = "{name} is not in {folder}: run the answer cell"  # then how


def verdict_line(c: CheckReport, stage: int, hidden: bool) -> str:
    mark = "✓" if c["status"] == Status.PASSED else "✗"
    line = f"{mark} {c['id']}: {c['score']:g}/{c['max_score']:g}"
    if c["status"] == Status.PASSED:
        return line
    # The student view withholds a hidden check's message: only the catalog speaks for it.
    detail = [] if hidden else [f"    {printable(text, keep_newlines=False)}" for text in c["message"].split("\n")]
    if c["hint"]:
        detail.append(f"    hint [{c['hint']}]: {explain(c['hint'], stage)}")
    elif hidden:
        detail.append(f"    {c['status'].replace('_', ' ')}")
    return "\n".join([line, *detail])


NOT_YET = "✗ not implemented yet: {name} ({checks}: 0/{worth:g})"  # a line per function a stub leaves


def verdict_lines(checks: list[CheckReport], stage: int, hidden: bool) -> list[str]:
    """A line per check, except that a function still a stub gets one line for all its checks, and the
    not-implemented hint is said once, not once per check."""
    lines: list[str] = []
    waiting: dict[str, list[CheckReport]] = {}
    for c in checks:
        if c["status"] == Status.NOT_IMPLEMENTED:
            waiting.setdefault(c.get("target") or f"stage {stage}'s code", []).append(c)
        else:
            lines.append(verdict_line(c, stage, hidden))
    for name, same in waiting.items():
        ids = ", ".join(c["id"] for c in same)
        lines.append(NOT_YET.format(name=name, checks=ids, worth=sum(c["max_score"] for c in same)))
    if waiting:
        lines.append(f"    hint [not-implemented]: {explain('not-implemented', stage)}")
    return lines
