"""Which student handed in which notebook, read from the file names of an LMS download: plugins
for `nbgrader zip_collect`. In the course's nbgrader_config.py, one of

    c.ZipCollectApp.collector_plugin = "grader.authoring.nbgrader.lms.CanvasCollector"
    c.ZipCollectApp.collector_plugin = "grader.authoring.nbgrader.lms.MoodleCollector"

nbgrader's FileNameCollectorPlugin matches its ``named_regexp`` from the start of each extracted
file's *full path* (nbgrader/apps/zipcollectapp.py walks extracted/ and passes absolute paths), so
a pattern must skip the folders first. zip_collect files the notebook as
submitted/<student_id>/<assignment>/<file_id>.ipynb, and only a ``file_id`` equal to a released
notebook's name is one autograde grades: the patterns leave out of it whatever the LMS adds to
the name the student gave the file.

Canvas ("Download Submissions", flat): ``<name>[_LATE]_<user id>_<file id>_<file name>``, from
canvas-lms lib/content_zipper.rb: the name is the sortable name in lower case without spaces or
punctuation; with anonymous grading ``anon_<anonymous id>`` takes the place of name and user id.
Canvas renames a file whose name the student already uploaded: ``stage1_softmax-1.ipynb``, and
a browser's second download is ``stage1_softmax (1).ipynb``; both are filed as stage1_softmax.
A student who uploaded a .zip of notebooks: nbgrader extracts it into a folder named like the
zip, ``<name>_<user id>_<file id>_attention/...``, and the notebooks in it are filed under the
user id of that folder.

Moodle ("Download all submissions"): ``<Full Name>_<participant id>_assignsubmission_file_/<file>``
(one folder per student, Moodle 3.1 and later) or, without folders,
``<Full Name>_<participant id>_assignsubmission_file_<file>``, from mod/assign/locallib.php. The
participant id is Moodle's per-assignment number for the student, not their user id. A notebook
in a sub-folder, or in a .zip nbgrader extracted, is the student's too.

In both, a notebook uploaded under a near name (``Stage1_Softmax.ipynb``, ``stage2 self-attention
copy.ipynb``) is filed under the course notebook's name it stands for, by the rule the grade-all
intake uses for stage files (grader.intake.submission.stage_file_meant); autograde grades only
notebooks under their own names ("Skipping unknown notebook").

A display name can spell another student's id (a Moodle full name ``Eve_102_assignsubmission_file``,
a Canvas name ending ``_5002``), so a name can read as the work of two students: as the class
intake does (grader/intake/layouts.py), the collector skips such an entry with one line naming both
readings, rather than file one student's notebook as another's.

One student's download can hold two copies of a notebook (handed in twice, or once at the top
of their folder and once in a sub-folder): nbgrader stops the whole collection at a second copy
("Duplicate submission file. No timestamps for comparison"). The collector keeps one and logs
one line naming the student, the copy kept and the ones skipped. Canvas: the copy Canvas stored
last (the larger file id). Moodle, whose names say nothing of when: as grade-all does, the copy
under the notebook's own name, then the shallowest, then the first by path. Neither LMS's names
carry a submission time, so nbgrader records none (no timestamp.txt: see docs/instructors.md on
release_feedback).
"""

import os
import re
from dataclasses import dataclass

from nbgrader.plugins import FileNameCollectorPlugin
from traitlets import Unicode

from grader.intake.lms_names import (
    NBGRADER_CANVAS_NAME,
    NBGRADER_MOODLE_NAME,
    canvas_users,
    moodle_readings,
    read_two_ways,
)
from grader.intake.submission import stage_file_meant

# The download's names, from the grammar the class intake reads them with
CANVAS_NAME, MOODLE_NAME = NBGRADER_CANVAS_NAME, NBGRADER_MOODLE_NAME


@dataclass(frozen=True)
class _Copy:
    """One notebook file of a download, as the collector reads its name."""

    path: str
    student_id: str
    file_id: str
    rank: tuple  # the smallest is the copy kept


