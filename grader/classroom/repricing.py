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
from grader.core.report import Report, Status
from grader.intake.students import Student


def reprice_class(students: list[Student], out: Path, current: dict[str, dict], points: Points) -> list[str]:
    """Re-price the reports of ``students`` that differ from their ``current`` fingerprint in the points
    alone, where re-pricing gives what a regrade would; the ids of those re-priced (now current)."""
    done = []
    for student in students:
        report = saved_report(out, student)[0]
        saved = (report or {}).get("fingerprint") or {}
        if not report or report.get("complete") is not True or saved.get("points") == current[student.id]["points"]:
            continue
        if any(saved.get(part) != current[student.id][part] for part in CHANGED if part != "points"):
            continue
        new = repriced(report, points, current[student.id]["points"])
        if new is not None:
            write_feedback(out, student, new)
            write_report(out, student, new)
            done.append(student.id)
    return done


def repriced(report: Report, points: Points, points_fingerprint: str) -> Report | None:
    """``report`` with every check, stage and total priced by ``points`` (and its fingerprint's points part
    ``points_fingerprint``); None where only a regrade can say what the new points give."""
    stages = []
    for stage in report["stages"]:
        number = int(stage["id"].removeprefix("stage"))
        checks = []
        for check in stage["checks"]:
            try:
                worth = points.of(number, check["id"])
            except KeyError:
                return None
            if (worth == 0) != (check["max_score"] == 0):
                return None
            earned = worth if check["status"] == Status.PASSED else 0
            priced = {**check, "max_score": rounded(worth), "score": rounded(earned)}
            if "visible_verdict" in check:
                verdict = check["visible_verdict"]
                priced["visible_verdict"] = {
                    **verdict,
                    "score": rounded(worth if verdict["status"] == Status.PASSED else 0),
                }
            checks.append(priced)
        scored, possible = sum(c["score"] for c in checks), sum(c["max_score"] for c in checks)
        stages.append({**stage, "checks": checks, "score": rounded(scored), "max_score": rounded(possible)})
    return {
        **report,
        "stages": stages,
        "score": rounded(sum(s["score"] for s in stages)),
        "max_score": rounded(sum(s["max_score"] for s in stages)),
        "fingerprint": {**report["fingerprint"], "points": points_fingerprint},
    }
