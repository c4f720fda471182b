"""The allowlist at the dispatcher (grader/core/operators.toml, grader/runner/operators.py): learner code reaches
only the operators right code needs; every other one refuses in every worker, and a function that calls one
earns nothing, with banned-api, as if it had called a switched-off route."""

import subprocess
import sys
import textwrap

import pytest

from grader.authoring.operators import derive
from grader.core.operators import allowed_operators
from grader.runner import operators
from tests.conftest import REPO
from tests.grading import BOOK_CODE, grade, learner_copy


def checks_of(report: dict, stage: int) -> list[dict]:
    return next(s["checks"] for s in report["stages"] if s["id"] == f"stage{stage}")


def is_allowed(name: str) -> bool:
    allowed = allowed_operators()
    return operators._allowed(name, frozenset(allowed["names"]), frozenset(allowed["tags"]), allowed["views"])


def test_every_operator_the_references_and_the_books_code_reach_is_on_the_list(tmp_path):
    """Derived again here (make operators, tests.derive_operators, derives it from every right answer the tests
    know): nothing the references or the book's code reach, the grader's own work in a worker included, refuses."""
    solutions = learner_copy(tmp_path / "solutions")
    book = learner_copy(tmp_path / "book")
    for path in BOOK_CODE.glob("*.py"):
        (book / path.name).write_text(path.read_text())
    reached = derive([solutions, book])
    assert {"mm", "_softmax", "tril", "masked_fill", "bernoulli_", "_softmax_backward_data"} <= reached
    refused = sorted(name for name in reached if not is_allowed(name))
    assert refused == [], f"right code reaches {refused}: run `make operators`, or list them in operators.toml"


# Run in a process of its own: a refusal, once registered, holds for the life of the process.
REFUSALS = """
import torch
import torch.nn.functional as F
from grader.core.operators import allowed_operators
from grader.runner.operators import refuse_all_but
from grader.runner.routes import RouteSwitchedOff

refuse_all_but(allowed_operators())
x = torch.rand(4, 3, requires_grad=True)
w = torch.rand(3, 3)
CALLS = {{
    {calls}
}}
for name, call in CALLS.items():
    try:
        call()
        print(name, "ran")
    except RouteSwitchedOff as error:
        print(name, "refused", str(error).partition(" ")[0])
"""
ALLOWED_CALLS = {
    "matmul": "lambda: (x @ w).sum()",
    "softmax_and_backward": "lambda: torch.softmax(x @ w, dim=-1).pow(2).sum().backward()",
    "mask": "lambda: (x @ x.T).masked_fill(torch.triu(torch.ones(4, 4, dtype=torch.bool), 1), -torch.inf)",
    "dropout": "lambda: F.dropout(x, 0.5, training=True)",
    "views": "lambda: x.view(2, 6).transpose(0, 1).unsqueeze(0).reshape(-1)[::2]",
    "print": "lambda: repr(x * 1e6) + f'{x[0, 0].item():.4f}'",
    "einsum": "lambda: torch.einsum('ij,jk->ik', x, w)",
    # another spelling of an allowed operator: in place, or Python's operator for it
    "in_place": "lambda: x.detach().abs_().eq_(0).logical_not_()",
    "and_in_place": "lambda: (lambda m: m.__iand__(m) | m)(torch.ones(2, dtype=torch.bool))",
    "baddbmm_in_place": "lambda: torch.zeros(1, 4, 3).baddbmm_(x[None], w[None])",
    # facts about tensors, never their values
    "dtype_facts": "lambda: (torch.promote_types(x.dtype, torch.float64), torch.can_cast(x.dtype, torch.half))",
}
REFUSED_CALLS = {
    "conv1d": "lambda: F.conv1d(x.T[None], w[:, :, None])",
    "layer_norm": "lambda: F.layer_norm(x, (3,))",
    "svd": "lambda: torch.linalg.svd(w)",
    "qr": "lambda: torch.linalg.qr(w)",
    "embedding_bag": "lambda: F.embedding_bag(torch.arange(4)[None], x, mode='sum')",
    "encoder_layer": "lambda: torch.ops.aten._transformer_encoder_layer_fwd",  # looked up, not yet called
    "flash_backward": "lambda: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward("
    "x[None, None], x[None, None], x[None, None], x[None, None], x[None, None], x.new_zeros(1, 1, 4), 0.0, False)",
    "prims": "lambda: torch.ops.prims.mul(x, x)",
    "quantized": "lambda: torch.ops.quantized.softmax(torch.quantize_per_tensor(x, 0.1, 0, torch.quint8), 1, 0.1, 0)",
}


