"""A class folder, exactly as it was downloaded, becomes a list of students: an id, where their work
is (grader/intake/staging.py reads it) and when the LMS says it was handed in.

Layouts (``--layout``; ``auto`` tells them apart by the names in the folder, in this order):
  gradescope  Gradescope's export: a folder (or .zip) per submission and ``submission_metadata.yml``;
              one student per submitter, id their ``:sid:`` (else email, else name), time ``:created_at:``
  nbgrader    nbgrader's ``submitted/`` or ``autograded/``: ``<student id>/<assignment>/`` (or the
              assignment's files right in ``<student id>/``), time from ``timestamp.txt``
  moodle      Moodle's "Download all submissions": ``<Full Name>_<id>_assignsubmission_<plugin>_/``
              folders, or the same prefix on each file; id the participant number
  canvas      Canvas's "Download Submissions": flat files ``<name>[_LATE]_<user id>_<number>_<file>`` (the
              name may be empty or left out)
              (anonymous grading: ``[LATE_]anon_<anonymous id>_<number>_<file>``); id the user id (or
              ``anon_<anonymous id>``), LATE kept as late_marked
  folders     each sub-folder or .zip is one student, named after it (``make submit`` zips, clones)

What a tool or an operating system leaves in a folder (``__MACOSX/``, ``.DS_Store``, ``Thumbs.db``:
grader.intake.staging.is_litter) is skipped in every layout and never decides which layout a folder is.
A folder holding nothing but one LMS download (the folder a double-click unzip makes around it) or an
nbgrader course's ``submitted/`` and ``autograded/`` is refused with the folder to give instead:
graded as it stands, a whole class would be one student.

Neither Canvas nor Moodle documents a submission time in its download (a file's time after
unzipping is whatever the LMS wrote into its zip), so their ``submitted`` is None rather than a
guess: only Canvas's LATE marker is kept.
"""

import hashlib
import itertools
import os
import re
import stat
import unicodedata
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone, tzinfo
from pathlib import Path, PurePosixPath
from zoneinfo import ZoneInfo

from grader.runner.escaping import printable
from grader.intake.staging import STAGE_FILES, Source, SubmittedPart, is_litter

LAYOUTS = ("auto", "folders", "canvas", "moodle", "gradescope", "nbgrader")
# An id names files (OUT/.<id>.json.partial and the like): bounded well under the 255 bytes a file name may take.
MAX_ID_BYTES = 100
# The tail of an id that is not its entry's name as it stands: a hash of that name keeps ids apart.
HASHED_ID_TAIL = re.compile(r"~[0-9a-f]{8}$")
UNSAFE_IN_FILE_NAMES = re.compile(r"[/\0]")  # a path separator, or the end of a C string

# Canvas: the "number" after the user id is Canvas's own (attachment or submission); a file
# uploaded again under a name already used gets -1, -2 before its extension.
# With anonymous grading, the name and user id give way to ``anon_<anonymous id>`` (LATE then comes first):
# [LATE_]anon_<anonymous id>_<number>_<file>, per canvas-lms lib/content_zipper.rb (get_filename).
# It joins [name, LATE, user id] with _ after taking every non-word character out of the name: a name
# with none left is empty (_101_…, _LATE_101_…), and older anonymous downloads leave it out (101_…, LATE_101_…).
# A leading LATE_ in capitals is the marker (Canvas writes names in lower case: late_101_… is a student named late).
_CANVAS_PREFIX = (r"(?:(?P<anon_late>(?i:late)_)?(?P<anon>anon_[0-9A-Za-z]+)"
                  r"|(?:(?P<bare_late>LATE)_|(?P<name>.*?)_(?:(?P<late>(?i:late))_)?|)(?P<user>\d+))")
