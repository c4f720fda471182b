"""The shape probe (grader/judge/checks/shape_probe.py): which runs prove which cause, and what a learner reads.

The rules are data; these tests pin what each pattern of runs that work may and may not claim, and grade a
few crashes end to end, in the full grader and in the release's visible view.
"""

import pytest

from grader.core.hints import catalog
from grader.judge.checks import shape_probe
from grader.judge.checks.probe_sizes import (
    DOUBLED_RUN,
    EXAMPLE_RUN,
    FULL_MASK_RUN,
    NO_LEADING_RUN,
    ONE_FEATURE,
    SQUARE_MATRIX_RUN,
    VALUE_WIDTH_RUN,
)
from grader.judge.checks.shape_probe import RUNS_HEADING
from grader.judge.checks.shape_rules import CLAIMS, RULES
from tests.grading import MUTANTS, grade, learner_copy


def cause(ran: set[str]) -> str | None:
    return next((hint for hint, needed, allowed in RULES if needed <= frozenset(ran) <= needed | allowed), None)


@pytest.mark.parametrize(
    "ran, named",
    [
        ({"d_in = d_out"}, "d-in-for-d-out"),
        ({"d_in = d_out", "d_in a multiple of num_heads", "one head"}, "d-in-for-d-out"),  # an assert on d_in
        ({"tokens = context_length", EXAMPLE_RUN}, "mask-not-truncated"),
        ({"one head"}, "heads-width-wrong"),
        ({"num_heads = num_kv_groups²", "one head"}, "kv-repeat-count"),
        ({"a batch of one"}, "batch-fixed"),
        ({EXAMPLE_RUN}, "sizes-hard-coded"),
        ({"6 tokens, as in the worked example", EXAMPLE_RUN}, "sizes-hard-coded"),
        ({"a mask without leading dimensions, (L, S)", "no mask"}, "mask-leading-dims"),
        ({"a mask without leading dimensions, (L, S)", "no mask", NO_LEADING_RUN}, "mask-leading-dims"),
        ({NO_LEADING_RUN, "no mask"}, "leading-dims"),
        ({NO_LEADING_RUN, SQUARE_MATRIX_RUN, "no mask"}, "leading-dims"),  # matrices of any L and S run
        # L paired with S: a (..., L) flag without keepdim runs on square matrices alone, an L x L mask wherever L == S
        ({SQUARE_MATRIX_RUN}, "queries-for-keys"),
        ({"as many queries as keys", SQUARE_MATRIX_RUN}, "queries-for-keys"),
        # the flag computed only where a mask is given (the fully masked rows): the unmasked run succeeds too
        ({SQUARE_MATRIX_RUN, "no mask"}, "queries-for-keys"),
        ({"as many queries as keys", SQUARE_MATRIX_RUN, "no mask"}, "queries-for-keys"),
        ({SQUARE_MATRIX_RUN, "no mask", NO_LEADING_RUN}, "leading-dims"),  # matrices of any L and S run
        # a group index divided by num_kv_groups also runs where every group is one head
        ({"num_heads = num_kv_groups²", "one head", "as many key/value groups as heads"}, "kv-repeat-count"),
        ({ONE_FEATURE, EXAMPLE_RUN, DOUBLED_RUN}, "heads-width-wrong"),  # heads merged one feature each
        ({"one head", ONE_FEATURE}, "heads-width-wrong"),
        ({FULL_MASK_RUN, "no mask", NO_LEADING_RUN}, "mask-leading-dims"),  # scores[~mask] = ...
        ({VALUE_WIDTH_RUN}, "value-width"),
        ({VALUE_WIDTH_RUN, "no mask"}, None),  # the mask matters too: no one cause
        ({FULL_MASK_RUN}, "mask-leading-dims"),
        # runs that prove nothing one cause explains: no name
        (set(), None),
        ({"d_in = d_out", "one head"}, None),
        ({"a batch of one", "one head"}, None),
        ({"no mask"}, None),
        ({"tokens = context_length", "d_in = d_out"}, None),
        # the example's sizes doubled keep every relation between them: running there too proves a relation,
        # not a number (a divisibility test written the wrong way round runs wherever d_out == num_heads)
        ({EXAMPLE_RUN, DOUBLED_RUN}, None),
        ({"6 tokens, as in the worked example", EXAMPLE_RUN, DOUBLED_RUN}, None),
        ({"tokens = context_length", EXAMPLE_RUN, DOUBLED_RUN}, "mask-not-truncated"),
    ],
)
def test_a_cause_is_named_only_for_the_runs_its_rule_allows(ran, named):
    assert cause(ran) == named


