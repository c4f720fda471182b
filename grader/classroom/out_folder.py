"""Where a batch writes in OUT: each student's files in OUT/students/ (<id>.json, <id>.txt), the grader's own
state in OUT/.grader/ (class.toml, overrides-seen.json, names.csv, history/), and the class's outputs at the top
(grades.csv, class-report.html, similarity.html, and the instructor's overrides.csv). An id names files in
OUT/students/ alone, and no id starts with a dot (grader.intake.students.student_id): no id can name the grader's
state or the class's outputs, whatever it spells."""

from pathlib import Path

STUDENTS = "students"
STATE = ".grader"


def student_file(out: Path, student_id: str, suffix: str) -> Path:
    """The file of ``student_id`` with ``suffix`` (".json": the report, ".txt": the feedback they read)."""
    return out / STUDENTS / f"{student_id}{suffix}"


def state_file(out: Path, name: str) -> Path:
    """The grader's own file (or folder) ``name`` in ``out``."""
    return out / STATE / name


def written(path: Path) -> Path:
    """``path``, its folder made: what a writer of a student's or the grader's file writes to."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return path