# A file an attachment number follows is read with it where a reading has it (101_5001_x.py is user 101's
# attachment 5001, not user 5001's), else without (a text entry has none).
CANVAS_ATTACHMENT = re.compile(_CANVAS_PREFIX + r"_(?P<number>\d+)_(?P<file>.+)", re.DOTALL)
CANVAS_FILE = re.compile(_CANVAS_PREFIX + r"(?:_(?P<number>\d+))?_(?P<file>.+)", re.DOTALL)
CANVAS_COPY = re.compile(r"(?P<stem>.+)-(?P<copy>\d+)(?P<suffix>\.[^.]*)", re.DOTALL)
READ_SUFFIXES = {".py", ".ipynb", ".zip"}  # the files staging reads: their Canvas copy numbers are taken off
# The first prefix is the one Moodle wrote: a file's own name may hold another (saved from an earlier download).
MOODLE_ENTRY = re.compile(r"(?P<name>.*?)_(?P<id>\d+)_assignsubmission_(?P<plugin>[a-z0-9]+)_(?P<file>.*)", re.DOTALL)
GRADESCOPE_METADATA = "submission_metadata.yml"
MAX_METADATA_BYTES = 64 * 1024 * 1024
GRADESCOPE_ID_FIELDS = ("sid", "email", "name")  # a submitter's id: the first of these they have
NBGRADER_STEPS = ("submitted", "autograded")
NBGRADER_TIMESTAMP = "timestamp.txt"
NBGRADER_PROBED = 64  # entries of a folder looked at to tell an nbgrader student's folder
MAX_TIMESTAMP_BYTES = 4096
TIME_SHOWN = 40  # characters of a recorded time that is no time, shown in its flag
# The names an nbgrader assignment folder holding this course's work has (in lower case)
STAGE_NOTEBOOK_NAMES = frozenset(f"{PurePosixPath(name).stem}{suffix}" for name in STAGE_FILES
                                 for suffix in (".ipynb", ".py"))
TIME_TEXT = re.compile(r"(?P<date>\d{4}-\d{2}-\d{2})[Tt ](?P<clock>\d{2}:\d{2}(?::\d{2})?)(?:\.(?P<fraction>\d+))?"
                       r"\s*(?P<zone>\S*)")
OFFSET = re.compile(r"(?P<sign>[+-])(?P<hours>\d{2}):?(?P<minutes>\d{2})")
UTC_NAMES = {"Z", "UTC", "GMT"}


@dataclass(frozen=True)
class Student:
    id: str
    source: Source  # a folder, a .zip, or the parts the LMS stored apart (a tuple of SubmittedPart)
    submitted: datetime | None = None  # when the LMS says the work was handed in (timezone-aware), if it says
    late_marked: bool = False  # the LMS itself marked the work late (Canvas's LATE in its file names)
    time_unread: str | None = None  # why a time the download holds could not be read (one line), if it could not
    conflict: str | None = None  # why this id's work cannot be told apart from another's: then none of it is graded


def list_students(folder: Path, layout: str = "auto") -> tuple[list[Student], list[tuple[str, str]]]:
    """The students of ``folder`` by id, in a fixed order; and the names that are not submissions, with why.

    ValueError, in one line, when ``folder`` cannot be read as ``layout``. Two submissions that claim one
    id (a student in two Gradescope groups, a submitter id copied from another's) grade neither: the
    student is listed with ``conflict`` saying which, so that nobody's work is graded as another's and
    the rest of the class goes on.
    """
    if layout == "auto":
        layout = detect_layout(folder)
    elif not folder.is_dir():
        raise ValueError(f"{folder} is not a folder")
    skipped: list[tuple[str, str]] = []
    claims: dict[str, list[tuple[Student, str]]] = {}
    for student, entry in LISTERS[layout](folder, skipped):
        claims.setdefault(student.id, []).append((student, entry))
    students = []
    for id, claimed in sorted(claims.items()):
        student = claimed[0][0]
        if len(claimed) > 1:
            entries = " and ".join(printable(entry, keep_newlines=False) for _, entry in claimed)
            student = replace(student, conflict=f"{len(claimed)} submissions claim this id ({entries}): none is "
                                                "graded as this student's; fix the download and grade again")
        students.append(student)
    return students, skipped


def detect_layout(folder: Path) -> str:
    """The layout ``folder`` was downloaded in, from its names (see the module's docstring).

    ValueError, naming the folder to give, for a folder one level above a class: an nbgrader course
    (its ``submitted/``, ``autograded/``), or a folder holding only an LMS download.
    """
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder")
    entries = _entries(folder, [])
    if steps := [entry.name for entry, is_folder in entries if is_folder and entry.name in NBGRADER_STEPS]:
        raise ValueError(f"{folder} is an nbgrader course (it holds {'/ and '.join(steps)}/): give its submitted/ "
                         "or autograded/ folder")
    layout = _layout_of(folder, entries)
    if layout == "folders" and len(entries) == 1 and entries[0][1]:
        inner = entries[0][0]
        if (inner_layout := _layout_of(inner, _entries(inner, []))) != "folders":
            raise ValueError(f"{folder} holds only {inner.name}/, a {inner_layout} download: give {inner} "
                             "(graded as it stands, the whole class would be one student)")
    return layout


