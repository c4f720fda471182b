"""`python -m grader` (what `make grade` runs) reports honestly on any folder of stage files."""

import shutil
import subprocess
import sys

import pytest

from grader.runner.implementation import STAGE_MODULES
from tests.conftest import REPO


def grade(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "grader", *map(str, args)], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def test_untouched_stubs_reproduce_nothing_and_say_where_to_start():
    result = grade("exercises")
    assert result.returncode == 0, result.stderr
    for stage in STAGE_MODULES:
        assert f"✗ stage {stage} " in result.stdout
    assert "not implemented: attention_scores is not implemented yet" in result.stdout
    assert "Next: open exercises/stage1_softmax.py and read docs/stage1.md." in result.stdout
    assert "not a score" in result.stdout


def test_solutions_reproduce_everything():
    result = grade("solutions")
    assert result.returncode == 0, result.stderr
    assert "✗" not in result.stdout and "Next:" not in result.stdout


def test_missing_and_broken_stages_cost_only_themselves(tmp_path):
    shutil.copy(REPO / "solutions" / "stage1_softmax.py", tmp_path)
    (tmp_path / "stage4_causal_attention.py").write_text("def broken(:\n")
    result = grade(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "✓ stage 1 " in result.stdout
    assert "stage2_self_attention.py is missing" in result.stdout
    assert "stage4_causal_attention.py failed to import: SyntaxError" in result.stdout


def test_one_stage_only():
    result = grade("solutions", "--stage", "3")
    assert "stage 3" in result.stdout and "stage 1" not in result.stdout


@pytest.mark.parametrize("args", [["no/such/folder"], ["exercises", "--stage", "9"]])
def test_grader_refuses_what_it_cannot_run(args):
    result = grade(*args)
    assert result.returncode == 2
    assert result.stderr.strip()
