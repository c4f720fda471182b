"""torch's own code, made again from its files outside the import system, earns nothing (red team round 6: stage 6,
and stages 2 to 5, at full marks on torch.onnx's reference attention rebuilt from its code objects).
grader/runner/code_guard.py refuses each way to run it; each is spelt here past the source scan."""

import pytest

from tests.grading import grade, learner_copy

# A stage 6 on torch.onnx's attention_23, rebuilt by ROUTE (names decoded at run time: each letter shifted).
BORROWED = """
import importlib
import importlib.machinery
import math
import os

import torch

N = lambda word: "".join(chr(ord(c) - 1) for c in word)  # noqa: E731
types = importlib.import_module(N("uzqft"))
builtins = importlib.import_module(N("cvjmujot"))


def _code():
    where = os.path.join(os.path.dirname(torch.__file__), "onnx", "ops")
    spec = importlib.machinery.PathFinder.find_spec("torch.onnx.ops._impl", [where])
    return spec.loader.get_code("torch.onnx.ops._impl")


def _functions(module_code):
    g = dict(vars(os))
    g.update(torch=torch, math=math)
    ROUTE
    return g


def _attention():
    code = _code()
    return _functions(code)[N("buufoujpo`34")]


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    lead = query.shape[:-2]
    q, k, v = (t.reshape(-1, *t.shape[-3:]) if t.dim() > 3 else t.reshape(1, -1, *t.shape[-2:])
               for t in (query, key, value))
    out = _attention()(q, k, v, attn_mask, None, None, is_causal=is_causal, kv_num_heads=0, q_num_heads=0,
                       qk_matmul_output_mode=1, scale=scale, softcap=0.0, softmax_precision=None)[0]
    return torch.nan_to_num(out, nan=0.0).reshape(*lead, query.shape[-2], value.shape[-1])
"""
FUNCTIONS = "[c for c in module_code.co_consts if hasattr(c, N('dp`obnf'))]"
ROUTES = {
    "FunctionType": f"for c in {FUNCTIONS}:\n        g[c.co_name] = getattr(types, N('GvodujpoUzqf'))(c, g)",
    "exec of the module": "getattr(builtins, N('fyfd'))(module_code, g)",
    "__code__ set": f"for c in {FUNCTIONS}:\n        f = lambda: None\n        setattr(f, N('``dpef``'), c)\n"
    "        g[c.co_name] = f",
    "renamed code": f"for c in {FUNCTIONS}:\n        c = getattr(c, N('sfqmbdf'))(co_filename='mine.py')\n"
    "        g[c.co_name] = getattr(types, N('GvodujpoUzqf'))(c, g)",
    "compile of the file": "src = open(getattr(module_code, N('dp`gjmfobnf'))).read()\n"
    "    code = getattr(builtins, N('dpnqjmf'))(src, module_code.co_filename, 'exec')\n"
    "    getattr(builtins, N('fyfd'))(code, g)",
}


@pytest.mark.parametrize("route", ROUTES)
def test_torchs_attention_rebuilt_from_its_code_earns_nothing(tmp_path, route):
    source = BORROWED.replace("ROUTE", ROUTES[route])
    submission = learner_copy(tmp_path / "submission", stages=[6])
    (submission / "stage6_sdpa.py").write_text(source)
    _, report = grade(submission, "--stage", "6")
    stage = report["stages"][0]
    assert stage["score"] == 0, [(c["id"], c["score"]) for c in stage["checks"] if c["score"]]
    example = next(c for c in stage["checks"] if c["id"] == "example.scaled_dot_product_attention")
    assert example["hint"] == "banned-api" and "outside the import system" in example["message"], route