def _layout_of(folder: Path, entries: list[tuple[Path, bool]]) -> str:
    """The layout that ``entries``, the entries of ``folder``, name."""
    if any(entry.name == GRADESCOPE_METADATA for entry, _ in entries):
        return "gradescope"
    if folder.resolve().name in NBGRADER_STEPS or any(is_folder and _holds_nbgrader_work(entry)
                                                       for entry, is_folder in entries):
        return "nbgrader"
    if any(MOODLE_ENTRY.fullmatch(entry.name) for entry, _ in entries):
        return "moodle"
    canvas = [_canvas_match(entry.name) for entry, is_folder in entries if not is_folder]
    if entries and len(canvas) == len(entries) and any(match and match["number"] for match in canvas):
        return "canvas"
    return "folders"


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
    one_file_name = name and not UNSAFE_IN_FILE_NAMES.search(name) and not name.startswith(".")
    if one_file_name and readable == name and len(name.encode()) <= MAX_ID_BYTES and not HASHED_ID_TAIL.search(name):
        return name
    tail = "~" + hashlib.sha256(os.fsencode(name)).hexdigest()[:8]
    safe = UNSAFE_IN_FILE_NAMES.sub("_", readable).lstrip(".")
    head = safe.encode()[:MAX_ID_BYTES - len(tail)].decode(errors="ignore")  # whole characters only
    return head + tail


def canonical_id(text: str) -> str:
    """``text`` in Unicode's composed form (NFC): macOS writes a folder's name decomposed (``e`` and
    U+0301 for ``é``), an LMS, a CSV and a keyboard composed; one id must be one spelling."""
    return unicodedata.normalize("NFC", text)


def _entries(folder: Path, skipped: list[tuple[str, str]]) -> list[tuple[Path, bool]]:
    """The entries of ``folder`` a layout may take, each with whether it is a folder. Litter
    (grader.intake.staging.is_litter) and other names starting with a dot (hidden: no student's id) are
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


def _folders(folder: Path, skipped: list[tuple[str, str]]) -> Found:
    found = []
    for entry, is_folder in _entries(folder, skipped):
        if is_folder:
            found.append((Student(student_id(entry.name), entry), entry.name))
        elif _suffix(entry) == ".zip":  # one that is no zip gets a report saying why
            found.append((Student(student_id(entry.stem), entry), entry.name))
        else:
            skipped.append((entry.name, "neither a folder nor a .zip"))
    return found


def _canvas(folder: Path, skipped: list[tuple[str, str]]) -> Found:
    """One student per Canvas user id, their files under the names they uploaded them with. Of two
    files that are one name in the submission, the later upload is kept: the larger Canvas number,
    then the larger copy number."""
    parts: dict[str, dict[str, tuple[tuple[int, int], Path]]] = {}  # user -> name -> (recency, file)
    late: set[str] = set()
    for entry, is_folder in _entries(folder, skipped):
        match = None if is_folder else _canvas_match(entry.name)
        if match is None:
            skipped.append((entry.name, "not named as Canvas names a submitted file"))
            continue
        name, copy = _canvas_upload_name(match["file"])
        recency = (int(match["number"] or 0), copy)
        user = match["anon"] or match["user"]  # an anonymous id keeps its anon_: it is never a user id
        own = parts.setdefault(user, {})
        if name in own:
            older, newer = sorted([own[name], (recency, entry)], key=lambda kept: kept[0])
            skipped.append((older[1].name, f"an earlier upload of {name} than {newer[1].name}"))
            own[name] = newer
        else:
            own[name] = recency, entry
        if match["late"] or match["bare_late"] or match["anon_late"]:
            late.add(user)
    return [(Student(student_id(user), tuple(SubmittedPart(name, path) for name, (_, path) in sorted(own.items())),
                     late_marked=user in late), f"Canvas {'student' if user.startswith('anon_') else 'user'} {user}")
            for user, own in sorted(parts.items())]


def _canvas_match(name: str) -> re.Match[str] | None:
    """``name`` read as Canvas names a submitted file, with its attachment number where a reading has one."""
    return CANVAS_ATTACHMENT.fullmatch(name) or CANVAS_FILE.fullmatch(name)


def _canvas_upload_name(file: str) -> tuple[str, int]:
    """The name a student uploaded ``file`` with, and Canvas's copy number (0 for none)."""
    copy = CANVAS_COPY.fullmatch(file)
    if copy and copy["suffix"].lower() in READ_SUFFIXES:
        return copy["stem"] + copy["suffix"], int(copy["copy"])
    return file, 0


