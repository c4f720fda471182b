"""Which student handed in which notebook, read from the file names of an LMS download: plugins
for `nbgrader zip_collect`. In the course's nbgrader_config.py, one of

    c.ZipCollectApp.collector_plugin = "grader.authoring.nbgrader_lms.CanvasCollector"
    c.ZipCollectApp.collector_plugin = "grader.authoring.nbgrader_lms.MoodleCollector"

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
One student's download can hold two copies of a notebook (handed in twice in one submission):
nbgrader stops the whole collection at a second copy ("Duplicate submission file. No timestamps
for comparison"), so the collector keeps the copy Canvas stored last (the larger file id) and
logs the one it skips. Canvas's names carry no submission time, so nbgrader records none.

Moodle ("Download all submissions"): ``<Full Name>_<participant id>_assignsubmission_file_/<file>``
(one folder per student, Moodle 3.1 and later) or, without folders,
``<Full Name>_<participant id>_assignsubmission_file_<file>``, from mod/assign/locallib.php. The
participant id is Moodle's per-assignment number for the student, not their user id.
"""

import os
import re

from nbgrader.plugins import FileNameCollectorPlugin
from traitlets import Unicode

CANVAS_NAME = (
    r".*/(?:(?!anon_|LATE_)(?P<name>[^/]*?)_)?(?:LATE_)?(?P<student_id>\d+|anon_[0-9A-Za-z]+)_(?P<file_number>\d+)_"
    r"(?P<file_id>[^/]+?)(?:-\d+| \(\d+\))?\.ipynb$"
)
MOODLE_NAME = (
    r".*/(?P<name>[^/]*)_(?P<student_id>\d+)_assignsubmission_file_(?:/(?:[^/]*/)*)?(?P<file_id>[^/]+)\.ipynb$"
)


class CanvasCollector(FileNameCollectorPlugin):
    """Files of a Canvas submissions download: the student is their Canvas user id."""

    named_regexp = Unicode(CANVAS_NAME, help="A Canvas download's file names (see CANVAS_NAME)").tag(config=True)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._last_stored: dict[str, dict[tuple[str, str], int]] = {}  # folder -> (student, notebook) -> file id

    def collect(self, submitted_file: str) -> dict | None:
        info = super().collect(submitted_file)
        if info is None:
            return None
        folder = os.path.dirname(submitted_file)
        if folder not in self._last_stored:
            self._last_stored[folder] = self._latest_copies(folder)
        if int(info["file_number"]) < self._last_stored[folder][info["student_id"], info["file_id"]]:
            self.log.warning("Skipped %s: the same student's %s.ipynb is in this download twice, and Canvas "
                             "stored the other copy later", submitted_file, info["file_id"])
            return None
        return info

    def _latest_copies(self, folder: str) -> dict[tuple[str, str], int]:
        """(student, notebook) -> the largest Canvas file id among that folder's copies of it."""
        latest: dict[tuple[str, str], int] = {}
        for name in os.listdir(folder):
            match = re.match(self.named_regexp, os.path.join(folder, name))
            if match:
                key = match["student_id"], match["file_id"]
                latest[key] = max(latest.get(key, 0), int(match["file_number"]))
        return latest


class MoodleCollector(FileNameCollectorPlugin):
    """Files of a Moodle assignment download: the student is their participant id."""

    named_regexp = Unicode(MOODLE_NAME, help="A Moodle download's file names (see MOODLE_NAME)").tag(config=True)
