"""The pytest plugin of a grading run: fixtures for the checks, and one verdict per check."""

import contextlib
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import pytest

from grader.core.options import GradingOptions
from grader.core.points import Points
from grader.core.report import CheckResult, Status
from grader.core.stages import STAGE_MODULES
from grader.intake.submission import SubmissionFiles
from grader.judge import drawn_inputs
from grader.judge.evidence import bounded_evidence
from grader.judge.exception_hints import hint_for_exception, refused_call
from grader.judge.routes_off import SWITCHED_OFF_BY_TARGET
from grader.judge.verdict import CheckFailed
from grader.runner.implementation import Implementation, load_package
from grader.runner.routes import RouteSwitchedOff
from grader.runner.seeding import manual_seed
from grader.sandbox.printed import PrintedOutput
from grader.sandbox.workers import LearnerFailure, LearnerWorkers
from grader.sandbox.zygote import SandboxError

CHECKS_DIR = Path(__file__).with_name("checks")
# The checks report through CheckFailed, so pytest's assertion rewriting (slow) is not needed.
# Learner code never runs in this process, so the end-of-session gc sweeps for unraisable
# exceptions (0.2 s) have nothing to find either, and the plugins that watch a test's logging,
# warnings, output or temporary files (a third of a batch's time) have nothing to watch.
# A batch lane's session holds every check of its students: pytest's end-of-session list of
# failures, one section each, searches all reports for each one (6.7 s for 90 students, and
# quadratic); --tb=line makes it a line each, and -rN leaves out the short summary repeating it.
UNUSED_PLUGINS = [
    "cacheprovider",
    "unraisableexception",
    "threadexception",
    "logging",
    "warnings",
    "capture",
    "doctest",
    "junitxml",
    "pastebin",
    "stepwise",
    "legacypath",
    "tmpdir",
    "monkeypatch",
    "recwarn",
    "setuponly",
    "setupplan",
    "faulthandler",
    "subtests",
    "unittest",
]
CHECK_ARGS = [
    "-c",
    str(CHECKS_DIR / "pytest.ini"),
    "--rootdir",
    str(CHECKS_DIR),
    *[arg for name in UNUSED_PLUGINS for arg in ("-p", f"no:{name}")],
    "-p",
    "pytest_timeout",
    "--assert=plain",
    "-q",
    "--tb=line",
    "-rN",
    str(CHECKS_DIR),
]

# How a learner failure reads as a check status and a catalog hint.
FAILURE_STATUS = {
    "import_error": (Status.ERROR, "import-error"),
    "timeout": (Status.TIMEOUT, "timeout"),
    "crash": (Status.ERROR, "crash"),
    "memory": (Status.ERROR, "memory-limit"),
    "forbidden_import": (Status.ERROR, "forbidden-import"),
}
# Told to a learner whose code ran out of time after printing past what a report shows.
PRINTING_IS_SLOW = (
    "your code printed a lot while it ran: printing takes time, so print less "
    "(not inside loops) and it may finish in time"
)
# What a check's calls printed is shown for these statuses only: a passed check needs no debugging.
# How the grader's own words begin where the book's code, run on the learner's classes, cannot go on
# (grader.runner.book_calls, grader.runner.document_examples): no line of the learner's raised them.
BOOK_CODE_WORDS = ("the book's code ", "the grader builds ")
SHOWS_PRINTED = {Status.FAILED, Status.ERROR, Status.TIMEOUT}


@dataclass(frozen=True)
class PlannedCheck:
    stage: int
    id: str
    visibility: str
    points: float


