"""OUT/<student>.json and OUT/<student>.txt: each student's report and the feedback they read, each written
whole or not at all, and read back through the report model."""

import unicodedata
from pathlib import Path

from grader.classroom.class_record import CLASS_RECORD
from grader.classroom.history import HISTORY
from grader.classroom.names import NAMES_FILE, with_name
from grader.classroom.overrides import OVERRIDES_FILE, SEEN_FILE
from grader.classroom.similarity import CSV_NAME, REPORT_NAME
from grader.core import report as report_model
from grader.core.output_files import write_atomic
from grader.core.report import Report
from grader.intake.students import Student

GRADEBOOK = "grades.csv"
CLASS_PAGE = "class-report.html"
# What a student's files are called in OUT: <id>.json (the report), <id>.txt (their feedback), <id>.html.
STUDENT_SUFFIXES = (".json", ".txt", ".html")
# The grader's own entries in OUT, beside the students' files: its state and the class's outputs.
GRADER_FILES = (
    GRADEBOOK,
    CLASS_RECORD,
    OVERRIDES_FILE,
    SEEN_FILE,
    NAMES_FILE,
    CSV_NAME,
    REPORT_NAME,
    CLASS_PAGE,
    HISTORY,
)


def _spelled(name: str) -> str:
    """``name`` as a file system may take it: case ignored (macOS, Windows), compatibility forms folded."""
    return unicodedata.normalize("NFKC", name).casefold()


def grader_file_of(student: Student) -> str | None:
    """The file of the grader's own that a file of ``student`` would be (an id such as overrides-seen writes
    OUT/overrides-seen.json, where the grader remembers the overrides), or None."""
    theirs = {_spelled(student.id + suffix) for suffix in ("", *STUDENT_SUFFIXES)}
    return next((name for name in GRADER_FILES if _spelled(name) in theirs), None)


def without_reserved_ids(students: list[Student]) -> tuple[list[Student], list[tuple[str, str]]]:
    """``students`` less those whose id spells a file of the grader's own, and each of those with why: their
    reports would overwrite grader state, so they are refused, never graded under another id."""
    kept, refused = [], []
    for student in students:
        if (taken := grader_file_of(student)) is not None:
            refused.append(
                (student.id, f"its files would overwrite OUT/{taken}, the grader's own: rename its entry to grade it")
            )
        else:
            kept.append(student)
    return kept, refused


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
