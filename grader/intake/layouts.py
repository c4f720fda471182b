"""A class folder, exactly as it was downloaded, becomes a list of students: an id, where their work
is (grader/intake/submission.py reads it) and when the LMS says it was handed in.

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
grader.intake.submission.is_litter) is skipped in every layout and never decides which layout a folder is.
A folder holding nothing but one LMS download (the folder a double-click unzip makes around it) or an
nbgrader course's ``submitted/`` and ``autograded/`` is refused with the folder to give instead:
graded as it stands, a whole class would be one student.

Neither Canvas nor Moodle documents a submission time in its download (a file's time after
unzipping is whatever the LMS wrote into its zip), so their ``submitted`` is None rather than a
guess: only Canvas's LATE marker is kept.
"""

from dataclasses import replace
from pathlib import Path

from grader.intake.gradescope_layout import GRADESCOPE_METADATA, list_gradescope
from grader.intake.lms_names import (
    MOODLE_ENTRY,
    MOODLE_SUBMISSION,
    canvas_match,
    canvas_upload_name,
    canvas_users,
    moodle_readings,
    read_two_ways,
)
from grader.intake.nbgrader_layout import NBGRADER_STEPS, holds_nbgrader_work, list_nbgrader
from grader.intake.students import Found, Student, display_name, entries_of, student_id, suffix_of
from grader.intake.submission import SubmittedPart
from grader.runner.escaping import printable

LAYOUTS = ("auto", "folders", "canvas", "moodle", "gradescope", "nbgrader")


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
            student = replace(
                student,
                conflict=f"{len(claimed)} submissions claim this id ({entries}): none is "
                "graded as this student's; fix the download and grade again",
            )
        students.append(student)
    return students, skipped


def detect_layout(folder: Path) -> str:
    """The layout ``folder`` was downloaded in, from its names (see the module's docstring).

    ValueError, naming the folder to give, for a folder one level above a class: an nbgrader course
    (its ``submitted/``, ``autograded/``), or a folder holding only an LMS download.
    """
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder")
    entries = entries_of(folder, [])
    if steps := [entry.name for entry, is_folder in entries if is_folder and entry.name in NBGRADER_STEPS]:
        raise ValueError(
            f"{folder} is an nbgrader course (it holds {'/ and '.join(steps)}/): give its submitted/ "
            "or autograded/ folder"
        )
    layout = _layout_of(folder, entries)
    if layout == "folders" and len(entries) == 1 and entries[0][1]:
        inner = entries[0][0]
        if (inner_layout := _layout_of(inner, entries_of(inner, []))) != "folders":
            raise ValueError(
                f"{folder} holds only {inner.name}/, a {inner_layout} download: give {inner} "
                "(graded as it stands, the whole class would be one student)"
            )
    return layout


def _layout_of(folder: Path, entries: list[tuple[Path, bool]]) -> str:
    """The layout that ``entries``, the entries of ``folder``, name."""
    if any(entry.name == GRADESCOPE_METADATA for entry, _ in entries):
        return "gradescope"
    if folder.resolve().name in NBGRADER_STEPS or any(
        is_folder and holds_nbgrader_work(entry) for entry, is_folder in entries
    ):
        return "nbgrader"
    if any(MOODLE_ENTRY.fullmatch(entry.name) for entry, _ in entries):
        return "moodle"
    canvas = [canvas_match(entry.name) for entry, is_folder in entries if not is_folder]
    if entries and len(canvas) == len(entries) and any(match and match["number"] for match in canvas):
        return "canvas"
    return "folders"


def _folders(folder: Path, skipped: list[tuple[str, str]]) -> Found:
    found = []
    for entry, is_folder in entries_of(folder, skipped):
        if is_folder:
            found.append((Student(student_id(entry.name), entry), entry.name))
        elif suffix_of(entry) == ".zip":  # one that is no zip gets a report saying why
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
    names: dict[str, str] = {}  # user -> the name Canvas writes (lower case, no spaces), where it writes one
    for entry, is_folder in entries_of(folder, skipped):
        match = None if is_folder else canvas_match(entry.name)
        if match is None:
            skipped.append((entry.name, "not named as Canvas names a submitted file"))
            continue
        if len(users := canvas_users(entry.name)) > 1:
            skipped.append((entry.name, read_two_ways("Canvas user", users)))
            continue
        name, copy = canvas_upload_name(match["file"])
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
        if match["name"]:
            names.setdefault(user, match["name"])
    return [
        (
            Student(
                student_id(user),
                tuple(SubmittedPart(name, path) for name, (_, path) in sorted(own.items())),
                late_marked=user in late,
                name=display_name(names.get(user)),
            ),
            f"Canvas {'student' if user.startswith('anon_') else 'user'} {user}",
        )
        for user, own in sorted(parts.items())
    ]


def _moodle(folder: Path, skipped: list[tuple[str, str]]) -> Found:
    """One student per Moodle participant number; a student with a folder per submission plugin
    (files and online text) has them all."""
    parts: dict[str, list[SubmittedPart]] = {}
    names: dict[str, str] = {}  # participant -> the full name Moodle writes before the number
    for entry, is_folder in entries_of(folder, skipped):
        readings = moodle_readings(entry.name, folder=is_folder)  # a folder's name ends at the plugin
        if not readings:
            skipped.append((entry.name, "not named as Moodle names a submission's folder or file"))
            continue
        if len(participants := list(dict.fromkeys(id for id, _, _ in readings))) > 1:
            skipped.append((entry.name, read_two_ways("Moodle participant", participants)))
            continue
        participant, plugin, file = readings[0]
        name = f"assignsubmission_{plugin}" if is_folder else file
        parts.setdefault(participant, []).append(SubmittedPart(name, entry))
        names.setdefault(participant, entry.name.split(f"_{participant}{MOODLE_SUBMISSION}")[0])
    found = []
    for participant, own in sorted(parts.items()):
        single_folder = len(own) == 1 and own[0].path.is_dir()
        source = own[0].path if single_folder else tuple(own)
        student = Student(student_id(participant), source, name=display_name(names[participant]))
        found.append((student, ", ".join(part.path.name for part in own)))
    return found


LISTERS = {
    "folders": _folders,
    "canvas": _canvas,
    "moodle": _moodle,
    "gradescope": list_gradescope,
    "nbgrader": list_nbgrader,
}
