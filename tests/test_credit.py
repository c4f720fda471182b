"""Code that computes nothing right earns nothing for how it computes it (grader/judge/voiding.py).

A property, structure, shortcut or priced note check judges how a function computes; it earns points only
beside a right result of that function. The worked examples run a function on an earlier function's
results: where those are wrong, the function is judged on its own small example instead of passing."""

from pathlib import Path

import pytest
import torch

from grader.core.report import CheckResult, Status
from grader.judge.verdict import CheckFailed, expect_all_close
from grader.judge.voiding import void_without_results
from tests.grading import grade, learner_copy

ZEROS = Path(__file__).with_name("credit") / "zeros"  # every function returns zeros of the right shape


def result(
    id: str, status: Status, visibility: str = "hidden", target: str | None = "f", score: float = 2
) -> CheckResult:
    passed = status == Status.PASSED
    return CheckResult(1, id, visibility, target, status, score if passed else 0, score, "", None, None, "")


def test_a_skeleton_of_zeros_earns_nothing_and_says_why(tmp_path):
    submission = tmp_path / "zeros"
    submission.mkdir()
    for file in ZEROS.glob("*.py"):
        (submission / file.name).write_text(file.read_text())
    _, report = grade(submission)
    assert report["score"] == 0, [(c["id"], c["score"]) for s in report["stages"] for c in s["checks"] if c["score"]]
    voided = [c for s in report["stages"] for c in s["checks"] if c["hint"] == "results-first"]
    # the checks that passed on their own: its parameters are the book's, its shapes right, no shortcut taken
    assert {c["id"].split(".")[0] for c in voided} >= {"structure", "shortcut", "property"}
    assert all(c["message"].startswith("no credit: ") for c in voided if c["visibility"] == "visible")


def test_a_right_function_after_a_wrong_one_is_judged_on_its_own_example(tmp_path):
    """attention_scores returns zeros: the worked example's softmax_naive values (taken from its scores) are
    wrong, and softmax_naive is judged on its own example, where it is right and earns its document check."""
    submission = learner_copy(tmp_path / "first-wrong", stages=[1])
    path = submission / "stage1_softmax.py"
    text = path.read_text().replace("    return inputs @ query", "    return torch.zeros(inputs.shape[0])  #", 1)
    path.write_text(text)
    _, report = grade(submission, "--stage", "1")
    checks = {c["id"]: c for c in report["stages"][0]["checks"]}
    assert checks["document.attention_scores"]["status"] == "failed"
    assert checks["document.softmax_naive"]["status"] == "passed"


@pytest.mark.parametrize(
    ("results", "voided"),
    [
        ([result("random.f", Status.FAILED), result("document.f", Status.FAILED, "visible")], True),
        ([result("random.f", Status.PASSED), result("document.f", Status.FAILED, "visible")], False),
        ([result("random.g", Status.FAILED, target="g")], False),  # another function's results
        ([], False),  # nothing to judge it by
    ],
)
def test_a_check_of_how_earns_nothing_when_every_result_of_its_function_failed(results, voided):
    how = result("structure.f", Status.PASSED)
    void_without_results([*results, how])
    assert (how.score == 0 and how.status == Status.FAILED and how.hint == "results-first") == voided
    assert how.score == (0 if voided else 2)


def test_a_visible_check_rests_on_visible_results_and_a_hidden_one_on_the_judges_own_inputs():
    """Students read visible checks before the hidden ones are published, so a hidden result must not move
    one; and the book's printed values can be held as a table, so a hidden check needs a right result on
    inputs the judge drew (random) to earn its points."""
    visible_how = result("note.priced", Status.PASSED, "visible")
    hidden_how = result("property.f", Status.PASSED)
    table = [result("document.f", Status.PASSED, "visible"), result("random.f", Status.FAILED), visible_how, hidden_how]
    void_without_results(table)
    assert visible_how.score == 2 and hidden_how.score == 0
    computed = result("property.f", Status.PASSED)
    void_without_results([result("document.f", Status.FAILED, "visible"), result("random.f", Status.PASSED), computed])
    assert computed.score == 2


@pytest.mark.parametrize("random_status", [Status.FAILED, Status.PASSED])
def test_a_visible_structure_check_counts_in_the_record_only_beside_a_right_random_result(random_status):
    """A module's declared parameters are what a table of the book's values declares too: a visible structure
    check is voided in the record where every random result failed, and keeps what students read."""
    declared = result("structure.f", Status.PASSED, "visible")
    void_without_results([result("document.f", Status.PASSED, "visible"), result("random.f", random_status), declared])
    if random_status == Status.PASSED:
        assert declared.score == 2 and declared.visible_verdict is None
    else:
        assert (declared.score, declared.hint) == (0, "results-first") and "random.f" in declared.message
        assert declared.visible_verdict == {"status": Status.PASSED, "score": 2, "message": "", "hint": None}


@pytest.mark.parametrize("some_right", [False, True])
def test_a_random_check_right_on_some_of_its_inputs_is_a_right_result_for_the_worked_example(some_right):
    """One difference that fails some of the judge's inputs (a qkv_bias=True case) leaves the rest right: the
    worked example's own check keeps its points beside them, and is voided only where no drawn input came out
    right (a table of the printed values)."""
    document, drawn = result("document.f", Status.PASSED, "visible"), result("random.f", Status.FAILED)
    drawn.some_right = some_right
    void_without_results([document, drawn])
    assert document.score == (2 if some_right else 0)