def test_every_cause_the_probe_names_is_in_the_catalog_and_says_its_claim():
    named = {hint for hint, _, _ in RULES} | {"wrapper-head-size", "wrapper-concat-dim", "kv-projection-size"}
    named |= {"returns-tuple"}
    named |= {"kv-heads-count", "input-length-refused"}  # what a run's own error tells beside its rule
    assert named <= catalog().keys()
    assert named <= CLAIMS.keys()
    # every run a rule names is a run the probe makes
    made = set(shape_probe.VARIATIONS) | {name for probe in shape_probe.FUNCTIONS.values() for name in probe.variations}
    assert {run for _, needed, allowed in RULES for run in needed | allowed} <= made


def _mutant(words: str) -> dict:
    return next(m for m in MUTANTS if words in m.get("what", ""))


@pytest.mark.parametrize("visible", [False, True])
def test_a_merge_over_d_in_is_told_by_the_runs_that_work(tmp_path, visible):
    """What a learner reads: the base run's error, each run with ✓ or ✗, the claim, the hint; no weights map."""
    folder = learner_copy(tmp_path / "work", _mutant(".view(b, num_tokens, d_in), right only when"), stages=[5])
    result, report = grade(folder, "--stage", "5", *(["--visible-only"] if visible else []))
    text = result.stdout
    assert RUNS_HEADING in text and "hint [d-in-for-d-out]" in text
    assert "✓ d_in = d_out: MultiHeadAttention(6, 6, 7, 0, 3) on x (3, 5, 6): returned (3, 5, 6)" in text
    assert "✗ MultiHeadAttention(4, 6, 7, 0, 3) on x (3, 5, 4): raised RuntimeError" in text
    assert text.count(RUNS_HEADING) == 1  # the runs once; later checks point to them
    diagnosed = [c for s in report["stages"] for c in s["checks"] if c["hint"] == "d-in-for-d-out"]
    assert diagnosed and all(c["evidence"] is None for c in diagnosed)


def test_right_code_is_never_probed(tmp_path):
    """The probe runs only for a failure; a module whose base run works is left to its check's own words."""
    _, report = grade(learner_copy(tmp_path / "work", stages=[5]), "--stage", "5")
    assert report["score"] == report["max_score"]
    assert not any(RUNS_HEADING in c["message"] for s in report["stages"] for c in s["checks"])


def test_an_exception_names_the_judge_call_that_raised_it(tmp_path):
    """Where a learner's function raises, the message says which of the judge's calls it was, in shapes."""
    folder = learner_copy(tmp_path / "work", stages=[1])
    path = folder / "stage1_softmax.py"
    text = path.read_text()
    right = "    return attn_weights @ inputs  # (num_tokens,) @ (num_tokens, d_in) -> (d_in,)"
    assert text.count(right) == 1
    path.write_text(text.replace(right, "    return attn_weights @ inputs.view(-1, 3)"))
    _, report = grade(folder, "--stage", "1")
    raised = [c for s in report["stages"] for c in s["checks"] if c["message"].startswith("your code raised")]
    assert raised and any("\nthe call that raised: context_vector((" in c["message"] for c in raised)
