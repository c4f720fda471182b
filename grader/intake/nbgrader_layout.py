"""nbgrader's submitted/ or autograded/: <student id>/<assignment>/ (or the assignment's files right in the
student's folder), with the time nbgrader recorded in timestamp.txt."""

import itertools
import os
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath

from grader.intake.students import Found, Student, entries_of, read_text_bounded, student_id, suffix_of
from grader.intake.submission import STAGE_FILES
from grader.intake.times import not_a_time, parse_time
from grader.runner.escaping import printable

NBGRADER_STEPS = ("submitted", "autograded")
NBGRADER_TIMESTAMP = "timestamp.txt"
NBGRADER_PROBED = 64  # entries of a folder looked at to tell an nbgrader student's folder
MAX_TIMESTAMP_BYTES = 4096


# The names an nbgrader assignment folder holding this course's work has (in lower case)
STAGE_NOTEBOOK_NAMES = frozenset(
    f"{PurePosixPath(name).stem}{suffix}" for name in STAGE_FILES for suffix in (".ipynb", ".py")
)


def list_nbgrader(folder: Path, skipped: list[tuple[str, str]]) -> Found:
    found = []
    for entry, is_folder in entries_of(folder, skipped):
        work = _nbgrader_assignment(entry) if is_folder else "not a student's folder"
        if isinstance(work, str):
            skipped.append((entry.name, work))
            continue
        submitted, unread = _nbgrader_time(work, work.relative_to(folder).as_posix())
        found.append((Student(student_id(entry.name), work, submitted, time_unread=unread), entry.name))
    return found


def _nbgrader_assignment(student: Path) -> Path | str:
    """The folder of ``student``'s work for this assignment, or why there is none to choose.

    The student's folder itself when it holds the notebooks or timestamp (pointed at the assignment
    level); else their one assignment folder; of several, the one holding a stage's notebook or file.
    """
    try:
        inside = entries_of(student, [])  # a link is listed, and not followed, when the work is staged
    except OSError:
        return student  # intake says why it cannot be listed
    if any(
        not is_folder and (entry.name == NBGRADER_TIMESTAMP or suffix_of(entry) == ".ipynb")
        for entry, is_folder in inside
    ):
        return student
    assignments = [entry for entry, is_folder in inside if is_folder]
    if len(assignments) < 2:
        return assignments[0] if assignments else student  # an empty folder is graded, and flagged
    ours = [folder for folder in assignments if _holds_stage_file(folder)]
    if len(ours) == 1:
        return ours[0]
    names = ", ".join(printable(folder.name, keep_newlines=False) for folder in assignments)
    return f"holds several assignments ({names}), and not exactly one with a stage's notebook"


def _holds_stage_file(folder: Path) -> bool:
    """``folder`` holds a stage's notebook or file (in any case: intake reads it so)."""
    try:
        return any(
            not is_folder and entry.name.lower() in STAGE_NOTEBOOK_NAMES for entry, is_folder in entries_of(folder, [])
        )
    except OSError:
        return False


def _nbgrader_time(work: Path, shown: str) -> tuple[datetime | None, str | None]:
    """When nbgrader says ``work`` (``shown`` in the class folder) was handed in, read as nbgrader reads
    its timestamp.txt: a time that names no zone, or one it cannot find, is UTC. Where there is a
    timestamp.txt that gives no time, None and why, naming the file and what it begins with."""
    try:
        stamp = read_text_bounded(work / NBGRADER_TIMESTAMP, MAX_TIMESTAMP_BYTES)
    except OSError:  # none, a link, a folder: no time rather than one from elsewhere
        return None, None
    where = printable(f"{shown}/{NBGRADER_TIMESTAMP}", keep_newlines=False)
    if stamp is None:
        return None, f"{where} is over {MAX_TIMESTAMP_BYTES} bytes, not a time"
    if not stamp.strip():
        return None, f"{where} is empty"
    if (submitted := parse_time(stamp, timezone.utc)) is None:
        return None, f"{where} is not a time: {not_a_time(stamp)}"
    return submitted, None


def holds_nbgrader_work(folder: Path) -> bool:
    """``folder`` looks like an nbgrader student's: a timestamp.txt in it or in a folder within."""
    try:
        with os.scandir(folder) as listing:
            return any(
                item.name == NBGRADER_TIMESTAMP
                or (item.is_dir(follow_symlinks=False) and os.path.isfile(Path(item.path, NBGRADER_TIMESTAMP)))
                for item in itertools.islice(listing, NBGRADER_PROBED)
            )
    except OSError:
        return False
