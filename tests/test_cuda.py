"""The solutions run on a GPU and agree with the documents there (skipped without CUDA)."""

import pytest
import torch

from grader.judge.document_values import document_values
from grader.runner.document_examples import run_recipe
from tests.conftest import REPO
from tests.grading import BONUS_ON, grade, learner_copy

pytestmark = pytest.mark.cuda
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")
ON_GPU = [v for v in document_values() if not v.cpu_only]


@pytest.fixture(autouse=True)
def exact_float32_matmul():
    # TF32 would round matmul inputs to 10 bits: far coarser than the 4 printed decimals.
    previous = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = previous


@needs_cuda
@pytest.mark.parametrize("value", ON_GPU, ids=[v.id for v in ON_GPU])
def test_solutions_reproduce_document_value_on_cuda(value, solutions):
    problem = value.check(run_recipe(value.recipe, solutions, device="cuda"))
    assert problem is None, f"{value.id} on CUDA: {problem}"


@needs_cuda
@pytest.mark.parametrize("name", ["CausalAttention", "MultiHeadAttention"])
def test_mask_buffer_follows_the_module_to_the_gpu(name, solutions):
    module = solutions.name(name)(3, 2, 6, 0.0, *([2] if name == "MultiHeadAttention" else [])).to("cuda")
    assert module.mask.is_cuda
    x = torch.rand(2, 4, 3, device="cuda")
    assert module(x).is_cuda


@needs_cuda
def test_dropout_on_cuda_keeps_its_rate_and_scale(solutions):
    torch.manual_seed(0)
    module = solutions.CausalAttention(8, 8, 256, 0.5).to("cuda").train()
    weights = torch.ones(1, 256, 256, device="cuda")
    dropped = module.dropout(weights)
    kept = dropped[dropped != 0]
    assert abs((dropped == 0).float().mean().item() - 0.5) < 0.02
    torch.testing.assert_close(kept, torch.full_like(kept, 2.0))


@needs_cuda
def test_the_solutions_score_full_marks_when_graded_on_cuda_bonus_stages_included(tmp_path):
    """Every check, core and bonus, runs its CUDA path: learner code and reference on the GPU."""
    _, report = grade(learner_copy(tmp_path / "ada"), "--device", "cuda", "--course", str(BONUS_ON))
    assert report["device"] == "cuda"
    lost = {c["id"]: c["message"] for s in report["stages"] for c in s["checks"] if c["status"] != "passed"}
    assert lost == {} and all(s["score"] == s["max_score"] for s in report["stages"])
    assert {s["track"] for s in report["stages"]} == {"core", "bonus"}


@needs_cuda
def test_the_books_code_scores_full_marks_on_cuda_and_its_cpu_tensors_are_a_note(tmp_path):
    """The book makes tensors with torch.empty/torch.ones and no device=: on a GPU those calls fail, are
    graded on the CPU, and the stage's note.fixed_device (0 points) says what failed on the GPU."""
    book = tmp_path / "book"
    book.mkdir()
    for stage_file in (REPO / "tests" / "book").glob("*.py"):
        (book / stage_file.name).write_text(stage_file.read_text())
    _, report = grade(book, "--device", "cuda")
    assert report["device"] == "cuda" and report["score"] == report["max_score"] == 100
    notes = {s["id"]: c for s in report["stages"] for c in s["checks"] if c["id"] == "note.fixed_device"}
    assert notes["stage1"]["status"] == notes["stage4"]["status"] == "failed"
    assert "on the GPU it raised RuntimeError" in notes["stage4"]["message"]
    assert notes["stage2"]["status"] == notes["stage5"]["status"] == "passed"
