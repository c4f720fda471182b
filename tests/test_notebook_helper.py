"""grader.notebook, as a notebook's cells call it: load what the answer cell saved, check it."""

import pytest
import torch

from grader.core.points import points_in_use
from grader.judge.plugin import planned_checks
from grader.notebook import NotebookGradingError, check, load
from tests.grading import REPO, learner_copy


def test_a_missing_stage_file_says_which_cell_to_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(NotebookGradingError, match="%%writefile stage1_softmax.py"):
        check(1)


def test_load_imports_the_latest_save(tmp_path, monkeypatch):
    learner_copy(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert torch.allclose(load(1).softmax_naive(torch.zeros(4)), torch.full((4,), 0.25))
    path = tmp_path / "stage1_softmax.py"
    path.write_text(path.read_text() + "\n\ndef softmax_naive(x):\n    return x\n")
    assert torch.equal(load(1).softmax_naive(torch.zeros(4)), torch.zeros(4))
    assert load(3).transfer_weights_v2_to_v1  # stage 3 imports stage 2 as `exercises.…`, as learners write it


def test_check_splits_visible_and_hidden_points(tmp_path, monkeypatch, capsys):
    learner_copy(tmp_path)
    monkeypatch.chdir(tmp_path)
    visible = sum(c.points for c in planned_checks([1], points_in_use()) if c.visibility == "visible")
    assert check(1) == visible and check(1, hidden=True) == 20 - visible
    printed = capsys.readouterr().out
    assert "✓ document.softmax_naive: 2/2" in printed and "✓ random.softmax_naive: 2/2" in printed
    (tmp_path / "stage1_softmax.py").write_text((REPO / "exercises" / "stage1_softmax.py").read_text())
    assert check(1) == 0  # a new file content is graded anew
    stub = capsys.readouterr().out
    assert stub.count("hint [not-implemented]") == 1  # said once, not once per check
    # one line per function still a stub, naming its checks
    assert [line.split(" (")[0] for line in stub.splitlines() if line.startswith("✗ not implemented yet")] == [
        f"✗ not implemented yet: {name}"
        for name in ("attention_scores", "softmax_naive", "context_vector", "simple_self_attention", "stage 1's code")
    ]
