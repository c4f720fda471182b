"""pytest's view of the checks: their fixtures, and the evidence a failed check of an attention module carries."""

import pytest

from grader.judge.checks.attention_probe import measured_evidence
from grader.judge.plugin import device, learner, learner_source, reference, stage_of  # noqa: F401 - fixtures
from grader.judge.verdict import CheckFailed

# Checks of what a module computes (not of how: structure, shortcut, note): when one fails, the module's
# measured attention map shows what it did, whichever check failed first.
RESULT_KINDS = ("document", "example", "random", "property")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    try:
        return (yield)
    except CheckFailed as failed:
        check = item.get_closest_marker("check").kwargs
        learner = item.funcargs.get("learner")
        if failed.evidence is None and learner is not None and check["name"].split(".")[0] in RESULT_KINDS:
            failed.evidence = measured_evidence(learner, stage_of(item), check.get("target") or "")
        raise
