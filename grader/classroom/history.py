"""OUT/.grader/history/<student>/: every report a student was ever given by a batch, and which one the gradebook keeps.

A resubmission replaces OUT/students/<student>.json, never the history: each complete grading is added as the next
file (001.json, 002.json, ...). course.toml's [gradebook] keep (grader.core.course.gradebook_keeps) decides
what grades.csv shows: "latest" (the default) the latest report; "best" the one whose final grade is highest,
as grader/classroom/record.py weighs every grading (the latest of equals).
"""

import datetime as dt
from pathlib import Path

from grader.classroom.out_folder import state_file
from grader.core import report as report_model
from grader.core.output_files import write_atomic
from grader.core.report import Report
from grader.intake.students import Student

HISTORY = "history"


def keep_in_history(out: Path, student: Student, report: Report) -> None:
    """Add ``report``, a complete grading, as ``student``'s next history file."""
    if not report["complete"]:
        return  # the grader's failure, graded again next run: no grade of the student's
    folder = state_file(out, HISTORY) / student.id
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / f"{len(list(folder.glob('*.json'))) + 1:03d}.json", report_model.to_json(report))


def history(out: Path, student: Student) -> list[tuple[Path, Report | None]]:
    """``student``'s history files in the order they were graded, each with its report (None where the file
    cannot be read as one: the caller names it, never skips it unsaid)."""
    paths = sorted((state_file(out, HISTORY) / student.id).glob("*.json"))
    return [(path, report_model.read(path)) for path in paths]


def submitted_at(report: Report) -> dt.datetime | None:
    """When the work graded in ``report`` was handed in, as its late object recorded it."""
    submitted = (report.get("late") or {}).get("submitted")
    return dt.datetime.fromisoformat(submitted) if submitted else None
