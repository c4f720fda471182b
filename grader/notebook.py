"""The grader from inside a Jupyter notebook of the nbgrader course (grader/authoring/nbgrader/course.py).

Each stage notebook's answer cell starts with ``%%writefile stage<N>_<topic>.py``: running it saves
the cell as the same file the ``.py`` exercise is. ``load`` imports that file into the notebook;
``check`` grades it with ``python -m grader`` in a separate, sandboxed process (the notebook's
kernel never judges anything), prints one line per check and returns the points earned, which
nbgrader takes as the test cell's partial credit. The kernel runs the student's cells too, so it
only ever receives the report as a student may read it (``--student-json``): hidden checks' verdicts
and hints, never their data, which nothing in the kernel could then print into nbgrader's feedback.
"""

import importlib
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path
from types import ModuleType

from grader.core.report import Report
from grader.core.report import read as read_report
from grader.core.stages import STAGE_MODULES
from grader.runner.implementation import SUBMISSION_PACKAGE, register_package
from grader.views.notebook import HIDDEN_LATER, NOT_BESIDE, SUMMARY, verdict_line

GRADING_SECONDS = 240  # the whole grader run for one stage; a correct one takes about 3 s


class NotebookGradingError(RuntimeError):
    """The stage could not be graded; the message says why and what to do."""


def load(stage: int) -> ModuleType:
    """The stage module as this notebook's answer cell last saved it, freshly imported."""
    path = _stage_file(stage)
    register_package(path.parent)  # stage 3 and 5 import their neighbours as `exercises.<module>`
    for name in [n for n in sys.modules if n.startswith(f"{SUBMISSION_PACKAGE}.")]:
        del sys.modules[name]
    importlib.invalidate_caches()
    return importlib.import_module(f"{SUBMISSION_PACKAGE}.{STAGE_MODULES[stage]}")


def check(stage: int, hidden: bool = False) -> float:
    """Grade the stage's file; print its visible (or hidden) checks; return the points they earned."""
    path = _stage_file(stage)
    report = _grade(stage, path.name, path.read_bytes())
    checks = [c for c in report["stages"][0]["checks"] if (c["visibility"] == "hidden") == hidden]
    if hidden and not checks:
        print(HIDDEN_LATER)
        return 0.0
    for c in checks:
        print(verdict_line(c, stage, hidden))
    earned = float(sum(c["score"] for c in checks))
    print(
        SUMMARY.format(kind="hidden" if hidden else "visible", stage=stage)
        + f"{earned:g}/{sum(c['max_score'] for c in checks):g}"
    )
    return earned


def _stage_file(stage: int) -> Path:
    path = Path.cwd() / f"{STAGE_MODULES[stage]}.py"
    if not path.is_file():
        raise NotebookGradingError(
            NOT_BESIDE.format(name=path.name, folder=path.parent) + " first (its first "
            f"line, %%writefile {path.name}, saves it)"
        )
    return path


@cache
def _grade(stage: int, name: str, content: bytes) -> Report:
    """The grader's report for one stage file; the same content is graded once per kernel."""
    with tempfile.TemporaryDirectory(prefix="notebook-grade-") as folder:
        submission = Path(folder) / "submission"
        submission.mkdir()
        (submission / name).write_bytes(content)
        report_path = Path(folder) / "report.json"
        try:
            finished = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "grader",
                    str(submission),
                    "--stage",
                    str(stage),
                    "--student-json",
                    str(report_path),
                ],
                capture_output=True,
                text=True,
                timeout=GRADING_SECONDS,
            )
        except subprocess.TimeoutExpired:
            raise NotebookGradingError(f"grading stage {stage} took over {GRADING_SECONDS} s") from None
        if not report_path.is_file():
            reason = (finished.stderr or finished.stdout).strip().splitlines()[-1:] or ["no reason given"]
            raise NotebookGradingError(f"the grader could not run: {reason[0]}")
        report = read_report(report_path)
        if report is None:
            raise NotebookGradingError("the grader wrote a report that cannot be read")
        return report