class _DownloadCollector(FileNameCollectorPlugin):
    """What the Canvas and Moodle collectors share: near names filed as the notebook they stand for,
    and one copy of each of a student's notebooks, chosen before nbgrader sees any (nbgrader stops the
    whole collection at a second copy without a timestamp)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._kept: dict[str, dict[tuple[str, str], list[_Copy]]] = {}  # download folder -> copies, kept first
        self._reported: set[tuple[str, str, str]] = set()
        self._refused: set[str] = set()  # entries whose names read as two students' work, said once each

    def collect(self, submitted_file: str) -> dict | None:
        info = super().collect(submitted_file)
        if info is None:
            return None
        match = re.match(self.named_regexp, submitted_file)
        folder = self._download_folder(submitted_file, match)
        extracted = self._extracted_folder()
        if extracted and os.path.commonpath([extracted, folder]) != extracted:
            self.log.warning(
                "Skipped %s: only a folder above the download (%s) has a name like the LMS's", submitted_file, folder
            )
            return None
        if len(readers := self._readers(submitted_file, folder)) > 1:
            entry = self._entry(submitted_file, folder)
            if entry not in self._refused:
                self._refused.add(entry)
                self.log.warning("Skipped %s: %s", entry, read_two_ways(self.WHO, readers))
            return None
        copy = self._copy(submitted_file, match)
        info["file_id"] = copy.file_id
        if folder not in self._kept:
            self._kept[folder] = self._copies(folder)
        copies = self._kept[folder].get((copy.student_id, copy.file_id), [copy])
        if len(copies) > 1 and (folder, copy.student_id, copy.file_id) not in self._reported:
            self._reported.add((folder, copy.student_id, copy.file_id))
            others = ", ".join(os.path.relpath(c.path, folder) for c in copies[1:])
            self.log.warning(
                "Student %s handed in %s.ipynb %d times: kept %s (%s), skipped %s",
                copy.student_id,
                copy.file_id,
                len(copies),
                os.path.relpath(copies[0].path, folder),
                self.KEEPS,
                others,
            )
        return info if copies[0].path == copy.path else None

    def _copy(self, path: str, match: re.Match) -> _Copy:
        meant = stage_file_meant(f"{match['file_id']}.py")  # the grade-all intake's rule for stage files
        file_id = meant.removesuffix(".py") if meant else match["file_id"]
        return _Copy(path, match["student_id"], file_id, self._rank(path, match, near_name=meant is not None))

    def _copies(self, folder: str) -> dict[tuple[str, str], list[_Copy]]:
        """(student, notebook) -> that student's copies of it under ``folder``, the one kept first."""
        copies: dict[tuple[str, str], list[_Copy]] = {}
        for root, folders, files in os.walk(folder):
            folders.sort()
            for name in files:
                path = os.path.join(root, name)
                match = re.match(self.named_regexp, path) if name.endswith(".ipynb") else None
                if match and self._download_folder(path, match) == folder and len(self._readers(path, folder)) == 1:
                    copy = self._copy(path, match)
                    copies.setdefault((copy.student_id, copy.file_id), []).append(copy)
        return {key: sorted(found, key=lambda c: c.rank) for key, found in copies.items()}

    def _extracted_folder(self) -> str | None:
        """zip_collect's extracted/ folder (None outside zip_collect): the download's names are below it,
        and a course folder above it named like an LMS's file (course_2024_1_x) is not one of them."""
        app = self.parent
        if app is None or not hasattr(app, "_format_collect_path"):
            return None
        return os.path.abspath(app._format_collect_path(app.extracted_directory))

    @staticmethod
    def _entry(path: str, folder: str) -> str:
        """The file or folder of the download the LMS named for the student that ``path`` is (in)."""
        return os.path.relpath(path, folder).split(os.sep)[0]

    def _readers(self, path: str, folder: str) -> list[str]:
        """The students the name of ``path``'s entry in the download can be read as the work of: the regex
        takes one reading (nbgrader's), a display name can make the name read as another student's too."""
        entry = self._entry(path, folder)
        return self._students_named(entry, is_folder=entry != os.path.relpath(path, folder))

    @staticmethod
    def _download_folder(path: str, match: re.Match) -> str:
        """The folder holding the entry the LMS named for the student (their file, or their folder)."""
        return os.path.dirname(path[: match.start("student_id")])


class CanvasCollector(_DownloadCollector):
    """Files of a Canvas submissions download: the student is their Canvas user id."""

    named_regexp = Unicode(CANVAS_NAME, help="A Canvas download's file names (see CANVAS_NAME)").tag(config=True)
    KEEPS = "the copy Canvas stored last"
    WHO = "Canvas user"

    @staticmethod
    def _students_named(entry: str, is_folder: bool) -> list[str]:
        return canvas_users(entry)  # a folder is a .zip nbgrader extracted, named like the zip

    @staticmethod
    def _rank(path: str, match: re.Match, near_name: bool) -> tuple:
        return -int(match["file_number"]), near_name, path.count("/"), path


class MoodleCollector(_DownloadCollector):
    """Files of a Moodle assignment download: the student is their participant id."""

    named_regexp = Unicode(MOODLE_NAME, help="A Moodle download's file names (see MOODLE_NAME)").tag(config=True)
    KEEPS = "the one under the notebook's own name, then the shallowest, then the first by path"
    WHO = "Moodle participant"

    @staticmethod
    def _students_named(entry: str, is_folder: bool) -> list[str]:
        # A folder is Moodle's (its name ends at the plugin) or a .zip nbgrader extracted (named like the
        # zip): nbgrader's extraction leaves no way to tell, so both readings count.
        readings = moodle_readings(entry, folder=False) + (moodle_readings(entry, folder=True) if is_folder else [])
        return list(dict.fromkeys(participant for participant, _, _ in readings))

    @staticmethod
    def _rank(path: str, match: re.Match, near_name: bool) -> tuple:
        return near_name, path.count("/"), path
