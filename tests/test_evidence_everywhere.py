"""Every failed check of what an attention function computes carries the picture of its cause: a weight function's
small example (with the mistake it proves) for its hidden checks too, weights scaled after the softmax, and for a
cause after the weights the map of where the output differs."""

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


def test_a_cause_after_the_weights_shows_where_the_output_differs_never_right_weights(tmp_path):
    """Issue 34: beside missing-out-proj (a cause after the weights) no map of the weights, which would say they are
    right and seem to contradict the hint: the checks that compared an output show where it differs."""
    from grader.judge.verdict import OUTPUT_MAP_TITLE

    found = failed_results(tmp_path, "missing-out-proj", "MultiHeadAttention")
    named = [c for c in found if c["hint"] == "missing-out-proj"]  # a one-token case may tell no cause apart
    assert named and {c["hint"] for c in found} <= {"missing-out-proj", None}
    shown = [c["evidence"] for c in named if c["evidence"]]
    assert shown and all(e["title"].startswith(OUTPUT_MAP_TITLE) for e in shown)
    assert not any("are the expected ones" in e["note"] for e in shown)
    assert all(all(v == 0 for row in e["expected"] for v in row) for e in shown)  # expected: no difference


def test_weights_scaled_after_the_softmax_are_drawn_with_their_row_sums(tmp_path):
    cls = "SelfAttention_v2"
    for check in failed_results(tmp_path, f"{cls} divides the weights by sqrt(d_k) after the softmax", cls):
        assert check["evidence"], check["id"]
        assert "row sums 0." in check["evidence"]["note"]
