"""A student of a class download: their id (safe as a file name, one spelling per id), where their work is,
and what the LMS says of when it came; and the entries of a download folder a layout may take."""

import hashlib
import os
import re
import stat
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from grader.intake.submission import Source, is_litter
from grader.runner.escaping import printable

# An id names files (OUT/.<id>.json.partial and the like): bounded well under the 255 bytes a file name may take.
MAX_ID_BYTES = 100


# The tail of an id that is not its entry's name as it stands: a hash of that name keeps ids apart.
HASHED_ID_TAIL = re.compile(r"~[0-9a-f]{8}$")
UNSAFE_IN_FILE_NAMES = re.compile(r"[/\0]")  # a path separator, or the end of a C string


@dataclass(frozen=True)
class Student:
    id: str
    source: Source  # a folder, a .zip, or the parts the LMS stored apart (a tuple of SubmittedPart)
    submitted: datetime | None = None  # when the LMS says the work was handed in (timezone-aware), if it says
    late_marked: bool = False  # the LMS itself marked the work late (Canvas's LATE in its file names)
    time_unread: str | None = None  # why a time the download holds could not be read (one line), if it could not
    conflict: str | None = None  # why this id's work cannot be told apart from another's: then none of it is graded
    name: str | None = None  # the display name the download gives (Canvas, Moodle, Gradescope), one printable line


def student_id(name: str) -> str:
    """The id of the student whose entry is ``name``: people read it in the gradebook, the reports and
    their file names, so it is printable and short enough for a file name (a student's file names are
    the id and a suffix; entries starting with a dot are never students).

    A name that is already such an id is kept, in Unicode's composed form (canonical_id). Any other gets
    a hash of the name itself: two names that escape or shorten alike keep apart, and cannot take the
    id of a name kept as it is.
    """
    name = canonical_id(name)
    readable = printable(name, keep_newlines=False)
    # An id from an LMS's records (a Gradescope sid, an email, a name) can hold anything: only one
    # component of a path, never hidden, may name a student's files.
    # A leading ' is how grades.csv quotes an id a spreadsheet would run (core.output_files.inert): an id that
    # starts so itself would read there as another's ("'-ada" and "-ada").
    one_file_name = name and not UNSAFE_IN_FILE_NAMES.search(name) and not name.startswith((".", "'"))
    if one_file_name and readable == name and len(name.encode()) <= MAX_ID_BYTES and not HASHED_ID_TAIL.search(name):
        return name
    tail = "~" + hashlib.sha256(os.fsencode(name)).hexdigest()[:8]
    safe = UNSAFE_IN_FILE_NAMES.sub("_", readable).lstrip(".'")
    head = safe.encode()[: MAX_ID_BYTES - len(tail)].decode(errors="ignore")  # whole characters only
    return head + tail


def canonical_id(text: str) -> str:
    """``text`` in Unicode's composed form (NFC): macOS writes a folder's name decomposed (``e`` and
    U+0301 for ``é``), an LMS, a CSV and a keyboard composed; one id must be one spelling."""
    return unicodedata.normalize("NFC", text)


def entries_of(folder: Path, skipped: list[tuple[str, str]]) -> list[tuple[Path, bool]]:
    """The entries of ``folder`` a layout may take, each with whether it is a folder. Litter
    (grader.intake.submission.is_litter) and other names starting with a dot (hidden: no student's id) are
    skipped; a symbolic link is skipped, never followed: it could lead to another student's submission
    or to any file the grader can read."""
    kept = []
    for entry in sorted(folder.iterdir()):
        if is_litter(entry.name):
            skipped.append((entry.name, "left by a tool or an operating system, not a submission"))
            continue
        if entry.name.startswith("."):
            skipped.append((entry.name, "its name starts with a dot (hidden): rename it without the dot to grade it"))
            continue
        mode = entry.lstat().st_mode
        if stat.S_ISLNK(mode):
            skipped.append((entry.name, "a symbolic link, not followed"))
            continue
        kept.append((entry, stat.S_ISDIR(mode)))
    return kept


# A list of (student, the entry or entries that are their submission, for messages)
Found = list[tuple[Student, str]]


def suffix_of(path: Path) -> str:
    """The suffix of ``path`` in lower case: an LMS, Windows and macOS keep whatever case a student gave it."""
    return path.suffix.lower()


def read_text_bounded(path: Path, limit: int) -> str | None:
    """The text of ``path`` (never through a link), or None when it is over ``limit`` bytes. Bytes
    that are not UTF-8 are replaced."""
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as handle:
        data = handle.read(limit + 1)
    return data.decode("utf-8", errors="replace") if len(data) <= limit else None


def display_name(text: object) -> str | None:
    """A name as reports show it: one printable line, at most 100 characters; None for none."""
    name = printable(canonical_id(str(text)), keep_newlines=False).strip() if text is not None else ""
    return name[:100] or None