def test_expect_all_close_says_whether_some_case_came_out_right():
    right, wrong = torch.tensor([0.2, 0.8]), torch.zeros(2)
    for cases, some in (
        ([(right, right, "a", None), (wrong, right, "b", None)], True),
        ([(wrong, right, "b", None)], False),
    ):
        with pytest.raises(CheckFailed) as failed:
            expect_all_close(cases)
        assert failed.value.some_right is some


@pytest.mark.parametrize(
    ("expected", "computed"),
    [
        (torch.ones(1), False),  # a softmax of one score
        (torch.full((4,), 0.25), False),  # of four equal scores
        (torch.tensor([[0.3, 0.7]]), False),  # one query: its row needs no weight told apart
        (torch.tensor([[0.3, 0.7], [0.3, 0.7]]), False),  # every query attends to one key: its value, passed through
        (torch.tensor([[[0.3, 0.7]], [[0.1, 0.2]]]), False),  # one token in each of two batches
        (torch.tensor([0.2, 0.8]), True),
        (torch.tensor([[0.3, 0.7], [0.2, 0.7]]), True),
    ],
)
def test_a_case_whose_answer_needs_nothing_computed_is_no_right_result(expected, computed):
    """Red team round 6: a table that also answered one score with 1 and one key with its value kept 4 points
    in stage 1 and 6 in stage 6 through some_right."""
    wrong = torch.full_like(expected, 9.0)
    with pytest.raises(CheckFailed) as failed:
        expect_all_close([(expected.clone(), expected, "one", None), (wrong, torch.rand(3, 2), "other", None)])
    assert failed.value.some_right is computed


def test_a_stage_wide_check_goes_with_the_stages_results():
    stage_wide = result("property.inputs_kept", Status.PASSED, target=None)
    void_without_results([result("random.f", Status.FAILED), result("random.g", Status.FAILED, target="g"), stage_wide])
    assert stage_wide.score == 0 and "this stage's code" in stage_wide.message


def lookup_table_stage1(degenerate: bool = False) -> str:
    """Stage 1 as a table of the book's values: each function answers the worked example's inputs with the
    printed result, and anything else with zeros. It computes nothing. ``degenerate``: it also answers what
    needs nothing computed, a softmax of one score (1) and the attention of one token (the token itself)."""
    import torch

    from grader.runner.document_examples import journey
    from solutions import stage1_softmax as book

    inputs = journey(torch.device("cpu"))
    table = []
    for row in range(len(inputs)):
        scores = book.attention_scores(inputs, inputs[row])
        weights = book.softmax_naive(scores)
        table += [("attention_scores", [inputs, inputs[row]], scores), ("softmax_naive", [scores], weights)]
        table += [("context_vector", [inputs, weights], book.context_vector(inputs, weights))]
    table.append(("simple_self_attention", [inputs], book.simple_self_attention(inputs)))
    entries = ",\n".join(
        f"    ({name!r}, {[a.tolist() for a in args]!r}, {out.tolist()!r})" for name, args, out in table
    )
    functions = "".join(
        f"def {name}(*args):\n    return _look_up({name!r}, args, {shape})\n\n\n"
        for name, shape in [
            ("attention_scores", "args[0].shape[:1]"),
            ("softmax_naive", "args[0].shape"),
            ("context_vector", "args[0].shape[1:]"),
            ("simple_self_attention", "args[0].shape"),
        ]
    )
    return (
        "import torch\n\nTABLE = [\n" + entries + ",\n]\n\n\n"
        "def _look_up(name, args, shape):\n"
        + (
            "    if name == 'softmax_naive' and args[0].numel() == 1:\n        return torch.ones(1)\n"
            "    if name == 'simple_self_attention' and len(args[0]) == 1:\n        return args[0].clone()\n"
            if degenerate
            else ""
        )
        + "    for function, known, out in TABLE:\n"
        "        if function == name and all(torch.is_tensor(a) and a.shape == torch.Size(torch.tensor(k).shape)\n"
        "                                    and torch.allclose(a, torch.tensor(k), atol=1e-4) for a, k in zip(args, known)):\n"
        "            return torch.tensor(out)\n"
        "    return torch.zeros(shape)\n\n\n" + functions
    )


@pytest.mark.parametrize("degenerate", [False, True], ids=["table", "table-and-one-token-answers"])
def test_a_table_of_the_books_values_earns_nothing_in_the_record_and_students_read_what_it_answered(
    tmp_path, degenerate
):
    submission = tmp_path / "table"
    submission.mkdir()
    (submission / "stage1_softmax.py").write_text(lookup_table_stage1(degenerate))
    _, report = grade(submission, "--stage", "1")
    checks = report["stages"][0]["checks"]
    assert [(c["id"], c["score"]) for c in checks if c["score"]] == []  # issue 36: points rest on the judge's inputs
    # the table does answer the book: students read those verdicts as they were, before hidden results publish
    seen = {c["id"]: c["visible_verdict"] for c in checks if c.get("visible_verdict")}
    assert {"document.attention_scores", "document.softmax_naive", "structure.outputs"} <= set(seen)
    assert all(verdict["status"] == "passed" and verdict["score"] > 0 for verdict in seen.values())
    document = next(c for c in checks if c["id"] == "document.softmax_naive")
    assert document["message"].startswith("no credit in the record: softmax_naive is right on the published example")
    # the release's provisional view has no random inputs: there the table keeps what it answered
    _, provisional = grade(submission, "--stage", "1", "--visible-only")
    assert provisional["score"] > 0
