"""pytest's view of the checks: their fixtures, and the evidence a failed check of an attention module carries."""

import pytest

from grader.judge.checks.attention_probe import measured_evidence
from grader.judge.checks.examples import WEIGHT_FUNCTIONS, function_example_failure
from grader.judge.plugin import device, learner, learner_source, reference, stage_of  # noqa: F401 - fixtures
from grader.judge.verdict import CheckFailed

# Checks of what a module or weight function computes (not of how: structure, shortcut, note): when one fails,
# the measured attention map (a weight function's: on its small example) shows what it did, whichever check
# failed first.
RESULT_KINDS = ("document", "example", "random", "property")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    try:
        return (yield)
    except CheckFailed as failed:
        check = item.get_closest_marker("check").kwargs
        learner = item.funcargs.get("learner")
        target = check.get("target") or ""
        if failed.evidence is None and learner is not None and check["name"].split(".")[0] in RESULT_KINDS:
            if target in WEIGHT_FUNCTIONS:  # its small example's map, and the mistake that map proves
                if (example := function_example_failure(learner, stage_of(item), target)) is not None:
                    failed.evidence, failed.hint = example.evidence, failed.hint or example.hint
            else:
                failed.evidence = measured_evidence(learner, stage_of(item), target)
        raise