def _moodle(folder: Path, skipped: list[tuple[str, str]]) -> Found:
    """One student per Moodle participant number; a student with a folder per submission plugin
    (files and online text) has them all."""
    parts: dict[str, list[SubmittedPart]] = {}
    for entry, is_folder in _entries(folder, skipped):
        match = MOODLE_ENTRY.fullmatch(entry.name)
        if match is None or is_folder == bool(match["file"]):  # a folder's name ends at the plugin, a file's goes on
            skipped.append((entry.name, "not named as Moodle names a submission's folder or file"))
            continue
        name = f"assignsubmission_{match['plugin']}" if is_folder else match["file"]
        parts.setdefault(match["id"], []).append(SubmittedPart(name, entry))
    found = []
    for participant, own in sorted(parts.items()):
        single_folder = len(own) == 1 and own[0].path.is_dir()
        source = own[0].path if single_folder else tuple(own)
        found.append((Student(student_id(participant), source), ", ".join(part.path.name for part in own)))
    return found


def _gradescope(folder: Path, skipped: list[tuple[str, str]]) -> Found:
    """One student per submitter: a group's submission is graded once for each of its members."""
    metadata = _gradescope_metadata(folder / GRADESCOPE_METADATA)
    on_disk: dict[str, Path] = {}
    for entry, is_folder in _entries(folder, skipped):
        key = entry.name if is_folder else entry.stem if _suffix(entry) == ".zip" else None
        if key in metadata:
            on_disk[key] = entry
        elif entry.name != GRADESCOPE_METADATA:
            skipped.append((entry.name, f"not a submission of {GRADESCOPE_METADATA}"))
    found = []
    for key, record in sorted(metadata.items()):
        submitters = _field(record, "submitters") if isinstance(record, dict) else None
        ids = [id for id in map(_submitter_id, submitters) if id] if isinstance(submitters, list) else []
        if key not in on_disk:
            skipped.append((key, f"in {GRADESCOPE_METADATA}, but not in the folder"))
        elif not ids:
            skipped.append((key, f"no submitter with a sid, email or name in {GRADESCOPE_METADATA}"))
        else:
            submitted, unread = _gradescope_time(_field(record, "created_at"), key)
            found.extend((Student(student_id(id), on_disk[key], submitted, time_unread=unread), key) for id in ids)
    return found


def _gradescope_metadata(path: Path) -> dict[str, object]:
    """submission_metadata.yml: Ruby symbols for keys (``:submitters:``), a mapping per submission folder."""
    import yaml  # an instructor extra, as Gradescope exports are

    refusal = f"{GRADESCOPE_METADATA} cannot be read"
    try:
        text = _read_text(path, MAX_METADATA_BYTES)
    except OSError as error:
        raise ValueError(f"{refusal}: {error.strerror or error}") from None
    if text is None:
        raise ValueError(f"{refusal}: over {MAX_METADATA_BYTES // 1024**2} MiB")
    try:
        metadata = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as error:  # its message spans lines: the problem and where it is say what
        problem = getattr(error, "problem", None) or (str(error).splitlines() or [type(error).__name__])[0]
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise ValueError(f"{refusal}: {printable(problem, keep_newlines=False)}{where}") from None
    if not isinstance(metadata, dict):
        raise ValueError(f"{GRADESCOPE_METADATA} holds no submissions (it is not a mapping)")
    return {str(key): record for key, record in metadata.items()}


def _field(record: dict, name: str) -> object:
    """A field of Gradescope's metadata, written as a Ruby symbol (``:sid``) or plainly."""
    return record.get(f":{name}", record.get(name))


def _submitter_id(submitter: object) -> str | None:
    if not isinstance(submitter, dict):
        return None
    values = (_field(submitter, name) for name in GRADESCOPE_ID_FIELDS)
    return next((str(value).strip() for value in values if value is not None and str(value).strip()), None)


def _gradescope_time(value: object, key: str) -> tuple[datetime | None, str | None]:
    """``:created_at:`` of submission ``key``: YAML reads Gradescope's ``2024-09-01 10:00:00.123456000 -07:00``
    as a datetime. Where the field is there but gives no time, None and why (one line)."""
    if value is None:
        return None, None
    submitted = value if isinstance(value, datetime) else parse_time(value, None) if isinstance(value, str) else None
    if submitted is not None and submitted.tzinfo is not None:
        return submitted, None
    where = printable(f"{GRADESCOPE_METADATA} {key}", keep_newlines=False)
    return None, f"{where} :created_at: is not a time with a UTC offset: {_begins(str(value))}"

