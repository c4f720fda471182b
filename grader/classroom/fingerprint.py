"""What a grade was computed from, as hashes the judge takes: a report whose fingerprint still matches
its student's staged files and this run's grader, points table, device and options needs no regrade.

Every hash here is the judge's own: of the stage files as it staged them, of the grader's files as
they are on disk. Nothing a student's code could write or say takes part.
"""

import hashlib
import importlib.metadata
import importlib.util
import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.core.report import FlagKind
from grader.core.stages import REGISTRY_FILE
from grader.intake.submission import SubmissionFiles, feed

GRADER_DIR = Path(__file__).parents[1]
# Files of the grader that never shape a report (the release, Gradescope and nbgrader builders), and the
# stage registry, hashed apart: its points as the points table in use, the rest as the grader's.
REGISTRY = REGISTRY_FILE.relative_to(GRADER_DIR).as_posix()  # core/stages.toml
NOT_GRADING = ("authoring/", REGISTRY)  # a folder (its files) or a file

# Why a student is graded, in the order a summary lists them; each label also ends a gradebook row's
# "not graded: ..." when the student could not be graded this run.
FORCED = "forced"
ASKED = "asked for"
NEW = "new"
REPORT_UNREADABLE = "report unreadable"
INCOMPLETE = FlagKind.INCOMPLETE.value  # a report the grader could not finish
NO_FINGERPRINT = "report without a fingerprint"
# A part of the fingerprint that differs, and the reason it gives.
CHANGED = {
    "submission": "resubmitted",
    "grader": "grader changed",
    "points": "points table changed",
    "device": "device changed",
    "options": "grading options changed",
}
REASONS = [FORCED, ASKED, NEW, REPORT_UNREADABLE, INCOMPLETE, NO_FINGERPRINT, *CHANGED.values()]


@dataclass(frozen=True)
class RunFingerprint:
    """The parts of a fingerprint that are the same for every student of a run, taken once."""

    grader: str
    points: str
    device: str
    options: dict

    def of(self, staged: SubmissionFiles) -> dict:
        """The fingerprint of a report graded from ``staged`` in this run (the report's ``fingerprint``)."""
        return {
            "submission": submission_hash(staged),
            "grader": self.grader,
            "points": self.points,
            "device": self.device,
            "options": self.options,
        }


def submission_hash(staged: SubmissionFiles) -> str:
    """sha256 of the files read in (names and bytes) and of what intake left out or could not read."""
    return staged.digest()


def grader_hash() -> str:
    """sha256 of every file the grader grades with (its code, checks, hints, document values and schemas,
    and the reference solutions), of the stage registry but its points, and of the torch version: any change
    to one may change a grade.

    Taken from the files on disk, not from a version number that a change may leave as it was.
    """
    digest = hashlib.sha256()
    for root, label in ((GRADER_DIR, "grader"), (_solutions_dir(), "solutions")):
        for path in sorted(_grading_files(root)):
            feed(digest, f"{label}/{path.relative_to(root).as_posix()}".encode(), path.read_bytes())
    stages = tomllib.loads((GRADER_DIR / REGISTRY).read_text(encoding="utf-8"))
    feed(
        digest,
        json.dumps({stage: {**entry, "points": None} for stage, entry in stages.items()}, sort_keys=True).encode(),
    )
    feed(digest, f"torch {importlib.metadata.version('torch')}".encode())
    return f"sha256:{digest.hexdigest()}"


def points_hash(table: dict) -> str:
    """sha256 of the points table as parsed: its comments and layout change nothing."""
    return f"sha256:{hashlib.sha256(json.dumps(table, sort_keys=True).encode()).hexdigest()}"


def why_grade(report: Mapping[str, Any] | None, report_exists: bool, current: dict) -> str | None:
    """Why a student whose saved report is ``report`` (None: none that can be read) must be graded
    again to match the ``current`` fingerprint; None when the report is current."""
    if report is None:
        return REPORT_UNREADABLE if report_exists else NEW
    if report.get("complete") is not True:
        return INCOMPLETE
    saved = report.get("fingerprint")
    if not isinstance(saved, dict):
        return NO_FINGERPRINT
    return next((reason for part, reason in CHANGED.items() if saved.get(part) != current[part]), None)


def _grading_files(root: Path):
    for path in root.rglob("*"):
        relative = path.relative_to(root)
        if (
            path.is_file()
            and "__pycache__" not in relative.parts
            and not any(relative.as_posix().startswith(part) for part in NOT_GRADING)
            and path.suffix != ".pyc"
        ):
            yield path


def _solutions_dir() -> Path:
    spec = importlib.util.find_spec("solutions")  # found, not imported: the judge loads it when it grades
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the reference solutions (the package solutions) cannot be found")
    return Path(next(iter(spec.submodule_search_locations)))
