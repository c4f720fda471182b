"""A function that calls what it should build, or hides what it runs, earns nothing for it: a shortcut
check's verdict voids every check of its target."""

from grader.core.points import rounded
from grader.core.report import CheckResult, Status, VisibleVerdict

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
    # Any check whose calls reached a route its worker runs without says so as surely as the shortcut check;
    # the shortcut check's own verdict, from the source or the recorder, comes first.
    voided = {
        c.target: (c.hint, c.from_source)
        for c in sorted(checks, key=lambda c: c.id.startswith("shortcut."))
        if c.target is not None
        and c.hint in VOIDED_BECAUSE
        and (c.id.startswith("shortcut.") or c.hint == "banned-api")
    }
    for c in checks:
        if c.target not in voided or not c.score:
            continue
        hint, from_source = voided[c.target]
        keep_own(c)
        if c.visibility == "visible" and not from_source:
            c.visible_verdict = _as_seen(c)
        c.score, c.status, c.hint = 0, Status.FAILED, hint
        c.message = VOIDED_BECAUSE[hint].format(target=c.target)


# A check of these kinds judges how a function computes (its properties, its structure, no shortcut, the
# book's advice), never what: it earns points only beside a right result of the same function.
JUDGES_HOW = ("property", "structure", "shortcut", "note")
JUDGES_WHAT = ("document", "example", "random")
# The results no learner can know in advance: inputs drawn by the judge. The worked examples' values are
# printed in the book, so code can hold them as a table without computing anything.
UNFORESEEN = ("random",)
# What a module declares (its parameters, buffers, names), and what any input shows of it (its properties), a
# table of the book's values can pass too: a visible check of it earns its points in the record only beside a
# right result on the judge's own inputs.
DECLARED = ("structure", "property")
# The worked examples' inputs and values are published (the book, the visible checks): in the record, a right
# result on them earns its points only beside a right result on the judge's own inputs, so that a table of the
# printed values earns nothing. What students read of them (the release's provisional view) stays as it was.
PUBLISHED = ("document", "example")
TABLE_ONLY = (
    "no credit in the record: {target} is right on the published example and wrong on every input the grader drew "
    "({checks}); the example's values are printed, so its points count only beside a right result on inputs "
    "no one knows in advance"
)
NOTHING_RIGHT = (
    "no credit: {target} gives a wrong result in every check of its results ({checks}); a {kind} check "
    "earns points only for code whose results are right"
)


def void_without_results(checks: list[CheckResult]) -> None:
    """Code that computes nothing right earns nothing for how it computes it: a property, structure,
    shortcut or priced note check scores 0 when every result check it rests on failed. A check without a
    target rests on the stage's result checks. A hidden check rests on the results on the judge's own
    inputs (random), where the function has them, so that a table of the book's printed values earns no
    hidden point; a visible check rests on the visible results, since students read it before the hidden
    ones are published and what they read must not move with them. A visible structure check, which a
    table passes as well, rests on the judge's inputs too: voided there, it keeps what students read as its
    ``visible_verdict``; so do a visible property check and a worked example's own result check (document,
    example), whose inputs and values are published. A voided check names the result checks it rests on and
    repeats none of their maps: their own card shows them."""
    # the verdicts before any is voided; a result check with some of its cases right counts as a right result
    passed = {id(c) for c in checks if c.status == Status.PASSED or c.some_right}
    for check in checks:
        kind = check.id.split(".", 1)[0]
        if kind not in JUDGES_HOW + PUBLISHED or not check.score:
            continue
        own = [
            c
            for c in checks
            if c.id.split(".", 1)[0] in JUDGES_WHAT and (check.target is None or c.target == check.target)
        ]
        unforeseen = [c for c in own if c.id.split(".", 1)[0] in UNFORESEEN]
        if kind in PUBLISHED:
            if check.target is not None and unforeseen and not any(id(c) in passed for c in unforeseen):
                seen = _as_seen(check)
                _void(check, unforeseen, kind, TABLE_ONLY)
                check.visible_verdict = seen
            continue
        if check.visibility == "visible":
            results = [c for c in own if c.visibility == "visible"]
            if results and not any(id(c) in passed for c in results):
                _void(check, results, kind)
            elif kind in DECLARED and unforeseen and not any(id(c) in passed for c in unforeseen):
                # students saw it pass on the visible results; the record rests on the judge's inputs
                seen = _as_seen(check)
                _void(check, unforeseen, kind)
                check.visible_verdict = seen
        else:
            results = unforeseen or own
            if results and not any(id(c) in passed for c in results):
                _void(check, results, kind)


def _as_seen(check: CheckResult) -> VisibleVerdict:
    """``check``'s verdict as students read it before the hidden results are published."""
    return {"status": check.status, "score": rounded(check.score), "message": check.message, "hint": check.hint}


def _void(check: CheckResult, results: list[CheckResult], kind: str, why: str = NOTHING_RIGHT) -> None:
    keep_own(check)
    check.score, check.status, check.hint = 0, Status.FAILED, "results-first"
    check.message = why.format(
        target=check.target or "this stage's code", checks=", ".join(c.id for c in results), kind=kind
    )
    # no picture of its own: the message names the result checks, whose card shows what they got wrong


def keep_own(check: CheckResult) -> None:
    """Keep ``check``'s own verdict before voiding replaces it: re-pricing under other points starts from it."""
    if check.own is None:
        check.own = {"status": check.status, "message": check.message, "hint": check.hint, "evidence": check.evidence}