class GradingPlugin:
    """Registered as "grading"; the checks reach it through the fixtures below.

    ``sources``: the current student's stage files as the judge staged them (stage -> bytes, None
    for a missing file), for the checks that must not take the worker's word; begin_student sets it
    for each student, with the student's workers.
    """

    def __init__(self, learner: LearnerWorkers | None, device: str, options: GradingOptions):
        self.learner = learner
        self.device = device
        self.options = options
        self.sources: dict[int, bytes | None] = {}
        self.results: list[CheckResult] = []
        self.planned: list[PlannedCheck] = []
        self.disrupted: str | None = None  # why the current student's grading did not complete, if it did not
        self.salt = b""  # what the current student's hidden checks draw from (grader.judge.drawn_inputs)

    def begin_student(self, learner: LearnerWorkers, staged: SubmissionFiles) -> None:
        """Grade ``staged`` next, through ``learner``: nothing of the student before stays."""
        self.learner, self.results, self.disrupted = learner, [], None
        # the judge's own copy of the stage files, for the checks that must not take the worker's word
        self.sources = source_files(staged)
        self.salt = drawn_inputs.student_salt(self.options.inputs_key, staged)

    def pytest_collection_modifyitems(self, config, items):
        kept, dropped = [], []
        for item in items:
            marker = item.get_closest_marker("check")
            if marker is None:
                raise pytest.UsageError(f"{item.nodeid} has no @check marker")
            stage = stage_of(item)
            shown = marker.kwargs["visibility"] == "visible" or not self.options.visible_only
            if stage in self.options.stages and shown:
                kept.append(item)
                self.planned.append(
                    PlannedCheck(
                        stage,
                        marker.kwargs["name"],
                        marker.kwargs["visibility"],
                        self.options.points.of(stage, marker.kwargs["name"]),
                    )
                )
            else:
                dropped.append(item)
        # Every visible check of every stage runs before any hidden one, so that nothing a hidden check gave
        # the learner's code (an input it kept, a file it wrote, a worker it hung) can reach a visible
        # check's message, printed output or score, which students read before hidden results are shown.
        kept.sort(key=lambda item: item.get_closest_marker("check").kwargs["visibility"] != "visible")
        self.planned.sort(key=lambda check: check.visibility != "visible")
        items[:] = kept
        config.hook.pytest_deselected(items=dropped)

    def pytest_runtest_setup(self, item) -> None:
        hidden = item.get_closest_marker("check").kwargs["visibility"] != "visible"
        drawn_inputs.use(self.salt if hidden else b"")
        # A check that draws from torch's global generator draws the same numbers for every student, whatever
        # the checks before it drew (their number follows the earlier students' code in a batch lane).
        manual_seed(drawn_inputs.seed(item.nodeid))  # not torch's: it formats a stack trace a call
        if self.learner is not None:
            self.learner.printed.reset()  # each check shows what its own calls printed
            target = item.get_closest_marker("check").kwargs.get("target")
            self.learner.checked = SWITCHED_OFF_BY_TARGET.get((stage_of(item), target))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item, call) -> pytest.TestReport | None:
        """Record our verdict; hand pytest a plain report. Its own would format a full traceback
        for every failed check, which no one reads and which took most of the time of grading a stub."""
        excinfo = call.excinfo
        if excinfo is not None and isinstance(excinfo.value, pytest.skip.Exception):
            return None  # pytest's own report
        if call.when == "call" or (call.when == "setup" and excinfo is not None):
            self.results.append(self._verdict(item, excinfo))
        return pytest.TestReport(
            item.nodeid,
            item.location,
            {},
            "passed" if excinfo is None else "failed",
            None if excinfo is None else str(excinfo.value),
            call.when,
            duration=call.duration,
            start=call.start,
            stop=call.stop,
        )

    def _verdict(self, item, excinfo) -> CheckResult:
        marker = item.get_closest_marker("check").kwargs
        stage = stage_of(item)
        worth = self.options.points.of(stage, marker["name"])
        status, message, hint = _classify(excinfo)
        if excinfo is not None and isinstance(excinfo.value, SandboxError):
            self.disrupted = self.disrupted or str(excinfo.value)
        elif status == Status.ERROR and message.startswith(GRADER_FAULTS):  # the judge's own (a MemoryError)
            self.disrupted = self.disrupted or f"{marker['name']}: {message}"
        # checks run only once begin_student has given the plugin a learner
        printed = cast(LearnerWorkers, self.learner).printed if status in SHOWS_PRINTED else None
        if status == Status.TIMEOUT and cast(PrintedOutput, printed).a_lot:  # TIMEOUT is in SHOWS_PRINTED
            message += f"\n{PRINTING_IS_SLOW}"
        verdict = excinfo.value if excinfo is not None and isinstance(excinfo.value, CheckFailed) else None
        return CheckResult(
            stage=stage,
            id=marker["name"],
            visibility=marker["visibility"],
            target=marker.get("target"),
            status=status,
            score=worth if status == Status.PASSED else 0,
            max_score=worth,
            message=message,
            hint=hint,
            evidence=bounded_evidence(cast(dict | None, verdict and verdict.evidence)),
            printed="" if printed is None else printed.text(),
            warned="" if printed is None else printed.warned(),
            from_source=verdict is not None and verdict.from_source,
            some_right=verdict is not None and verdict.some_right,
        )


# How a check that erred through the grader's fault, never the learner's, begins its message: the artefact
# tests assert that correct code shows none, wherever it is graded.
GRADER_FAULTS = ("not graded: the grader failed", "the grader could not finish this check")
EVIDENCE_FAULT = "the grader could not draw this check's evidence"  # a verdict kept, its picture lost