def test_operators_outside_the_list_refuse_and_those_on_it_run():
    calls = "\n    ".join(f"{name!r}: {call}," for name, call in {**ALLOWED_CALLS, **REFUSED_CALLS}.items())
    result = subprocess.run(
        [sys.executable, "-c", REFUSALS.format(calls=calls)], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    outcome = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert {name: outcome.get(name) for name in ALLOWED_CALLS} == dict.fromkeys(ALLOWED_CALLS, "ran"), result.stderr
    refused = {name: outcome.get(name, "").split(" ")[0] for name in REFUSED_CALLS}
    # looking an operator up is harmless; calling it is not
    assert refused == {**dict.fromkeys(REFUSED_CALLS, "refused"), "encoder_layer": "ran"}, result.stdout + result.stderr


def test_an_operators_backward_and_other_spellings_are_allowed_where_the_operator_is():
    assert is_allowed("select_backward") and is_allowed("_softmax_backward_data")
    assert is_allowed("abs_") and is_allowed("__iand__") and is_allowed("__or__") and is_allowed("__ior__")
    assert not is_allowed("linalg_svd_") and not is_allowed("__iconv__")
    assert not is_allowed("native_layer_norm_backward")
    assert not is_allowed("_scaled_dot_product_flash_attention_for_cpu_backward")


SOFTMAX_WEIGHTS = "    return attn_weights @ inputs  # (num_tokens,) @ (num_tokens, d_in) -> (d_in,)\n"
# Each right on every input, through an operator no right answer needs: before the allowlist, full marks.
OUTSIDE_THE_LIST = [
    (
        "context_vector sums the rows through embedding_bag",
        1,
        "stage1_softmax.py",
        SOFTMAX_WEIGHTS,
        "    import torch.nn.functional as F\n"
        "    rows = torch.arange(inputs.shape[0])[None]\n"
        "    return F.embedding_bag(rows, inputs, per_sample_weights=attn_weights[None], mode='sum')[0]\n",
        "context_vector",
    ),
    (
        "SelfAttention_v1 projects through a convolution of width 1",
        2,
        "stage2_self_attention.py",
        "        keys = x @ self.W_key  # (num_tokens, d_out)\n",
        "        keys = torch.nn.functional.conv1d(x.T[None], self.W_key.T[:, :, None])[0].T\n",
        "SelfAttention_v1",
    ),
    (
        "transfer_weights_v2_to_v1 rebuilds each weight from its singular value decomposition",
        3,
        "stage3_weight_transfer.py",
        "            matrix.copy_(linear.weight.T)  # (d_out, d_in) -> (d_in, d_out)\n",
        "            u, s, vh = torch.linalg.svd(linear.weight.T, full_matrices=False)\n"
        "            matrix.copy_((u * s) @ vh)\n",
        "transfer",
    ),
]


@pytest.mark.parametrize(
    ("stage", "file", "find", "replace", "target"),
    [case[1:] for case in OUTSIDE_THE_LIST],
    ids=[case[0] for case in OUTSIDE_THE_LIST],
)
def test_a_function_that_reaches_an_operator_off_the_list_earns_nothing(tmp_path, stage, file, find, replace, target):
    folder = learner_copy(tmp_path / "submission", {"file": file, "find": find, "replace": replace}, stages=[stage])
    result, report = grade(folder, "--stage", str(stage))
    judged = ("document", "random", "example")
    targeted = [c for c in checks_of(report, stage) if c["id"].split(".")[0] in judged and c["id"].endswith(target)]
    assert targeted and all(c["score"] == 0 for c in targeted), result.stdout
    assert "banned-api" in {c["hint"] for c in targeted}, result.stdout
    assert "an operator outside those these exercises need" in result.stdout, result.stdout
    # the stage's other functions keep their results
    others = [c for c in checks_of(report, stage) if c["id"].startswith("random.") and not c["id"].endswith(target)]
    assert all(c["score"] == c["max_score"] for c in others), result.stdout


def test_the_list_is_data_the_release_ships():
    text = textwrap.dedent((REPO / "grader" / "core" / "operators.toml").read_text())
    assert "[families]" in text and "[alternatives]" in text
    assert (REPO / "grader" / "core" / "operators-derived.toml").exists()
