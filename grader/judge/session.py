"""A grading session: the checks, run by pytest against each student's workers, become reports."""

from collections.abc import Callable, Iterator

import pytest
import torch

from grader.core.options import GradingOptions
from grader.core.report import Flag, FlagKind, Report, build, counts_as_extra
from grader.core.stages import BONUS, STAGE_MODULES, registry
from grader.intake.submission import SubmissionFiles
from grader.judge.plugin import GradingPlugin, run_checks
from grader.judge.routes_off import SWITCHED_OFF_BY_STAGE
from grader.judge.voiding import void_shortcut_targets, void_without_results
from grader.runner.escaping import listing
from grader.sandbox.workers import LearnerWorkers
from grader.sandbox.zygote import Sandbox

MAX_LISTED = 20  # names of ignored files a flag lists


class GradingError(RuntimeError):
    """The checks themselves could not run: a fault of the grader, not of the submission."""


def grade_staged(sandbox: Sandbox, staged: SubmissionFiles, options: GradingOptions) -> Report:
    """The report (grader/core/schemas/report.schema.json) for the student staged in ``sandbox``."""
    reports: list[Report] = []
    grade_each(sandbox, iter([staged]), reports.append, options)
    return reports[0]


def grade_each(
    sandbox: Sandbox, students: Iterator[SubmissionFiles], deliver: Callable[[Report], None], options: GradingOptions
) -> None:
    """Grade ``options.stages`` of each of ``students`` in ``sandbox``, one after another, in one pytest
    session, and ``deliver`` each report as soon as it is ready."""
    # The judge's tensors are tiny: a second intra-op thread only spins, taking a core from the
    # workers and from the other lanes of a batch (more than half of the judge's CPU time).
    torch.set_num_threads(1)
    grading = GradingPlugin(None, sandbox.device, options)
    loop = _StudentLoop(grading, sandbox, students, deliver, options)
    exit_code, pytest_output = run_checks(grading, plugins=[loop])
    if exit_code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) or not loop.ran:
        raise GradingError(f"the checks could not run (pytest exit {int(exit_code)}):\n{pytest_output[-2000:]}")


class _StudentLoop:
    """pytest's run loop, once per student: configuration and collection are paid once per session."""

    def __init__(
        self,
        grading: GradingPlugin,
        sandbox: Sandbox,
        students: Iterator[SubmissionFiles],
        deliver: Callable[[Report], None],
        options: GradingOptions,
    ):
        self.grading, self.sandbox, self.students = grading, sandbox, students
        self.deliver, self.options = deliver, options
        self.ran = False

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        if session.testsfailed:
            return None  # a collection error: pytest's own loop reports it
        self.ran = True
        items = session.items
        for staged in self.students:
            if not self.sandbox.alive:  # a failure of the grader's own: a fresh zygote for the next student
                self.sandbox.restart()
            options = self.options
            with LearnerWorkers(
                self.sandbox, staged.files, options.timeout, list(options.stages), options.budget, SWITCHED_OFF_BY_STAGE
            ) as learner:
                self.grading.begin_student(learner, staged)
                # nextitem=None after the last check tears every fixture down: none outlives its student
                for index, item in enumerate(items):
                    nextitem = items[index + 1] if index + 1 < len(items) else None
                    item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
            out_of_time = [_out_of_time(learner)] if learner.out_of_time else []
            grading = self.grading
            stages = list(grading.options.stages)
            for stage in stages:
                own = [result for result in grading.results if result.stage == stage]
                void_shortcut_targets(own)
                void_without_results(own)
            self.deliver(
                build(
                    grading.results,
                    stages,
                    self.sandbox.device,
                    torch.__version__,
                    flags(self.sandbox, staged, required(stages, grading.options), grading.options, grading.disrupted)
                    + out_of_time,
                    self.sandbox.isolation,
                    grading.options.extra_credit,
                )
            )
        return True


def _out_of_time(learner: LearnerWorkers) -> Flag:
    not_run = f"; {learner.not_run} calls were not run" if learner.not_run else ""
    return Flag(FlagKind.OUT_OF_TIME, f"your code used all of its {learner.budget:g} s for all calls{not_run}")


def required(stages: list[int], options: GradingOptions) -> list[int]:
    """The graded stages whose missing file is flagged: all, but for bonus stages counted as extra credit beside
    the core (grader.core.report.counts_as_extra), which a student may leave out at no cost."""
    if not counts_as_extra({registry()[stage].track for stage in stages}, options.extra_credit):
        return stages
    return [stage for stage in stages if registry()[stage].track != BONUS]


def flags(
    sandbox: Sandbox, staged: SubmissionFiles, stages: list[int], options: GradingOptions, disrupted: str | None = None
) -> list[Flag]:
    """What a reader of the score must know: never a silently weaker grade. ``stages``: those whose file must
    be there (required)."""
    found = [] if sandbox.confinement.confined else [Flag(FlagKind.UNSANDBOXED)]
    if disrupted:
        found.append(Flag(FlagKind.INCOMPLETE, disrupted))
    if options.visible_only:
        found.append(Flag(FlagKind.PROVISIONAL))
    if staged.problem:
        found.append(Flag(FlagKind.UNREADABLE, staged.problem))
    elif not staged.files:  # what was there instead says what went wrong: a wrong file, a wrong folder
        found.append(
            Flag(
                FlagKind.NO_STAGE_FILES,
                f"found {listing(staged.ignored, MAX_LISTED)}" if staged.ignored else "the submission is empty",
            )
        )
    else:
        # a stage graded without its file scores nothing: say so where the score is read, not only in its checks
        if missing := [f"{STAGE_MODULES[s]}.py" for s in stages if f"{STAGE_MODULES[s]}.py" not in staged.files]:
            found.append(Flag(FlagKind.MISSING, listing(missing, MAX_LISTED)))
        if staged.renamed:
            found.append(Flag(FlagKind.RENAMED, listing(staged.renamed, MAX_LISTED)))
        if staged.ignored:
            found.append(Flag(FlagKind.IGNORED, listing(staged.ignored, MAX_LISTED)))
    return found
