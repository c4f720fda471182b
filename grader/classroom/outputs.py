"""OUT/students/<id>.json and OUT/students/<id>.txt: each student's report and the feedback they read, each written
whole or not at all, and read back through the report model; and an OUT written before those folders, moved into
them once (grader.classroom.out_folder)."""

import os
from pathlib import Path

from grader.classroom.class_record import CLASS_RECORD
from grader.classroom.history import HISTORY
from grader.classroom.names import NAMES_FILE, with_name
from grader.classroom.out_folder import STATE, STUDENTS, state_file, student_file, written
from grader.classroom.overrides import OVERRIDES_FILE, SEEN_FILE
from grader.classroom.similarity import CSV_NAME, REPORT_NAME
from grader.core import report as report_model
from grader.core.output_files import write_atomic
from grader.core.report import Report
from grader.intake.students import Student

GRADEBOOK = "grades.csv"
CLASS_PAGE = "class-report.html"


def _report_path(out: Path, student: Student) -> Path:
    return student_file(out, student.id, ".json")


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
    path = student_file(out, student.id, ".txt")
    try:
        if path.read_text(encoding="utf-8") == text:
            return
    except (OSError, UnicodeDecodeError):
        pass
    write_atomic(written(path), text)


def write_report(out: Path, student: Student, report: Report) -> None:
    write_atomic(written(_report_path(out, student)), report_model.to_json(report))


# The grader's state, in OUT/.grader/ since these folders; at OUT's top before them.
STATE_FILES = (CLASS_RECORD, SEEN_FILE, NAMES_FILE, HISTORY)
# The class's outputs, which stay at OUT's top: every other .json and .txt there was a student's.
CLASS_OUTPUTS = (GRADEBOOK, OVERRIDES_FILE, CSV_NAME, REPORT_NAME, CLASS_PAGE)


def migrate_layout(out: Path) -> list[str]:
    """Move an OUT written before OUT/students/ and OUT/.grader/ into them, once (its class.toml at the top says
    it is one; moved last, so that a move cut short is finished by the next run); what moved, in lines."""
    if not (out / CLASS_RECORD).is_file() or state_file(out, CLASS_RECORD).exists():
        return []
    moved = 0
    for entry in sorted(out.iterdir()):
        if entry.suffix in (".json", ".txt") and entry.is_file() and entry.name not in CLASS_OUTPUTS + STATE_FILES:
            if not entry.name.startswith("."):
                os.replace(entry, written(out / STUDENTS / entry.name))
                moved += 1
    for name in STATE_FILES:  # class.toml last
        if (out / name).exists() and name != CLASS_RECORD:
            os.replace(out / name, written(state_file(out, name)))
    os.replace(out / CLASS_RECORD, written(state_file(out, CLASS_RECORD)))
    return [f"{out}: moved {moved} students' files into {STUDENTS}/ and the grader's state into {STATE}/ (once)"]
