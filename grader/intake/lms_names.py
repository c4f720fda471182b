"""The names Canvas and Moodle give the files of a class download: one grammar, which the class intake
(grader/intake/layouts.py) and the nbgrader collectors (grader/authoring/nbgrader/lms.py) both read."""

import re
from collections.abc import Iterator

from grader.runner.escaping import printable

# Canvas: the "number" after the user id is Canvas's own (attachment or submission); a file
# uploaded again under a name already used gets -1, -2 before its extension.
# With anonymous grading, the name and user id give way to ``anon_<anonymous id>`` (LATE then comes first):
# [LATE_]anon_<anonymous id>_<number>_<file>, per canvas-lms lib/content_zipper.rb (get_filename).
# It joins [name, LATE, user id] with _ after taking every non-word character out of the name: a name
# with none left is empty (_101_…, _LATE_101_…), and older anonymous downloads leave it out (101_…, LATE_101_…).
# A leading LATE_ in capitals is the marker (Canvas writes names in lower case: late_101_… is a student named late).
CANVAS_USER = r"\d+"  # a Canvas user id
CANVAS_ANONYMOUS = r"anon_[0-9A-Za-z]+"  # a student's id under anonymous grading
CANVAS_NUMBER = r"\d+"  # an attachment's (or a submission's) number
CANVAS_COPY_MARK = r"-\d+"  # before the extension of a file uploaded again under a name already used
_CANVAS_PREFIX = (
    rf"(?:(?P<anon_late>(?i:late)_)?(?P<anon>{CANVAS_ANONYMOUS})"
    rf"|(?:(?P<bare_late>LATE)_|(?P<name>.*?)_(?:(?P<late>(?i:late))_)?|)(?P<user>{CANVAS_USER}))"
)
# A file an attachment number follows is read with it where a reading has it (101_5001_x.py is user 101's
# attachment 5001, not user 5001's), else without (a text entry has none).
CANVAS_ATTACHMENT = re.compile(_CANVAS_PREFIX + rf"_(?P<number>{CANVAS_NUMBER})_(?P<file>.+)", re.DOTALL)
CANVAS_FILE = re.compile(_CANVAS_PREFIX + rf"(?:_(?P<number>{CANVAS_NUMBER}))?_(?P<file>.+)", re.DOTALL)
CANVAS_COPY = re.compile(r"(?P<stem>.+)-(?P<copy>\d+)(?P<suffix>\.[^.]*)", re.DOTALL)
READ_SUFFIXES = {".py", ".ipynb", ".zip"}  # the files intake reads: their Canvas copy numbers are taken off
MOODLE_PARTICIPANT = r"\d+"  # a participant number
MOODLE_SUBMISSION = "_assignsubmission_"  # between the participant number and the submission plugin's name
MOODLE_ENTRY = re.compile(
    rf"(?P<name>.*?)_(?P<id>{MOODLE_PARTICIPANT}){MOODLE_SUBMISSION}(?P<plugin>[a-z0-9]+)_(?P<file>.*)", re.DOTALL
)
# What follows the name in a reading of either LMS's entry names: tried after each underscore of a name, it
# finds every way the name can be read (a display name may hold digits and underscores of its own).
_MOODLE_AFTER_NAME = re.compile(
    rf"(?P<id>{MOODLE_PARTICIPANT}){MOODLE_SUBMISSION}(?P<plugin>[a-z0-9]+)_(?P<file>.*)", re.DOTALL
)
_CANVAS_AFTER_NAME = re.compile(
    rf"(?:(?i:late)_)?(?P<user>{CANVAS_USER})_(?P<number>{CANVAS_NUMBER})_(?P<file>.+)", re.DOTALL
)

# The same names as nbgrader's ZipCollectApp reads them: a notebook's whole path in the download, with the
# groups its FileNameCollectorPlugin takes (student_id, file_id).
NBGRADER_CANVAS_NAME = (
    rf".*/(?:(?!anon_|LATE_)(?P<name>[^/]*?)_)?(?:LATE_)?(?P<student_id>{CANVAS_USER}|{CANVAS_ANONYMOUS})"
    rf"_(?P<file_number>{CANVAS_NUMBER})_(?:[^/]+/)*(?P<file_id>[^/]+?)(?:{CANVAS_COPY_MARK}| \(\d+\))?\.ipynb$"
)
NBGRADER_MOODLE_NAME = (
    rf".*/(?P<name>[^/]*)_(?P<student_id>{MOODLE_PARTICIPANT}){MOODLE_SUBMISSION}file_"
    r"(?:[^/]*/)*(?P<file_id>[^/]+)\.ipynb$"
)


def canvas_match(name: str) -> re.Match[str] | None:
    """``name`` read as Canvas names a submitted file, with its attachment number where a reading has one."""
    return CANVAS_ATTACHMENT.fullmatch(name) or CANVAS_FILE.fullmatch(name)


def _after_each_underscore(name: str, after_name: re.Pattern[str]) -> Iterator[re.Match[str]]:
    """Each reading of ``name`` as a display name, an underscore, then what ``after_name`` reads: a display
    name may hold underscores and digits of its own, so every underscore is a place the name may end."""
    for at, character in enumerate(name):
        if character == "_" and (match := after_name.fullmatch(name, at + 1)):
            yield match


def moodle_readings(name: str, folder: bool) -> list[tuple[str, str, str]]:
    """Every way ``name`` reads as Moodle names a submission's folder (it ends at the plugin) or file:
    (participant number, plugin, file), the first the shortest display name. A display name can spell a
    prefix itself (``Eve_102_assignsubmission_file``): more than one participant among the readings is a
    name no one can attribute."""
    return [
        (match["id"], match["plugin"], match["file"])
        for match in _after_each_underscore(name, _MOODLE_AFTER_NAME)
        if bool(match["file"]) != folder
    ]


def canvas_users(name: str) -> list[str]:
    """The Canvas users (or anonymous ids) ``name`` can be the file of, first the one canvas_match reads: a
    display name of digits and underscores (``eve_5002``) can make the name read as another user's file too."""
    first = canvas_match(name)
    if first is None:
        return []
    users = [first["anon"] or first["user"]]
    for match in _after_each_underscore(name, _CANVAS_AFTER_NAME):
        if match["user"] not in users:
            users.append(match["user"])
    return users


def read_two_ways(who: str, ids: list[str]) -> str:
    """Why an entry whose name reads as the work of more than one student is graded as no one's: a display
    name can spell another student's id (a Moodle full name ``Eve_102_assignsubmission_file``)."""
    readings = " or ".join(f"{who} {printable(id, keep_newlines=False)}" for id in ids)
    return (
        f"its name reads as the work of {readings} (a display name can spell another's id): graded as no "
        "one's; rename it for the student whose work it is and grade again"
    )


def canvas_upload_name(file: str) -> tuple[str, int]:
    """The name a student uploaded ``file`` with, and Canvas's copy number (0 for none)."""
    copy = CANVAS_COPY.fullmatch(file)
    if copy and copy["suffix"].lower() in READ_SUFFIXES:
        return copy["stem"] + copy["suffix"], int(copy["copy"])
    return file, 0