def _nbgrader(folder: Path, skipped: list[tuple[str, str]]) -> Found:
    found = []
    for entry, is_folder in _entries(folder, skipped):
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
        inside = _entries(student, [])  # a link is listed, and not followed, when the work is staged
    except OSError:
        return student  # staging says why it cannot be listed
    if any(not is_folder and (entry.name == NBGRADER_TIMESTAMP or _suffix(entry) == ".ipynb")
           for entry, is_folder in inside):
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
    """``folder`` holds a stage's notebook or file (in any case: staging reads it so)."""
    try:
        return any(not is_folder and entry.name.lower() in STAGE_NOTEBOOK_NAMES
                   for entry, is_folder in _entries(folder, []))
    except OSError:
        return False


def _nbgrader_time(work: Path, shown: str) -> tuple[datetime | None, str | None]:
    """When nbgrader says ``work`` (``shown`` in the class folder) was handed in, read as nbgrader reads
    its timestamp.txt: a time that names no zone, or one it cannot find, is UTC. Where there is a
    timestamp.txt that gives no time, None and why, naming the file and what it begins with."""
    try:
        stamp = _read_text(work / NBGRADER_TIMESTAMP, MAX_TIMESTAMP_BYTES)
    except OSError:  # none, a link, a folder: no time rather than one from elsewhere
        return None, None
    where = printable(f"{shown}/{NBGRADER_TIMESTAMP}", keep_newlines=False)
    if stamp is None:
        return None, f"{where} is over {MAX_TIMESTAMP_BYTES} bytes, not a time"
    if not stamp.strip():
        return None, f"{where} is empty"
    if (submitted := parse_time(stamp, timezone.utc)) is None:
        return None, f"{where} is not a time: {_begins(stamp)}"
    return submitted, None


def _begins(text: str) -> str:
    """How a recorded time that is none begins, for its flag: the start of it, escaped."""
    return f'it begins "{printable(text.strip()[:TIME_SHOWN], keep_newlines=False)}"'


def _holds_nbgrader_work(folder: Path) -> bool:
    """``folder`` looks like an nbgrader student's: a timestamp.txt in it or in a folder within."""
    try:
        with os.scandir(folder) as listing:
            return any(item.name == NBGRADER_TIMESTAMP or (item.is_dir(follow_symlinks=False) and
                                                           os.path.isfile(Path(item.path, NBGRADER_TIMESTAMP)))
                       for item in itertools.islice(listing, NBGRADER_PROBED))
    except OSError:
        return False


def parse_time(text: str, assumed: tzinfo | None) -> datetime | None:
    """The time ``text`` gives (``2024-03-01 12:00:00.123456 UTC``, ISO 8601, or with an offset),
    timezone-aware; ``assumed`` is its zone where it names none, or one no zone database knows
    (None: the time is unknown then). Anything else is None."""
    match = TIME_TEXT.fullmatch(text.strip())
    if match is None:
        return None
    fraction = f".{match['fraction'][:6]:0<6}" if match["fraction"] else ""  # Ruby writes nanoseconds
    try:
        when = datetime.fromisoformat(f"{match['date']}T{match['clock']}{fraction}")
    except ValueError:
        return None
    zone = _zone(match["zone"]) or assumed
    return when.replace(tzinfo=zone) if zone else None


def _zone(name: str) -> tzinfo | None:
    if name.upper() in UTC_NAMES:
        return timezone.utc
    if offset := OFFSET.fullmatch(name):
        minutes = int(offset["hours"]) * 60 + int(offset["minutes"])
        return timezone(timedelta(minutes=-minutes if offset["sign"] == "-" else minutes))
    try:
        return ZoneInfo(name) if name else None
    except (KeyError, ValueError, OSError):  # no such zone (ZoneInfoNotFoundError is a KeyError)
        return None


def _suffix(path: Path) -> str:
    """The suffix of ``path`` in lower case: an LMS, Windows and macOS keep whatever case a student gave it."""
    return path.suffix.lower()


def _read_text(path: Path, limit: int) -> str | None:
    """The text of ``path`` (never through a link), or None when it is over ``limit`` bytes. Bytes
    that are not UTF-8 are replaced."""
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as handle:
        data = handle.read(limit + 1)
    return data.decode("utf-8", errors="replace") if len(data) <= limit else None


LISTERS = {"folders": _folders, "canvas": _canvas, "moodle": _moodle, "gradescope": _gradescope, "nbgrader": _nbgrader}
