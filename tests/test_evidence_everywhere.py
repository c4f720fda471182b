"""Every failed check of what an attention function computes carries a picture: a weight function's small
example (with the mistake it proves) for its hidden checks too, a module's measured weights even when they
are right (the map then says the mistake comes after them), and weights scaled after the softmax."""

from tests.grading import MUTANTS, grade, learner_copy

RESULT_KINDS = ("document", "example", "random")


def failed_results(tmp_path, what: str, target: str) -> list[dict]:
    mutant = next(m for m in MUTANTS if m.get("what") == what or m.get("hint") == what)
    _, report = grade(
        learner_copy(tmp_path / "work", mutant, stages=[mutant["stage"]]), "--stage", str(mutant["stage"])
    )
    checks = report["stages"][0]["checks"]
    found = [
        c for c in checks if c["status"] == "failed" and c["id"].split(".")[0] in RESULT_KINDS and target in c["id"]
    ]
    assert found, f"{what}: no result check of {target} failed"
    return found


def test_a_hidden_check_of_a_weight_function_shows_its_small_example_and_the_mistake_it_proves(tmp_path):
    found = failed_results(
        tmp_path,
        "causal_softmax builds its mask with torch.tril(..., diagonal=1), mixing up the two recipes",
        "causal_softmax",
    )
    hidden = next(c for c in found if c["id"] == "random.causal_softmax")
    assert hidden["evidence"] and "small example" in hidden["evidence"]["title"]
    assert hidden["hint"] == "mask-wrong-triangle"
    assert all(c["evidence"] for c in found)


def test_right_weights_are_shown_as_right_when_the_mistake_comes_after_them(tmp_path):
    for check in failed_results(tmp_path, "missing-out-proj", "MultiHeadAttention"):
        assert check["evidence"], check["id"]
        assert check["evidence"]["expected"] == check["evidence"]["actual"]
        assert "are the expected ones" in check["evidence"]["note"] and "out_proj" in check["evidence"]["note"]


def test_weights_scaled_after_the_softmax_are_drawn_with_their_row_sums(tmp_path):
    cls = "SelfAttention_v2"
    for check in failed_results(tmp_path, f"{cls} divides the weights by sqrt(d_k) after the softmax", cls):
        assert check["evidence"], check["id"]
        assert "row sums 0." in check["evidence"]["note"]
