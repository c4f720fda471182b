"""The mutation suite, graded as two classes (full grader, and the release's visible checks only).

Every mutant must lose points in its own stage only, and no failed check may name a mistake
outside the mutant's truthful set; the suite's figures must meet the targets of issue 13.
"""

import re

import pytest

from tests.mutation import ALTERNATIVES, MUTANTS, figures, grade_mutants, nameable, truthful


def _id(mutant: dict) -> str:
    return f"stage{mutant['stage']}-" + re.sub(r"[^a-z0-9]+", "-", (mutant.get("what") or mutant["hint"]).lower())[:60]


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    return grade_mutants(tmp_path_factory.mktemp("full"))


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    return grade_mutants(tmp_path_factory.mktemp("release"), "--visible-only")


# Each class of mutants is graded once, in the first test that needs it: a batch of several hundred students,
# longer than pytest-timeout's default on a busy 2-core machine.
CLASS_GRADING = pytest.mark.timeout(1500)


@CLASS_GRADING
@pytest.mark.parametrize("index", range(len(MUTANTS)), ids=[_id(m) for m in MUTANTS])
def test_a_mutant_loses_points_in_its_stage_only_and_is_never_misnamed(full, index):
    verdict = full[index]
    assert verdict.caught, f"stage {verdict.mutant['stage']} lost nothing"
    assert verdict.leaked == [], f"other stages lost points: {verdict.leaked}"
    assert verdict.wrong_hints == set(), f"hints outside {sorted(truthful(verdict.mutant))}: {verdict.wrong_hints}"
    if "hint" in verdict.mutant:  # the older entries each pin the one hint they were written for
        assert verdict.mutant["hint"] in verdict.hints


@CLASS_GRADING
def test_the_release_view_never_misnames(release):
    wrong = {_id(v.mutant): v.wrong_hints for v in release if v.wrong_hints}
    assert wrong == {}


@CLASS_GRADING
def test_the_suite_meets_its_targets(full, release):
    whole, visible = figures(full), figures(release)
    print(whole.line("full grader"), visible.line("release view"), sep="\n")
    assert whole.misnamed == 0 and visible.misnamed == 0
    assert whole.faults == 0 and visible.faults == 0  # a mistake never meets an error of the grader's own
    assert whole.named >= 0.95 * whole.nameable  # issue 24
    assert visible.caught >= 0.95 * visible.mutants and visible.named >= 0.9 * visible.nameable  # issue 34


def test_the_suite_is_large_and_each_entry_is_sound():
    from grader.core.hints import catalog

    assert len(MUTANTS) >= 80 and len(ALTERNATIVES) >= 15
    for mutant in MUTANTS:
        assert truthful(mutant) <= catalog().keys(), mutant
        assert nameable(mutant) == bool(truthful(mutant)), mutant


SEED_FILE = re.compile(r"\b00[0-4]_[0-9a-f]{16}")
VALUE_LINE = re.compile(r"^(book section|book exercise|exercise|a further example)", re.IGNORECASE | re.MULTILINE)


@CLASS_GRADING  # under xdist, whichever test of a worker asks first grades the class
def test_feedback_cites_the_book_and_lists_at_most_three_values(full):
    for verdict in full:
        for stage in verdict.report["stages"]:
            for check in stage["checks"]:
                assert not SEED_FILE.search(check["message"]), check["message"]
                assert len(VALUE_LINE.findall(check["message"])) <= 3, check["message"]


# What a picture of attention weights cannot show: stage 1's scores and context vectors, stage 3's transfer.
NOT_WEIGHTS = ("attention_scores", "context_vector", "transfer")
# A stage whose code gives results of another shape, or cannot hold the weights a probe puts in, has no map to
# read; a function that calls torch's own attention never returned a result of its own.
NO_MAP_TO_READ = ("expected shape", "holds weights of other shapes than documented")


@CLASS_GRADING  # under xdist, whichever test of a worker asks first grades the class
def test_every_failed_result_of_attention_weights_carries_a_picture(full):
    """Issue 24: a failed document, example or random check of a function or module that computes attention
    weights carries evidence (a heat map), unless the function never returned a result a map can hold. Issue 34:
    that holds where no cause is named; a named cause shows a map only where the map shows it (a weights map for
    a cause in the weights that the probe's weights reveal, else where the output differs, else none), and a
    crash or wrong shape shows the runs of the shape probe instead."""
    from grader.judge.checks.shape_probe import RUNS_HEADING, RUNS_LISTED_UNDER

    missing = []
    for verdict in full:
        for stage in verdict.report["stages"]:
            if any(reason in c["message"] for c in stage["checks"] for reason in NO_MAP_TO_READ):
                continue
            for c in stage["checks"]:
                kind, _, target = c["id"].partition(".")
                if (
                    kind in ("document", "example", "random")
                    and c["status"] == "failed"
                    and target not in NOT_WEIGHTS
                    and c["hint"] is None  # a named cause shows a map only where the map shows it (issue 34)
                    and RUNS_HEADING not in c["message"]
                    and RUNS_LISTED_UNDER.partition("{")[0] not in c["message"]
                    and not c["evidence"]
                ):
                    missing.append(f"{_id(verdict.mutant)}: {c['id']}")
    assert missing == []


# What a weights map says when it shows no mistake of the weights.
SAYS_WEIGHTS_RIGHT = "are the expected ones"


def pictures_contradicting_hints(verdicts) -> list[str]:
    """Each failed check whose picture contradicts its hint: a weights map beside a named cause that is not in the
    weights (hints.toml's picture), or one saying the weights are right beside a cause that is in them."""
    from grader.core.hints import shown_by_weights
    from grader.judge.verdict import OUTPUT_MAP_TITLE

    found = []
    for verdict in verdicts:
        for stage in verdict.report["stages"]:
            for check in stage["checks"]:
                evidence, hint = check.get("evidence"), check["hint"]
                if check["status"] == "passed" or not evidence or hint is None:
                    continue
                output_map = evidence["title"].startswith(OUTPUT_MAP_TITLE)
                wrong = (not shown_by_weights(hint) and not output_map) or (
                    shown_by_weights(hint) and SAYS_WEIGHTS_RIGHT in evidence["note"]
                )
                if wrong:
                    found.append(f"{_id(verdict.mutant)} {check['id']} [{hint}]: {evidence['title']}")
    return found


@CLASS_GRADING  # under xdist, whichever test of a worker asks first grades the class
def test_no_picture_contradicts_its_hint(full, release):
    """Over the whole suite, both views (issue 34): a weights map only beside a cause in the weights."""
    assert pictures_contradicting_hints(full) == []
    assert pictures_contradicting_hints(release) == []


@CLASS_GRADING  # under xdist, whichever test of a worker asks first grades the class
def test_crashes_and_wrong_shapes_are_named_in_both_views(full, release):
    """Issue 34: each mutant that raises or returns another shape on some documented sizes (`shape = true`) is
    named with a proven hint by the full grader and by the release's visible checks alike."""
    shape = [index for index, mutant in enumerate(MUTANTS) if mutant.get("shape")]
    assert len(shape) >= 15
    for view in (full, release):
        unnamed = [_id(view[index].mutant) for index in shape if not view[index].named]
        assert unnamed == []
