"""A points change without running anyone's code again: the verdicts a report stores, priced anew.

A check's verdict (its status, message, hint, evidence) does not depend on its points, with one exception:
a check worth nothing is never voided (grader.judge.voiding), so where a check goes from worth nothing to
worth something, or back, a regrade could judge it otherwise, and the student is graded again. Otherwise the
re-priced report is the one a regrade with the new points would write.
"""

from pathlib import Path

from grader.classroom.fingerprint import CHANGED
from grader.classroom.outputs import saved_report, write_feedback, write_report
from grader.core.points import Points, rounded
from grader.core.report import CheckReport, CheckResult, Report, StageReport, Status, check_report, totals
from grader.intake.students import Student
from grader.judge.voiding import void_shortcut_targets, void_without_results


def reprice_class(
    students: list[Student], out: Path, current: dict[str, dict], points: Points, changes: set[str] | None = None
) -> list[str]:
    """Re-price the reports of ``students`` that differ from their ``current`` fingerprint in the points
    alone, where re-pricing gives what a regrade would; the ids of those re-priced (now current). ``changes``
    gathers each price that moved, a line each ("stage3 note.in_place: 0 -> 2"), whatever moved it (a points
    file, the course's note prices)."""
    done = []
    for student in students:
        report = saved_report(out, student)[0]
        if not report or report.get("complete") is not True:
            continue
        saved = report.get("fingerprint") or {}
        if saved.get("points") == current[student.id]["points"]:
            continue
        if any(saved.get(part) != current[student.id][part] for part in CHANGED if part != "points"):
            continue
        new = repriced(report, points, current[student.id]["points"])
        if new is not None and changes is not None:
            changes.update(_moved(report, new))
        if new is not None:
            write_feedback(out, student, new)
            write_report(out, student, new)
            done.append(student.id)
    return done


def _moved(before: Report, after: Report) -> set[str]:
    """Each check whose price differs between two pricings of one report, as "stage3 note.in_place: 0 -> 2"."""
    was = {(stage["id"], c["id"]): c["max_score"] for stage in before["stages"] for c in stage["checks"]}
    return {
        f"{stage['id']} {c['id']}: {was[(stage['id'], c['id'])]:g} -> {c['max_score']:g}"
        for stage in after["stages"]
        for c in stage["checks"]
        if (stage["id"], c["id"]) in was and was[(stage["id"], c["id"])] != c["max_score"]
    }


def repriced(report: Report, points: Points, points_fingerprint: str) -> Report | None:
    """``report`` with every check, stage and total priced by ``points`` (and its fingerprint's points part
    ``points_fingerprint``); None where only a regrade can say what the new points give.

    A report that keeps what voiding rests on (each check's target, whether a failed result had some cases right,
    and its own verdict where voiding replaced it) is voided again by the judge's own rules (grader.judge.voiding)
    under the new prices, so a check that goes from free to priced, or back, is judged as a regrade would; an older
    report is re-priced only where no price crosses zero."""
    try:
        if all("target" in c and "some_right" in c for stage in report["stages"] for c in stage["checks"]):
            stages = [_voided_again(stage, points) for stage in report["stages"]]
        else:
            stages = [_priced(stage, points) for stage in report["stages"]]
    except _NeedsRegrade:
        return None
    score, max_score = totals(stages, report.get("extra_credit"))
    return {
        **report,
        "stages": stages,
        "score": score,
        "max_score": max_score,
        "fingerprint": {**report["fingerprint"], "points": points_fingerprint},
    }


class _NeedsRegrade(Exception):
    """A check the new table does not price, or a crossing of zero an older report cannot re-void."""


def _worth(points: Points, number: int, check: CheckReport) -> float:
    try:
        return points.of(number, check["id"])
    except KeyError:
        raise _NeedsRegrade from None


def _voided_again(stage: StageReport, points: Points) -> StageReport:
    """``stage`` from its checks' own verdicts, priced by ``points`` and voided by the judge's rules."""
    number = int(stage["id"].removeprefix("stage"))
    results = []
    for check in stage["checks"]:
        own = check.get("own") or check
        worth = _worth(points, number, check)
        results.append(
            CheckResult(
                stage=number,
                id=check["id"],
                visibility=check["visibility"],
                target=check["target"],
                status=Status(own["status"]),
                score=worth if own["status"] == Status.PASSED else 0,
                max_score=worth,
                message=own["message"],
                hint=own["hint"],
                evidence=own["evidence"],
                printed=check["printed"],
                warned=check.get("warned", ""),
                from_source=check.get("from_source", False),
                some_right=check["some_right"],
            )
        )
    void_shortcut_targets(results)
    void_without_results(results)
    checks = [check_report(r) for r in results]
    return {
        **stage,
        "checks": checks,
        "score": rounded(sum(c["score"] for c in checks)),
        "max_score": rounded(sum(c["max_score"] for c in checks)),
    }


def _priced(stage: StageReport, points: Points) -> StageReport:
    """``stage`` with each check's stored verdict priced by ``points``: a report that does not keep what voiding
    rests on, re-priced only where no price crosses zero."""
    number = int(stage["id"].removeprefix("stage"))
    checks: list[CheckReport] = []
    for check in stage["checks"]:
        worth = _worth(points, number, check)
        if (worth == 0) != (check["max_score"] == 0):
            raise _NeedsRegrade
        earned = worth if check["status"] == Status.PASSED else 0
        priced: CheckReport = {**check, "max_score": rounded(worth), "score": rounded(earned)}
        if "visible_verdict" in check:
            verdict = check["visible_verdict"]
            priced["visible_verdict"] = {
                **verdict,
                "score": rounded(worth if verdict["status"] == Status.PASSED else 0),
            }
        checks.append(priced)
    scored, possible = sum(c["score"] for c in checks), sum(c["max_score"] for c in checks)
    return {**stage, "checks": checks, "score": rounded(scored), "max_score": rounded(possible)}
