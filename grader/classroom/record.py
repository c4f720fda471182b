"""The grade of record: a student's final grade and how it was reached, computed here and nowhere else.

grades.csv's row, the feedback the student reads (OUT/students/<id>.txt, which the LMS comments and feedback zips
carry), and the class report render what ``grade_of_record`` returns. It weighs every grading the course's
``keep`` rule compares (the latest alone, or every grading in the student's history, each priced by the
points in force), each with the overrides and the late penalty of its own submission time, by one rule:
``final_grade``. A grading that cannot be compared is left out by name, never silently.
"""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from grader.classroom.history import history, submitted_at
from grader.classroom.overrides import TOTAL, Override, applied, overridden_stages
from grader.classroom.repricing import repriced
from grader.core.late_policy import LatePolicy, late_record
from grader.core.points import Points, rounded
from grader.core.report import Report, StageReport, retotalled, totals
from grader.intake.students import Student

# The flag of a row whose "best" left a grading out, with the gradings and why.
LEFT_OUT = "left-out"


@dataclass(frozen=True)
class Weighed:
    """One grading as the record weighs it: priced by the points in force, with its overrides and its late
    penalty applied, and the final grade they give."""

    report: Report
    place: int  # 1 = the first graded
    records: list[dict]  # the overrides as applied to it (grader.classroom.overrides.applied)
    late: dict
    final: float
    late_of: Callable[[list[dict]], dict]  # its late penalty, for stages as overridden


def final_grade(report: Report, records: list[dict], late: dict) -> float:
    """The final grade of ``report``: a total set by hand, else its stages (those set by hand as set) less
    the late penalty, never below 0."""
    by_hand = {r["stage"]: r for r in records}
    if TOTAL in by_hand:
        return by_hand[TOTAL]["points"]
    scored, _ = totals(cast(list[StageReport], overridden_stages(dict(report), records)), report.get("extra_credit"))
    return rounded(max(0, scored - late["penalty_points"]))


def weigh(
    report: Report, place: int, overrides: list[Override], seen: dict, late_of: Callable[[list[dict]], dict]
) -> Weighed:
    """``report`` with ``overrides`` applied (``seen`` records the automatic score each replaces) and the late
    penalty ``late_of`` gives its stages as overridden."""
    records = applied(overrides, dict(report), seen)
    late = late_of(overridden_stages(dict(report), records))
    return Weighed(report, place, records, late, final_grade(report, records, late), late_of)


def late_of_current(policy: LatePolicy, student: Student, report: Report) -> Callable[[list[dict]], dict]:
    """The late penalty of the current grading: the student's submission time as this run reads it."""
    return lambda stages: late_record(
        policy,
        student.submitted,
        student.late_marked,
        stages or list(map(dict, report["stages"])),
        student.time_unread,
        student.id,
    )


def late_of_earlier(policy: LatePolicy, student: Student, report: Report) -> Callable[[list[dict]], dict]:
    """The late penalty of an earlier grading: the submission time its own report recorded."""
    return lambda stages: late_record(policy, submitted_at(report), False, stages, student=student.id)


@dataclass(frozen=True)
class GradeOfRecord:
    kept: Weighed
    latest: Weighed  # the current grading, weighed with the overrides it has now
    gradings: int  # how many the student has had
    rule: str  # the course's keep rule
    left_out: list[str]  # "grading 2 (why)" for each earlier grading "best" could not compare

    @property
    def kept_words(self) -> str:
        """grades.csv's ``kept`` cell."""
        if self.rule != "best":
            return "latest"
        latest = " (the latest)" if self.kept.place == self.latest.place else ""
        return f"best of {self.gradings}: grading {self.kept.place}{latest}"

    def as_dict(self) -> dict:
        """The record as a report carries it (``record``): what every output renders."""
        return {
            "final": self.kept.final,
            "max_score": self.kept.report["max_score"],
            "automatic": self.kept.report["score"],
            "kept": self.kept_words,
            "place": self.kept.place,
            "gradings": self.gradings,
            "latest_final": self.latest.final,
            "overrides": self.kept.records,
            "late": self.kept.late,
            "left_out": self.left_out,
        }


def grade_of_record(
    out: Path,
    student: Student,
    current: Report,
    policy: LatePolicy,
    keep: str,
    priced: tuple[Points, str],
    overrides: list[Override],
    seen: dict,
) -> GradeOfRecord:
    """``student``'s grade of record, whose current report is ``current``. ``priced``: the points in force and
    their fingerprint, which every earlier grading is priced by before it is compared. ``seen`` (the automatic
    score each override replaced when first applied) is filled for the kept grading alone."""
    graded = history(out, student) if keep == "best" else []
    earlier = graded[:-1] if graded else []  # the last history file is the current grading
    place = len(earlier) + 1
    latest = weigh(current, place, overrides, dict(seen), late_of_current(policy, student, current))
    candidates, left_out = [latest], []
    for number, (path, grading) in enumerate(earlier, start=1):
        if grading is None:
            left_out.append(f"grading {number} ({path.parent.name}/{path.name} cannot be read as a report)")
            continue
        comparable, why = _comparable(grading, current, *priced)
        if comparable is None:
            left_out.append(f"grading {number} ({why})")
            continue
        candidates.append(weigh(comparable, number, overrides, dict(seen), late_of_earlier(policy, student, grading)))
    best = max(candidates, key=lambda w: (w.final, w.place))  # the latest of equals
    kept = weigh(best.report, best.place, overrides, seen, best.late_of)  # the one whose overrides are recorded
    latest = kept if best is latest else latest
    return GradeOfRecord(kept, latest, len(earlier) + 1, keep, left_out)


def _comparable(grading: Report, current: Report, points: Points, fingerprint: str) -> tuple[Report | None, str]:
    """``grading`` priced by ``points`` (fingerprint ``fingerprint``), if it can stand beside ``current``:
    the same stages graded, and prices that re-pricing can apply; else None and why."""
    if [s["id"] for s in grading["stages"]] != [s["id"] for s in current["stages"]]:
        return None, "other stages were graded"
    if grading.get("extra_credit") != current.get("extra_credit"):  # the bonus counted as the course counts it now
        grading = retotalled(grading, current.get("extra_credit"))
    if (grading.get("fingerprint") or {}).get("points") == fingerprint:
        return grading, ""
    if not grading.get("fingerprint"):
        return None, "no fingerprint"
    again = repriced(grading, points, fingerprint)
    return (again, "") if again is not None else (None, "written before re-pricing could cross a price of zero")


def feedback_report(kept: Weighed, record: dict) -> Report:
    """The report the student's feedback renders: the kept grading, with its overrides, its late penalty and
    the record, whose final grade opens the feedback."""
    shown: Report = {**kept.report, "late": kept.late, "record": record}
    shown.pop("overrides", None)
    if kept.records:
        shown["overrides"] = kept.records
    return shown
