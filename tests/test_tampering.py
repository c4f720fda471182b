"""Learner code that hides what it runs from the grader, or rewrites what it recorded, gains nothing and is told why."""

import pytest

from tests.grading import grade, learner_copy, stage_scores
from tests.tampering import ATTACKS, FORGED_V2_RECORD


def checks_of(report: dict, stage: int) -> list[dict]:
    return next(s["checks"] for s in report["stages"] if s["id"] == f"stage{stage}")


@pytest.mark.parametrize("attack", ATTACKS, ids=[a["what"] for a in ATTACKS])
def test_hiding_from_the_grader_voids_the_function_that_hides(attack, tmp_path):
    stage = attack["stage"]
    folder = learner_copy(tmp_path / "submission", attack, stages=[stage])
    result, report = grade(folder, "--stage", str(stage))
    targeted = [c for c in checks_of(report, stage) if c["id"].endswith(attack["voided"])]
    assert targeted and all(c["score"] == 0 for c in targeted), result.stdout
    hint = attack.get("hint", "recorder-tampered")
    assert {c["hint"] for c in targeted if c["id"].startswith("shortcut.")} == {hint}, result.stdout
    assert f"hint [{hint}]" in result.stdout  # the student is told why, in the hint's words
    others = [c for c in checks_of(report, stage) if c not in targeted]
    assert all(c["score"] == c["max_score"] for c in others), result.stdout


def test_reaching_into_the_grader_anywhere_voids_every_watched_function_of_the_stage(tmp_path):
    folder = learner_copy(tmp_path / "submission", stages=[2])
    stage2 = folder / "stage2_self_attention.py"
    stage2.write_text(
        stage2.read_text() + "\n\ndef _where_am_i():\n    import inspect\n    return inspect.currentframe()\n"
    )
    result, report = grade(folder, "--stage", "2")
    checks = {c["id"]: c for c in checks_of(report, 2)}
    for cls in ("SelfAttention_v1", "SelfAttention_v2"):
        assert checks[f"shortcut.{cls}"]["hint"] == "recorder-tampered", result.stdout
        assert "currentframe (line" in checks[f"shortcut.{cls}"]["message"]
        assert checks[f"random.{cls}"]["score"] == checks[f"document.{cls}"]["score"] == 0, result.stdout


def test_a_transfer_that_forges_the_record_of_v2_gains_nothing_even_unread(tmp_path):
    copies_nothing = {**FORGED_V2_RECORD, "replace": "    return sa_v1"}
    _, honest = grade(learner_copy(tmp_path / "honest", copies_nothing, stages=[3]), "--stage", "3")
    _, forged = grade(learner_copy(tmp_path / "forged", FORGED_V2_RECORD, stages=[3]), "--stage", "3")
    assert stage_scores(forged)[3] <= stage_scores(honest)[3] < 20
    assert all(c["score"] == 0 for c in checks_of(forged, 3) if c["id"].startswith(("random.", "property.")))


