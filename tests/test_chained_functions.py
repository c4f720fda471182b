"""A function the worked examples run on another function's output is not blamed for that function's
mistake: where the chain raises because a value before it is wrong, it is judged on its own inputs."""

from tests.grading import MUTANTS, grade, learner_copy


def test_a_wrong_attention_scores_does_not_make_a_right_context_vector_fail(tmp_path):
    mutant = next(m for m in MUTANTS if m.get("what", "").startswith("attention_scores turns the query into a column"))
    _, report = grade(learner_copy(tmp_path / "work", mutant, stages=[1]), "--stage", "1")
    checks = {c["id"]: c for c in report["stages"][0]["checks"]}
    assert checks["document.attention_scores"]["status"] == "failed"
    # the book's chain multiplies context_vector's (6, 1) weights by the inputs and raises: not its fault
    assert checks["document.context_vector"]["status"] == "passed", checks["document.context_vector"]["message"]
    assert "your code raised" not in "".join(c["message"] for c in checks.values() if "context_vector" in c["id"])


def test_a_stage_whose_file_is_missing_is_excused_nothing(tmp_path):
    """The excuse is for a target given another function's wrong output: a file that is not there, whose every
    function raises, earns nothing through it, graded beside the stages it is missing from."""
    _, report = grade(learner_copy(tmp_path / "work", stages=[1]))
    assert {s["id"]: s["score"] for s in report["stages"]} == {
        "stage1": 20,
        "stage2": 0,
        "stage3": 0,
        "stage4": 0,
        "stage5": 0,
    }
