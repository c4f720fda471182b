"""OUT/<student>.json and OUT/<student>.txt: each student's report and the feedback they read, each written
whole or not at all, and read back through the report model."""

from pathlib import Path

from grader.core import report as report_model
from grader.core.output_files import write_atomic
from grader.core.report import Report
from grader.intake.students import Student


def _report_path(out: Path, student: Student) -> Path:
    return out / f"{student.id}.json"


def saved_report(out: Path, student: Student) -> tuple[Report | None, bool]:
    """The report written for ``student`` (None if there is none that can be read), and whether its file exists."""
    path = _report_path(out, student)
    return report_model.read(path), path.exists()


def write_feedback(out: Path, student: Student, report: Report) -> None:
    """The .txt the student reads: no hidden check's data (grader.views.feedback.student_view)."""
    from grader.views.terminal import render_text

    text = render_text(report, student.id, color=False, student_facing=True, folder="")  # an id is no folder of theirs
    write_atomic(out / f"{student.id}.txt", text + "\n")


def write_report(out: Path, student: Student, report: Report) -> None:
    write_atomic(_report_path(out, student), report_model.to_json(report))
