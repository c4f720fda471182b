"""The grader from inside a Jupyter notebook of the nbgrader course (grader/authoring/nbgrader/course.py).

Each stage notebook's answer cell starts with ``%%writefile stage<N>_<topic>.py``: running it saves
the cell as the same file the ``.py`` exercise is. ``load`` imports that file into the notebook, and
starts grading it with ``python -m grader`` in a separate, sandboxed process (the notebook's kernel
never judges anything) while the import runs; ``check`` reads that grading (or grades the file anew
when it has changed since), prints one line per check and returns the points earned, which
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
from grader.views.notebook import HIDDEN_LATER, NOT_BESIDE, SUMMARY, verdict_lines

GRADING_SECONDS = 240  # the whole grader run for one stage; a correct one takes about 3 s


class NotebookGradingError(RuntimeError):
    """The stage could not be graded; the message says why and what to do."""


def load(stage: int) -> ModuleType:
    """The stage module as this notebook's answer cell last saved it, freshly imported. Its grading starts
    beside the import, for check() to read (a notebook's import of torch and its grading take seconds each)."""
    path = _stage_file(stage)
    _grade_ahead(stage, path.name, path.read_bytes())
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
    for line in verdict_lines(checks, stage, hidden):
        print(line)
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


# Gradings started ahead by load(), by (stage, file name, content): the process and its folder.
_started: dict[tuple[int, str, bytes], tuple[subprocess.Popen, tempfile.TemporaryDirectory]] = {}


def _start(stage: int, name: str, content: bytes) -> tuple[subprocess.Popen, tempfile.TemporaryDirectory]:
    """``python -m grader`` on the stage file, started: its output goes to files, so nothing waits on it."""
    folder = tempfile.TemporaryDirectory(prefix="notebook-grade-")
    submission = Path(folder.name) / "submission"
    submission.mkdir()
    (submission / name).write_bytes(content)
    with open(Path(folder.name) / "stderr.txt", "w") as stderr:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "grader",
                str(submission),
                "--stage",
                str(stage),
                "--student-json",
                str(Path(folder.name) / "report.json"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    return process, folder


def _grade_ahead(stage: int, name: str, content: bytes) -> None:
    """Start grading the file as load() found it, while the kernel imports it (torch): check() then reads the
    report when the file is still the same. An earlier start for the stage, of other content, is stopped."""
    for key in [key for key in _started if key[0] == stage and key != (stage, name, content)]:
        process, folder = _started.pop(key)
        process.kill()
        process.wait()
        folder.cleanup()
    if (stage, name, content) not in _started:
        _started[stage, name, content] = _start(stage, name, content)


@cache
def _grade(stage: int, name: str, content: bytes) -> Report:
    """The grader's report for one stage file; the same content is graded once per kernel."""
    process, folder = _started.pop((stage, name, content), None) or _start(stage, name, content)
    try:
        try:
            process.wait(timeout=GRADING_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise NotebookGradingError(f"grading stage {stage} took over {GRADING_SECONDS} s") from None
        report_path = Path(folder.name) / "report.json"
        if not report_path.is_file():
            said = (Path(folder.name) / "stderr.txt").read_text(errors="replace").strip().splitlines()
            raise NotebookGradingError(f"the grader could not run: {(said or ['no reason given'])[-1]}")
        report = read_report(report_path)
    finally:
        folder.cleanup()
    if report is None:
        raise NotebookGradingError("the grader wrote a report that cannot be read")
    return report