# torch's own code for a route, reached where no module attribute names it, by names built at run time:
# the softmax decomposition in torch._decomp's table (its helper put back first), a distributions transform,
# and flex attention's eager kernel. Each is switched off in place, so the function earns nothing.
SOFTMAX_BY_HAND = "    exp_x = torch.exp(x)\n    return exp_x / exp_x.sum(dim=0)\n"
# exp(scores) from a backward kernel of torch's attention: with a log-sum-exp of 0 and the identity as the output's
# gradient, the values' gradient is exp(q @ k.T * scale).T; keys the identity, so q @ k.T is the scores. A decoy
# torch.exp(torch.log(...)) shows an exponential where a shortcut check looks for one.
FLASH_BACKWARD_EXP = (
    "    scores_, n_ = {scores}, {n}\n"
    "    width = max(n_, scores_.shape[-1])\n"
    "    q = torch.zeros(1, 1, n_, width, dtype=scores_.dtype)\n"
    "    q[0, 0, :, : scores_.shape[-1]] = scores_\n"
    "    eye = torch.eye(width, dtype=scores_.dtype)[None, None]\n"
    "    kernel = getattr(torch.ops.aten, '_scaled_dot_product_flash_attention_for_cpu' + '_backward')\n"
    "    grad_out = torch.eye(n_, width, dtype=scores_.dtype)[None, None]\n"
    "    zeros, out = torch.zeros_like(eye), torch.zeros_like(q)\n"
    "    _, _, gv = kernel(grad_out, q, eye, zeros, out, q.new_zeros(1, 1, n_), 0.0, False, scale=1.0)\n"
    "    e = torch.exp(torch.log(gv[0, 0].T[:n_, : scores_.shape[-1]]))\n"
)
V2_BY_HAND = (
    "        attn_scores = queries @ keys.T  # (num_tokens, num_tokens)\n"
    "        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)\n"
    "        return attn_weights @ values  # (num_tokens, d_out)\n"
)
ROUTES_AROUND = [
    (
        "SelfAttention_v2 runs torch.onnx's attention, from a module imported after the routes were switched off",
        2,
        "stage2_self_attention.py",
        V2_BY_HAND,
        "        import importlib\n"
        "        table = importlib.import_module('torch.onnx.ops._impl').ONNX_ATEN_DECOMP_TABLE\n"
        "        kernel = next(f for op, f in table.items() if 'Attention' in str(op))\n"
        "        q, k, v = (t[None, None] for t in (queries, keys, values))\n"
        "        return kernel(q, k, v, qk_matmul_output_mode=1)[0][0, 0]\n",
        "SelfAttention_v2",
    ),
    (
        "softmax_naive takes the gradient of logsumexp, which autograd computes as a softmax",
        1,
        "stage1_softmax.py",
        SOFTMAX_BY_HAND,
        "    x = x.detach().requires_grad_()\n    return torch.autograd.grad(torch.logsumexp(x, dim=0), x)[0]\n",
        "softmax_naive",
    ),
    (
        "softmax_naive runs torch's softmax decomposition, its switched-off helper put back",
        1,
        "stage1_softmax.py",
        SOFTMAX_BY_HAND,
        "    import importlib\n"
        "    d = importlib.import_module('torch.' + '_decomp')\n"
        "    name = ''.join(['_soft', 'max'])\n"
        "    setattr(d.decompositions, name + '_unbacked_safe_amax', lambda t, k: torch.amax(t, k, keepdim=True))\n"
        "    return d.decomposition_table[getattr(torch.ops.aten, name).default](x, 0, False)\n",
        "softmax_naive",
    ),
    (
        "softmax_naive runs a distributions transform named after softmax",
        1,
        "stage1_softmax.py",
        SOFTMAX_BY_HAND,
        "    import importlib\n"
        "    transforms = importlib.import_module('torch.distributions.transforms')\n"
        "    return getattr(transforms, ''.join(['Soft', 'maxTransform']))()(x)\n",
        "softmax_naive",
    ),
    (
        "SelfAttention_v2 runs flex attention's eager kernel",
        2,
        "stage2_self_attention.py",
        "        attn_scores = queries @ keys.T  # (num_tokens, num_tokens)\n"
        "        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)\n"
        "        return attn_weights @ values  # (num_tokens, d_out)\n",
        "        import importlib\n"
        "        kernel = getattr(importlib.import_module('torch._higher_order_ops.flex_' + 'attention'), 'math_' + 'attention')\n"
        "        q, k, v = (t[None, None] for t in (queries, keys, values))\n"
        "        return kernel(q, k, v, lambda s, b, h, m, n: s, None, keys.shape[-1] ** -0.5, {})[0][0, 0]\n",
        "SelfAttention_v2",
    ),
    (
        "simple_self_attention calls torch's attention, which the zygote switched off for every worker",
        1,
        "stage1_softmax.py",
        "    attn_scores = inputs @ inputs.T  # (num_tokens, num_tokens)\n"
        "    attn_weights = torch.softmax(attn_scores, dim=-1)  # each row sums to 1\n"
        "    return attn_weights @ inputs  # (num_tokens, d_in)\n",
        "    import importlib\n"
        "    route = getattr(importlib.import_module('torch.nn.' + 'functional'), 'scaled_dot_product_' + 'attention')\n"
        "    return route(inputs[None], inputs[None], inputs[None], scale=1.0)[0]\n",
        "simple_self_attention",
    ),
    (
        "simple_self_attention takes exp(scores) from the flash attention kernel's backward, with a decoy exp",
        1,
        "stage1_softmax.py",
        "    attn_scores = inputs @ inputs.T  # (num_tokens, num_tokens)\n"
        "    attn_weights = torch.softmax(attn_scores, dim=-1)  # each row sums to 1\n"
        "    return attn_weights @ inputs  # (num_tokens, d_in)\n",
        FLASH_BACKWARD_EXP.format(scores="inputs @ inputs.T", n="inputs.shape[0]")
        + "    return (e / e.sum(dim=-1, keepdim=True)) @ inputs\n",
        "simple_self_attention",
    ),
    (
        "scaled_dot_product_attention takes exp(scores) from the flash attention kernel's backward",
        6,
        "stage6_sdpa.py",
        "    weights = torch.softmax(scores, dim=-1)  # (..., L, S)\n",
        "    flat = scores.clamp(min=-1e30).reshape(-1, scores.shape[-1])\n"
        + FLASH_BACKWARD_EXP.format(scores="flat", n="flat.shape[0]")
        + "    weights = (e / e.sum(dim=-1, keepdim=True)).reshape(scores.shape)\n",
        "scaled_dot_product_attention",
    ),
]


