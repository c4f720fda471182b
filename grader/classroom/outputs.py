"""OUT/<student>.json and OUT/<student>.txt: each student's report and the feedback they read, each written
whole or not at all, and read back through the report model."""

from pathlib import Path

from grader.classroom.names import with_name
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
    """The .txt the student reads: no hidden check's data (grader.views.feedback.student_view), headed by their
    id and, unless the class is graded anonymously, their name. Written only where it changed."""
    from grader.views.terminal import render_text

    header = with_name(student.id, student.name)
    text = render_text(report, header, color=False, student_facing=True, folder="") + "\n"  # an id is no folder
    path = out / f"{student.id}.txt"
    try:
        if path.read_text(encoding="utf-8") == text:
            return
    except (OSError, UnicodeDecodeError):
        pass
    write_atomic(path, text)


def write_report(out: Path, student: Student, report: Report) -> None:
    write_atomic(_report_path(out, student), report_model.to_json(report))
