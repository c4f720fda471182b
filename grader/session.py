"""One grading session: the checks, run by pytest against one student's workers, become a report."""

import pytest
import torch

from grader.learner import LearnerWorkers
from grader.plugin import GradingPlugin, run_checks
from grader.report import build
from grader.sandbox import Sandbox
from grader.submission import StagedSubmission


class GradingError(RuntimeError):
    """The checks themselves could not run: a fault of the grader, not of the submission."""


def grade_staged(sandbox: Sandbox, staged: StagedSubmission, stages: list[int], visible_only: bool,
                 timeout: float) -> dict:
    """The report (grader/schemas/report.schema.json) for the student staged in ``sandbox``."""
    # The judge's tensors are tiny: a second intra-op thread only spins, taking a core from the
    # workers and from the other lanes of a batch (more than half of the judge's CPU time).
    torch.set_num_threads(1)
    with LearnerWorkers(sandbox, timeout) as learner:
        plugin = GradingPlugin(learner, sandbox.device, stages, visible_only)
        exit_code, pytest_output = run_checks(plugin)
    if exit_code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        raise GradingError(f"the checks could not run (pytest exit {int(exit_code)}):\n"
                           f"{pytest_output[-2000:]}")
    return build(plugin.results, stages, sandbox.device, torch.__version__, flags(sandbox, staged, visible_only),
                 sandbox.confinement.detail)


def flags(sandbox: Sandbox, staged: StagedSubmission, visible_only: bool) -> list[str]:
    """What a reader of the score must know: never a silently weaker grade."""
    found = [] if sandbox.confinement.confined else ["unsandboxed"]
    if visible_only:
        found.append("provisional")
    if staged.problem:
        found.append(f"unreadable: {staged.problem}")
    if staged.ignored:
        found.append("ignored: " + ", ".join(staged.ignored))
    return found