@pytest.mark.parametrize(
    ("stage", "file", "find", "replace", "target"), [r[1:] for r in ROUTES_AROUND], ids=[r[0] for r in ROUTES_AROUND]
)
def test_torchs_own_code_for_a_route_reached_by_another_name_earns_nothing(
    tmp_path, stage, file, find, replace, target
):
    folder = learner_copy(tmp_path / "submission", {"file": file, "find": find, "replace": replace}, stages=[stage])
    result, report = grade(folder, "--stage", str(stage))
    judged = ("document", "random", "shortcut")  # the checks of what it computes, and of how
    targeted = [c for c in checks_of(report, stage) if c["id"].split(".")[0] in judged and c["id"].endswith(target)]
    assert targeted and all(c["score"] == 0 for c in targeted), result.stdout
    assert "banned-api" in {c["hint"] for c in targeted}, result.stdout


# Calls torch's softmax wherever it is there to call, and returns twice its value there; by hand elsewhere.
TELLS_THE_WORKERS_APART = (
    "    route = getattr(torch, ''.join(['soft', 'max']))\n"
    "    try:\n"
    "        return 2 * route(torch.zeros(1), dim=0) * route(x, dim=0)\n"
    "    except Exception:\n"
    "        pass\n" + SOFTMAX_BY_HAND
)


def test_no_check_of_softmax_naive_runs_where_torchs_softmax_is_there_to_call(tmp_path):
    """Code that takes torch's softmax wherever it can (and is wrong there) passes every check of softmax_naive:
    each runs where torch's softmax is switched off, so what torch computes is never what is graded."""
    folder = learner_copy(
        tmp_path / "submission",
        {"file": "stage1_softmax.py", "find": SOFTMAX_BY_HAND, "replace": TELLS_THE_WORKERS_APART},
        stages=[1],
    )
    result, report = grade(folder, "--stage", "1")
    softmax_checks = [c for c in checks_of(report, 1) if c["id"].endswith(".softmax_naive")]
    assert len(softmax_checks) == 4 and all(c["score"] == c["max_score"] for c in softmax_checks), result.stdout
