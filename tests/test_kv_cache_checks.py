"""Stage 7's checks each price one thing: the KV cache's layout is the structure check's alone."""

from tests.grading import MUTANTS, grade, learner_copy


def test_a_cache_in_another_layout_costs_the_structure_check_only_not_use_cache_off(tmp_path):
    """One difference, one check: property.use_cache_off asks only that the cache stay as use_cache=True left it."""
    what = "The cache holds the projected keys and values before the head split, as (b, tokens, d_out)."
    mutant = next(m for m in MUTANTS if m.get("what") == what)
    _, report = grade(learner_copy(tmp_path / "work", mutant, stages=[7]), "--stage", "7")
    status = {c["id"]: (c["status"], c["hint"]) for c in report["stages"][0]["checks"]}
    assert status["property.use_cache_off"][0] == "passed"
    assert status["structure.MultiHeadAttentionKV"] == ("failed", "cache-layout")
