"""A function that calls what it should build, or hides what it runs, earns nothing for it: a shortcut
check's verdict voids every check of its target."""

from grader.core.points import rounded
from grader.core.report import CheckResult, Status

# Why a shortcut check's verdict voids every check of its target, by the hint it carries.
VOIDED_BECAUSE = {
    "banned-api": "no credit: {target} calls PyTorch's own version of what it is meant to compute",
    "recorder-tampered": "no credit: the grader could not see the operations {target} runs; switching off "
    "PyTorch's function or dispatch modes, or reaching into the grader, is not allowed",
}


def void_shortcut_targets(checks: list[CheckResult]) -> None:
    """A function that calls what it should build, or hides what it runs, earns nothing for it, in any check.

    A visible check voided by what the code did with a hidden input keeps the verdict its own inputs
    earned as ``visible_verdict``: students read visible checks before hidden results are published
    (Gradescope), and a score that moved there would tell them what the hidden input held, since the
    code can choose whether to take the shortcut by it. What the source shows voids them outright."""
    voided = {
        c.target: (c.hint, c.from_source) for c in checks if c.id.startswith("shortcut.") and c.hint in VOIDED_BECAUSE
    }
    for c in checks:
        if c.target not in voided or not c.score:
            continue
        hint, from_source = voided[c.target]
        if c.visibility == "visible" and not from_source:
            c.visible_verdict = {"status": c.status, "score": rounded(c.score), "message": c.message, "hint": c.hint}
        c.score, c.status, c.hint = 0, Status.FAILED, hint
        c.message = VOIDED_BECAUSE[hint].format(target=c.target)
