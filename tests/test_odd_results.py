"""No result a learner's code returns makes the judge fail: every public function and forward of every stage
returns an odd value in its place (an empty tensor, a 0-D NaN, a dict, a bool vector, a huge int, a size-0 axis),
and each such student is graded completely, with no check the grader could not finish (red team round 9: a 0-D
or 1-D result from CausalAttention.forward made the judge index it, an IndexError of its own, and left the student
incomplete, graded twice and without a score)."""

import json

import pytest

from grader.core.stages import STAGE_MODULES
from grader.judge.plugin import grader_faults
from tests.grading import batch, learner_copy

# Appended to each stage file: every public function (but the transfer, which returns a module) and every
# forward return ODD's value instead of their own.
WRAPPER = """

import functools as _functools

import torch as _torch


def _odd(result):
    return {odd}


def _wrapped(function):
    @_functools.wraps(function)
    def odd(*args, **kwargs):
        return _odd(function(*args, **kwargs))

    return odd


for _name, _value in list(globals().items()):
    if _name.startswith("_") or getattr(_value, "__module__", None) != __name__:
        continue
    if isinstance(_value, type) and "forward" in vars(_value):
        _value.forward = _wrapped(vars(_value)["forward"])
    elif callable(_value) and not isinstance(_value, type) and _name != "transfer_weights_v2_to_v1":
        globals()[_name] = _wrapped(_value)
"""
ODD = {
    "empty": "_torch.zeros(0)",
    "nan-scalar": "_torch.tensor(float('nan'))",
    "dict": "{'a': 1, 'b': [1, 2]}",
    "bools": "_torch.ones(3, dtype=_torch.bool)",
    "huge-int": "10**30",
    "size-0-axis": "_torch.zeros(*result.shape[:-1], 0) if isinstance(result, _torch.Tensor) else result",
    "eight-dims": "_torch.zeros(1, 1, 1, 1, 1, 1, 1, 1)",
}


@pytest.mark.timeout(1500)
def test_no_result_a_learner_returns_makes_the_judge_fail(tmp_path):
    submissions = tmp_path / "class"
    for name, odd in ODD.items():
        folder = learner_copy(submissions / name)
        for module in STAGE_MODULES.values():
            path = folder / f"{module}.py"
            path.write_text(path.read_text() + WRAPPER.format(odd=odd))
    batch(submissions, tmp_path / "out")
    for name in ODD:
        report = json.loads((tmp_path / "out" / "students" / f"{name}.json").read_text())
        assert report["complete"] and not grader_faults(report), (name, report["flags"], grader_faults(report))
        assert report["score"] < report["max_score"], name  # the odd values are wrong: they cost points
