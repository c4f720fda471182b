"""A class folder, as it was downloaded, becomes a list of students: an id and where their work is.

Today one shape: every sub-folder or .zip of the folder is one student, named after it.
"""

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from grader.runner.text import printable

# An id names files (OUT/.<id>.json.partial and the like): bounded well under the 255 bytes a file name may take.
MAX_ID_BYTES = 100
# The tail of an id that is not its entry's name as it stands: a hash of that name keeps ids apart.
HASHED_ID_TAIL = re.compile(r"~[0-9a-f]{8}$")


@dataclass(frozen=True)
class Student:
    id: str
    source: Path  # a folder or a .zip
    submitted: datetime | None = None  # when the LMS says the work was handed in (timezone-aware), if it says


def list_students(folder: Path) -> tuple[list[Student], list[tuple[str, str]]]:
    """The students of ``folder`` by id, in a fixed order; and the names that are not submissions, with why."""
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder")
    students: dict[str, Student] = {}
    skipped = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        mode = entry.lstat().st_mode
        if stat.S_ISLNK(mode):  # never followed: it could lead to another student's work, or to any file
            skipped.append((entry.name, "a symbolic link, not followed"))
            continue
        if stat.S_ISDIR(mode):
            student = Student(student_id(entry.name), entry)
        elif entry.suffix == ".zip":  # one that is no zip gets a report saying why
            student = Student(student_id(entry.stem), entry)
        else:
            skipped.append((entry.name, "neither a folder nor a .zip"))
            continue
        if student.id in students:
            first, second = (printable(e.name, keep_newlines=False) for e in (students[student.id].source, entry))
            raise ValueError(f"two submissions for {student.id}: {first} and {second}")
        students[student.id] = student
    return sorted(students.values(), key=lambda s: s.id), skipped


def student_id(name: str) -> str:
    """The id of the student whose entry is ``name``: people read it in the gradebook, the reports and
    their file names, so it is printable and short enough for a file name (a student's file names are
    the id and a suffix; entries starting with a dot are never students).

    A name that is already such an id is kept. Any other gets a hash of the name itself: two names
    that escape or shorten alike keep apart, and cannot take the id of a name kept as it is.
    """
    readable = printable(name, keep_newlines=False)
    if readable == name and len(name.encode()) <= MAX_ID_BYTES and not HASHED_ID_TAIL.search(name):
        return name
    tail = "~" + hashlib.sha256(os.fsencode(name)).hexdigest()[:8]
    head = readable.encode()[:MAX_ID_BYTES - len(tail)].decode(errors="ignore")  # whole characters only
    return head + tail


