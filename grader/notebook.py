"""The grader from inside a Jupyter notebook of the nbgrader course (grader/authoring/nbgrader/course.py).

Each stage notebook's answer cell starts with ``%%writefile stage<N>_<topic>.py``: running it saves
the cell as the same file the ``.py`` exercise is. ``load`` imports that file into the notebook, and
has it graded by the kernel's grading server (``python -m grader.cli.serve``, a separate, sandboxed
process started by the kernel's first grading: the kernel never judges anything) while the import
runs; ``check`` reads that grading (or grades the file anew when it has changed since), prints one
line per check and returns the points earned, which nbgrader takes as the test cell's partial
credit. The kernel runs the student's cells too, so it only ever receives the report as a student
may read it (the student's view): hidden checks' verdicts and hints, never their data, which
nothing in the kernel could then print into nbgrader's feedback.
"""

import atexit
import collections
import importlib
import json
import queue
import subprocess
import sys
import tempfile
import threading
import time
from functools import cache
from pathlib import Path
from types import ModuleType

from grader.cli.serve import DONE
from grader.core.report import Report
from grader.core.report import read as read_report
from grader.core.stages import STAGE_MODULES
from grader.runner.implementation import SUBMISSION_PACKAGE, register_package
from grader.views.notebook import HIDDEN_LATER, NOT_BESIDE, SUMMARY, verdict_lines

GRADING_SECONDS = 240  # one stage's grading, the server's start included; a correct one takes about 2 s


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
    graded = next(s for s in report["stages"] if s["id"] == f"stage{stage}")  # the server grades every stage
    checks = [c for c in graded["checks"] if (c["visibility"] == "hidden") == hidden]
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


class _Server:
    """The kernel's one ``python -m grader.cli.serve``: torch, pytest and the judge are imported once, however
    many stages the kernel grades (nbgrader's autograde runs a student's notebooks in one kernel:
    grader.authoring.nbgrader.shared_kernel). Requests are answered in the order they were sent; a reader thread
    takes the answers, so that waiting for one has a time limit on every platform."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "grader.cli.serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.answers: queue.Queue[str | None] = queue.Queue()
        self.said: collections.deque[str] = collections.deque(maxlen=1)  # the last line it wrote to stderr
        threading.Thread(target=self._read, daemon=True).start()
        self.errors = threading.Thread(target=self._read_errors, daemon=True)
        self.errors.start()
        self.sent: list[tuple] = []  # the keys of the requests not answered yet, in order
        self.answered: dict[tuple, str] = {}
        atexit.register(self.stop)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.answers.put(line.strip())
        self.answers.put(None)  # the server ended

    def _read_errors(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            if line.strip():
                self.said.append(line.strip())

    def send(self, key: tuple, folder: Path) -> None:
        assert self.process.stdin is not None
        request = {"folder": str(folder / "submission"), "report": str(folder / "report.json")}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        self.sent.append(key)

    def answer(self, key: tuple, seconds: float) -> str:
        """The server's answer to the request of ``key``: "done" or "error: ..."; NotebookGradingError when it
        ends or takes more than ``seconds``."""
        deadline = time.monotonic() + seconds
        while key not in self.answered:
            try:
                line = self.answers.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.stop()
                raise NotebookGradingError(f"grading stage {key[0]} took over {GRADING_SECONDS} s") from None
            if line is None:
                self.stop()
                self.errors.join(timeout=1)  # the last of stderr, read by its thread until the pipe closes
                raise NotebookGradingError(f"the grader could not run: {(list(self.said) or ['no reason given'])[-1]}")
            self.answered[self.sent.pop(0)] = line
        return self.answered.pop(key)

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


_server: list[_Server] = []  # the kernel's grading server, started by the first grading


def _serving() -> _Server:
    if not _server or not _server[0].alive:
        _server[:] = [_Server()]
    return _server[0]


# Gradings started ahead by load(), by (stage, file name, content): the folder the server reads and writes.
_started: dict[tuple[int, str, bytes], tempfile.TemporaryDirectory] = {}


def _start(stage: int, name: str, content: bytes) -> tempfile.TemporaryDirectory:
    """The stage file sent to the kernel's grading server in a folder of its own."""
    folder = tempfile.TemporaryDirectory(prefix="notebook-grade-")
    submission = Path(folder.name) / "submission"
    submission.mkdir()
    (submission / name).write_bytes(content)
    _serving().send((stage, name, content), Path(folder.name))
    return folder


def _grade_ahead(stage: int, name: str, content: bytes) -> None:
    """Start grading the file as load() found it, while the kernel imports it (torch): check() then reads the
    report when the file is still the same."""
    if (stage, name, content) not in _started:
        _started[stage, name, content] = _start(stage, name, content)


@cache
def _grade(stage: int, name: str, content: bytes) -> Report:
    """The grader's report for one stage file; the same content is graded once per kernel."""
    key = (stage, name, content)
    folder = _started.pop(key, None) or _start(stage, name, content)
    try:
        said = _serving().answer(key, GRADING_SECONDS)
        report_path = Path(folder.name) / "report.json"
        if said != DONE or not report_path.is_file():
            raise NotebookGradingError(f"the grader could not grade the file: {said.removeprefix('error: ')}")
        report = read_report(report_path)
    finally:
        folder.cleanup()
    if report is None:
        raise NotebookGradingError("the grader wrote a report that cannot be read")
    return report
