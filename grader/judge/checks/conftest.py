"""pytest's view of the checks: their fixtures, and the evidence a failed check of an attention module carries."""

from typing import cast

import pytest

from grader.core.hints import shown_by_weights
from grader.core.stages import registry
from grader.judge.checks import argument_probe, shape_probe
from grader.judge.checks.attention_probe import measured_evidence
from grader.judge.checks.examples import WEIGHT_FUNCTIONS, function_example_failure
from grader.judge.checks.student_facts import student_facts
from grader.judge.plugin import device, learner, learner_source, reference, stage_of  # noqa: F401 - fixtures
from grader.judge.verdict import CheckFailed, output_difference_evidence
from grader.sandbox.workers import LearnerFailure

# Checks of what a module or weight function computes (not of how: structure, shortcut, note): when one fails,
# the measured attention map (a weight function's: on its small example) shows what it did, whichever check
# failed first.
RESULT_KINDS = ("document", "example", "random", "property")
# Modules whose measured weights are read from one head's output with nothing after it that moves tokens (no
# head merge, no output projection): a weight on a later token there is the mask's doing alone, whatever the
# scores were divided by or normalised over (a softmax over the queries leaves masked weights 0).
READ_STRAIGHT = ("CausalAttention",)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    try:
        return (yield)
    except (CheckFailed, LearnerFailure) as failure:
        if (diagnosed := _shapes_diagnosed(item, failure)) is not None:
            raise diagnosed from None
        if not isinstance(failure, CheckFailed):
            raise
        failed = failure
        # every check is a test function with its @check marker (GradingPlugin.pytest_collection_modifyitems)
        check = cast(pytest.Mark, item.get_closest_marker("check")).kwargs
        learner = cast(pytest.Function, item).funcargs.get("learner")
        target = check.get("target") or ""
        if failed.evidence is None and learner is not None and check["name"].split(".")[0] in RESULT_KINDS:
            if target in WEIGHT_FUNCTIONS:  # its small example's map, and the mistake that map proves
                if (example := function_example_failure(learner, stage_of(item), target)) is not None:
                    failed.evidence, failed.hint = example.evidence, failed.hint or example.hint
            else:
                failed.evidence = measured_evidence(learner, stage_of(item), target)
        if failed.hint is None and target in READ_STRAIGHT and (failed.evidence or {}).get("attends_later"):
            failed.hint = "mask-not-causal"  # its own weights, read on one-hot tokens, fall on later tokens
        if failed.hint is None and learner is not None and check["name"].split(".")[0] in RESULT_KINDS:
            if (ignored := _ignored_argument(learner, stage_of(item), target)) is not None:
                failed.message, failed.hint = f"{failed.message}\n{ignored[0]}", ignored[1]
        _picture_of_the_cause(failed)
        raise


def _ignored_argument(workers, stage: int, target: str) -> tuple[str, str] | None:
    """(the claim, its hint) that ``target`` ignores an argument or gives other results for one call
    (argument_probe), found once per student and function."""
    facts = student_facts(workers)
    if ("argument probe", stage, target) not in facts:
        facts[("argument probe", stage, target)] = argument_probe.ignored_argument(workers, stage, target)
    return facts[("argument probe", stage, target)]


def _diagnosis(workers, stage: int, target: str, check: str, failure: Exception) -> tuple[str, str | None] | None:
    """(the runs in words, or where they are listed; the cause they prove) for ``check``'s ``failure``, where it
    fails as one of the probe's runs did; None elsewhere. A stage's module or function is probed once per student,
    whichever of its checks fails first."""
    facts = student_facts(workers)
    if ("shape probe", stage, target) not in facts:
        facts[("shape probe", stage, target)] = shape_probe.diagnose(workers, stage, target)
    found = facts[("shape probe", stage, target)]
    if found is None or shape_probe.signature(failure) not in found[2]:
        return None  # the check failed some other way than any of the probe's runs: they do not tell its cause
    first = facts.setdefault(("runs shown in", stage, target), check)  # the check whose message lists the runs
    return (found[0] if first == check else shape_probe.RUNS_LISTED_UNDER.format(check=first)), found[1]


def _shapes_diagnosed(item: pytest.Item, failure: Exception) -> CheckFailed | None:
    """``failure`` of a check of a module or function that raised or returned another shape, told by the shape
    probe (the runs that ran and did not, and the cause they prove); None where the probe does not apply, finds
    its own run fine (the check's failure lies in what it alone does), or failed otherwise than the check."""
    # every check is a test function with its @check marker (GradingPlugin.pytest_collection_modifyitems)
    check = cast(pytest.Mark, item.get_closest_marker("check")).kwargs
    workers, stage = cast(pytest.Function, item).funcargs.get("learner"), stage_of(item)
    # a check of several functions (inputs kept, a device note): the one the failed request called
    target = check.get("target") or getattr(failure, "called", None) or ""
    if workers is None or not shape_probe.probed(target) or target not in registry()[stage].names:
        return None
    if not shape_probe.qualifies(failure):
        return None
    found = _diagnosis(workers, stage, target, check["name"], failure)
    if found is None:
        return None
    runs, cause = found
    said = failure.raised_words() if isinstance(failure, LearnerFailure) else cast(CheckFailed, failure).message
    kept = failure.hint if isinstance(failure, CheckFailed) else None
    return CheckFailed(f"{said}\n{runs}", cause or kept)


def _picture_of_the_cause(failed: CheckFailed) -> None:
    """A map of the attention weights only beside a cause that lives in them (hints.toml's picture = "weights") and
    that they show, or beside no named cause. Any other named cause gets the map of where its output differs, when
    the check compared one, else no map: a weights map there would say the weights are right, or read a scrambled
    output as weights, and seem to contradict the hint beside it."""
    if failed.evidence is None or failed.evidence.get("kind") == "output" or failed.hint is None:
        return
    if shown_by_weights(failed.hint) and not failed.evidence.get("matches"):
        return  # a cause in the weights, beside weights that show it
    failed.evidence = output_difference_evidence(*failed.compared) if failed.compared is not None else None