def run_checks(plugin: GradingPlugin, *extra_args: str, plugins: tuple | list = ()) -> tuple[int, str]:
    """pytest over the checks with ``plugin`` (and ``plugins``): its exit code and what it printed."""
    # Only the plugins grading needs: whatever else is installed must not change a grade.
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    output = io.StringIO()
    with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
        exit_code = pytest.main([*CHECK_ARGS, *extra_args], plugins=[plugin, *plugins])
    return exit_code, output.getvalue()


def source_files(staged: SubmissionFiles) -> dict[int, bytes | None]:
    """Each stage file of ``staged`` as the judge staged it (None where it is missing): GradingPlugin.sources."""
    return {stage: staged.files.get(f"{module}.py") for stage, module in STAGE_MODULES.items()}


def planned_checks(stages: list[int], points: Points) -> list[PlannedCheck]:
    """Every check of ``stages`` with its visibility and ``points``, as a grading run would collect them."""
    plugin = GradingPlugin(None, "cpu", GradingOptions(tuple(stages), points))
    run_checks(plugin, "--collect-only")
    return plugin.planned


def _plugin(request) -> GradingPlugin:
    return next(p for p in request.config.pluginmanager.get_plugins() if isinstance(p, GradingPlugin))


@pytest.fixture(scope="session")
def learner(request) -> LearnerWorkers:
    return cast(LearnerWorkers, _plugin(request).learner)  # set by begin_student before any check runs


@pytest.fixture(scope="session")
def reference() -> Implementation:
    return load_package("solutions", STAGE_MODULES)


@pytest.fixture(scope="session")
def device(request) -> str:
    return _plugin(request).device


@pytest.fixture
def learner_source(request) -> dict[int, bytes | None]:
    """The current student's stage files, from the judge's own copy: stage -> bytes, None for a missing file."""
    return _plugin(request).sources


def stage_of(item) -> int:
    """The stage a check belongs to: its module is test_stage<N>."""
    return int(item.path.stem.removeprefix("test_stage"))


def _classify(excinfo) -> tuple[Status, str, str | None]:
    if excinfo is None:
        return Status.PASSED, "", None
    error = excinfo.value
    if isinstance(error, CheckFailed):
        return Status.FAILED, error.message, error.hint
    if isinstance(error, LearnerFailure):
        if error.kind == "not_implemented":
            return Status.NOT_IMPLEMENTED, error.message, "not-implemented"
        if error.type == RouteSwitchedOff.__name__:  # a route this check's worker runs without
            return Status.FAILED, f"your code {refused_call(error.message, 'is yours to compute here')}", "banned-api"
        if error.kind in FAILURE_STATUS:
            status, hint = FAILURE_STATUS[error.kind]
            return status, str(error), hint
        if error.where is None and error.message.startswith(BOOK_CODE_WORDS):
            return Status.ERROR, error.message, hint_for_exception(error.message)
        return Status.ERROR, error.raised_words(), hint_for_exception(error.message, at_call=error.where is None)
    if isinstance(error, SandboxError):  # the grader's failure, never the learner's: graded again later
        return Status.ERROR, f"{GRADER_FAULTS[0]} while running your code ({error})", None
    if "Timeout" in type(error).__name__ or "Timeout >" in str(error):
        return Status.TIMEOUT, "the check ran past its time limit", "timeout"
    if isinstance(error, AssertionError):
        return Status.FAILED, str(error), None
    if (verdict := _verdict_under(error)) is not None:  # the picture failed, after the check had failed
        return Status.FAILED, f"{verdict.message}\n({EVIDENCE_FAULT}: {type(error).__name__}: {error})", verdict.hint
    return Status.ERROR, f"{GRADER_FAULTS[1]} ({type(error).__name__}: {error})", None


def _verdict_under(error: BaseException) -> CheckFailed | None:
    """The CheckFailed that ``error`` was raised while handling (the check's verdict, reached before the grader
    failed to draw its evidence), if any: the verdict stands without its picture."""
    seen = error.__context__
    while seen is not None and not isinstance(seen, CheckFailed):
        seen = seen.__context__
    return seen


def grader_faults(report: dict) -> list[str]:
    """The checks of ``report`` that erred through the grader's own fault, each as 'id: message'."""
    return [
        f"{c['id']}: {c['message']}"
        for s in report["stages"]
        for c in s["checks"]
        if (c["status"] == Status.ERROR and c["message"].startswith(GRADER_FAULTS)) or EVIDENCE_FAULT in c["message"]
    ]
