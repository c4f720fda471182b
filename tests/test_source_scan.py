"""The judge's reading of a stage file: shortcuts found where they stand, reaches into the grader however spelt,
and nothing at all in right answers, however they are written."""

import json

import pytest

from grader.core.stages import STAGE_MODULES
from grader.judge.checks.delegation import own_spellings
from grader.judge.checks.shortcut import ATTENTION_BY_HAND, SOFTMAX_BY_HAND, TRANSFER_BY_COPY
from grader.judge.source_scan import MODULE_LEVEL, SourceScan
from tests.grading import ALTERNATIVES, BONUS_ON, MUTANTS, batch, learner_copy
from tests.mutation import truthful
from tests.tampering import ATTACKS, BUILT_NAMES

# The functions the shortcut checks watch, stage by stage, and the shortcut each must not take.
WATCHED = {
    1: {"softmax_naive": SOFTMAX_BY_HAND},
    2: {"SelfAttention_v1": ATTENTION_BY_HAND, "SelfAttention_v2": ATTENTION_BY_HAND},
    3: {"transfer_weights_v2_to_v1": TRANSFER_BY_COPY},
    4: {"CausalAttention": ATTENTION_BY_HAND},
    5: {"MultiHeadAttention": ATTENTION_BY_HAND},
    6: {"scaled_dot_product_attention": ATTENTION_BY_HAND},
    7: {"MultiHeadAttentionKV": ATTENTION_BY_HAND},
    8: {"GroupedQueryAttention": ATTENTION_BY_HAND},
}
# Stages whose attention may be the learner's own stage 6 function (grader.judge.checks.delegation): its
# name, taken from the learner's files, is theirs and no shortcut.
DELEGATING = {7, 8}
SOFTMAX = SOFTMAX_BY_HAND.spelled


class StageFile(SourceScan):
    def __init__(self, source: bytes):
        super().__init__(source)
        self.source = source


def stage_file(tmp_path, stage: int, change: dict | None = None) -> StageFile:
    """The scan of a learner's copy of the solution of ``stage``, with ``change`` (a mutant's shape) applied."""
    folder = learner_copy(tmp_path / "submission", change, stages=[stage])
    return StageFile((folder / f"{STAGE_MODULES[stage]}.py").read_bytes())


def shortcuts_taken(scan: StageFile, stage: int) -> dict[str, list]:
    mine = own_spellings(scan.source) if stage in DELEGATING else None
    return {
        target: found
        for target, shortcut in WATCHED[stage].items()
        if (
            found := [
                use for use in scan.uses_reached_from(target, shortcut.spelled) if mine is None or not mine.excuses(use)
            ]
        )
    }


def test_a_name_the_compiler_folds_from_pieces_is_found_where_it_stands(tmp_path):
    folded = next(m for m in MUTANTS if m.get("hint") == "banned-api" and m["stage"] == 1)
    assert "'soft' + 'max'" in folded["replace"]
    [found] = stage_file(tmp_path, 1, folded).uses_reached_from("softmax_naive", SOFTMAX)
    assert (found.name, found.where, found.how) == ("softmax", "softmax_naive", "string")


HELPERS = """import torch
import torch.nn as nn


def _normalise(x):
    return torch.softmax(x, dim=0)


def softmax_naive(x):
    return _normalise(x)


def exp_normalise(x):
    e = torch.exp(x)
    return e / e.sum()


def simple_self_attention(inputs):
    return torch.softmax(inputs @ inputs.T, dim=-1) @ inputs


def uses_the_naive_one(inputs):
    return torch.stack([softmax_naive(row) for row in inputs])


class Attention(nn.Module):
    def forward(self, x):
        return torch.nn.functional.scaled_dot_product_attention(x, x, x)


class Wrapper(nn.Module):
    def forward(self, x):
        return x
"""


def test_a_name_counts_against_the_function_that_spells_it_and_those_that_call_it():
    scan = SourceScan(HELPERS)
    [found] = scan.uses_reached_from("softmax_naive", SOFTMAX)
    assert (found.name, found.line, found.where) == ("softmax", 6, "_normalise")
    assert scan.uses_reached_from("exp_normalise", SOFTMAX) == []
    assert [u.where for u in scan.uses_reached_from("simple_self_attention", SOFTMAX)] == ["simple_self_attention"]
    # a caller's shortcut is not its callee's
    assert scan.uses_reached_from("uses_the_naive_one", SOFTMAX) == scan.uses_reached_from("softmax_naive", SOFTMAX)
    [attention] = scan.uses_reached_from("Attention", ATTENTION_BY_HAND.spelled)
    assert (attention.name, attention.where) == ("scaled_dot_product_attention", "Attention.forward")
    assert scan.uses_reached_from("Wrapper", ATTENTION_BY_HAND.spelled) == []


@pytest.mark.parametrize(
    "source, target",
    [
        ("from torch.nn.functional import softmax as sm, relu\ndef f(x):\n    return sm(x, 0)\n", "f"),
        ("from torch.nn.functional import *\ndef f(x):\n    return softmax(x, 0)\n", "f"),
        ("import torch\nsm = torch.softmax\ndef f(x):\n    return sm(x, 0)\n", "f"),
        ("import torch.nn.functional as F\nglobals()['helper'] = F.softmax\ndef f(x):\n    return helper(x, 0)\n", "f"),
        ("import torch.nn as nn\ndef f(x):\n    return nn.Softmax(dim=0)(x)\n", "f"),
        ("import torch\ndef f(x):\n    return torch.ops.aten._softmax(x, 0, False)\n", "f"),
        (
            "import torch.nn.functional as F\ndef f(x):\n    '''softmax'''\n    return getattr(F, f.__doc__)(x, 0)\n",
            "f",
        ),
        ("import torch.nn.functional as F\ndef f(x):\n    return getattr(F, b'softmax'.decode())(x, 0)\n", "f"),
        (
            "import torch\nclass Base:\n    def norm(self, x):\n        return x.softmax(0)\nclass f(Base):\n    pass\n",
            "f",
        ),
    ],
    ids=["imported-as", "star-import", "module-alias", "globals", "module", "aten", "docstring", "bytes", "base-class"],
)
def test_a_shortcut_is_found_however_it_is_reached(source, target):
    assert SourceScan(source).uses_reached_from(target, SOFTMAX)


@pytest.mark.parametrize(
    "source, name",
    [
        ("import sys\ndef f():\n    return sys._getframe(1).f_locals\n", "_getframe"),
        ("from sys import _getframe as up\n", "_getframe"),
        ("import sys\ndef f():\n    return getattr(sys, '_get' + 'frame')(1)\n", "_getframe"),
        ("def f(frame):\n    return frame.f_back\n", "f_back"),
        ("def f(frame):\n    return frame.f_globals\n", "f_globals"),
        ("import inspect\ndef f():\n    return inspect.currentframe()\n", "currentframe"),
        ("import inspect as look\ndef f():\n    return look.stack()\n", "inspect.stack"),
        ("import inspect\ndef f():\n    return getattr(inspect, 'stack')()\n", "inspect.stack"),
        ("import gc\ndef f(x):\n    return gc.get_referrers(x)\n", "get_referrers"),
        ("import gc\nobjects = gc.get_objects()\n", "get_objects"),
        ("import ctypes\n", "ctypes"),
        ("def f():\n    return __import__('ctypes')\n", "__import__"),
        ("import importlib\ndef f():\n    return importlib.import_module('inspect').stack()\n", "inspect.stack"),
        ("def f():\n    return __import__('gc').get_objects()\n", "get_objects"),
        ("import sys\nsys.settrace(None)\n", "settrace"),
        ("import threading\nthreading.setprofile(None)\n", "setprofile"),
        (
            "import torch\ndef f(x):\n    with torch._C.DisableTorchFunction():\n        return x\n",
            "DisableTorchFunction",
        ),
        ("from torch.utils._python_dispatch import _disable_current_modes\n", "_disable_current_modes"),
        ("import torch.utils._python_dispatch as d\n", "_python_dispatch"),
        (
            "from torch.overrides import TorchFunctionMode\nclass Quiet(TorchFunctionMode):\n    pass\n",
            "TorchFunctionMode",
        ),
        ("from torch.utils._python_dispatch import TorchDispatchMode\n", "TorchDispatchMode"),
        (
            "import torch\nstack = torch.overrides._get_current_function_mode_stack()\n",
            "_get_current_function_mode_stack",
        ),
        ("import torch\nguard = torch._C._ExcludeDispatchKeyGuard\n", "_ExcludeDispatchKeyGuard"),
        (
            "import torch\ndef f(x):\n    return getattr(torch._C, 'Disable' + 'TorchFunction')\n",
            "DisableTorchFunction",
        ),
        ("exec('x = 1')\n", "exec"),
        ("def f():\n    return eval('__imp' + 'ort__(\"sys\")')\n", "eval"),
        ("import builtins\nbuiltins.set = list\n", "builtins"),
        ("import sys\nrecorder = sys.modules['grader.runner.shortcuts']\n", "sys.modules"),
        ("def f():\n    return object.__subclasses__()\n", "__subclasses__"),
    ],
    ids=lambda value: value if value.isidentifier() or "." in value and " " not in value else None,
)
def test_a_reach_into_the_grader_is_found_however_it_is_spelt(source, name):
    assert name in {use.name for use in SourceScan(source).tampering}


@pytest.mark.parametrize(
    "source",
    [
        "import torch\ndef f(x):\n    return torch.stack([x, x])\n",
        "def f(module):\n    module.eval()\n    return module.training\n",
        "import torch\n@torch.no_grad()\ndef f(x):\n    with torch.inference_mode():\n        return torch.compile\n",
        "mode = 'eval'\n",
        "def f():\n    '''Do not call sys._getframe or torch.softmax here.'''\n",
    ],
)
def test_names_that_only_look_alike_are_no_reach_into_the_grader(source):
    assert SourceScan(source).tampering == []


def test_the_place_of_a_reach_is_named():
    [use] = SourceScan(
        "import torch\n\n\nclass A:\n    def forward(self, frame):\n        return frame.f_back\n"
    ).tampering
    assert (use.line, use.where) == (6, "A.forward")
    [use] = SourceScan("import ctypes\n").tampering
    assert (use.line, use.where) == (1, MODULE_LEVEL)


def test_a_file_that_does_not_parse_holds_nothing_to_find():
    scan = SourceScan(b"def softmax_naive(x):\n    return torch.softmax(x\n")
    assert scan.tampering == [] and scan.uses_reached_from("softmax_naive", SOFTMAX) == []


@pytest.mark.parametrize("stage", sorted(STAGE_MODULES))
def test_the_solutions_take_no_shortcut_and_reach_nothing(stage, tmp_path):
    scan = stage_file(tmp_path, stage)
    assert scan.tampering == [] and shortcuts_taken(scan, stage) == {}


@pytest.mark.parametrize("mutant", MUTANTS, ids=[f"stage{m['stage']}-{m.get('hint') or m['what']}" for m in MUTANTS])
def test_a_mutant_is_found_only_when_it_takes_a_shortcut_or_hides(mutant, tmp_path):
    scan = stage_file(tmp_path, mutant["stage"], mutant)
    # the mutant that hides from the recorder hides F.scaled_dot_product_attention
    assert bool(shortcuts_taken(scan, mutant["stage"])) == bool(truthful(mutant) & {"banned-api", "recorder-tampered"})
    assert bool(scan.tampering) == ("recorder-tampered" in truthful(mutant))


@pytest.mark.parametrize("attack", [a for a in ATTACKS if a not in BUILT_NAMES], ids=lambda attack: attack["what"])
def test_every_attack_that_spells_its_names_is_found(attack, tmp_path):
    assert stage_file(tmp_path, attack["stage"], attack).tampering


@pytest.mark.parametrize("alternative", ALTERNATIVES, ids=[a["what"] for a in ALTERNATIVES])
def test_a_right_answer_written_otherwise_takes_no_shortcut_and_reaches_nothing(alternative, tmp_path):
    scan = stage_file(tmp_path, alternative["stage"], alternative)
    assert scan.tampering == [] and shortcuts_taken(scan, alternative["stage"]) == {}


def test_right_answers_written_otherwise_score_full_marks(tmp_path):
    for index, alternative in enumerate(ALTERNATIVES):
        learner_copy(tmp_path / "class" / f"alternative-{index:02d}", alternative)
    batch(tmp_path / "class", tmp_path / "out", "--course", str(BONUS_ON))
    rows = (tmp_path / "out" / "grades.csv").read_text().splitlines()[1:]
    assert len(rows) == len(ALTERNATIVES) >= 10
    # every stage at its maximum (the bonus stages are extra credit here: the total passes the core's maximum)
    reports = [
        json.loads(path.read_text()) for path in sorted((tmp_path / "out" / "students").glob("alternative-*.json"))
    ]
    assert len(reports) == len(rows)
    short = [
        (
            path.stem,
            stage["id"],
            [(c["id"], c["hint"], c["message"][:400]) for c in stage["checks"] if c["status"] != "passed"],
        )
        for path, report in zip(sorted((tmp_path / "out" / "students").glob("alternative-*.json")), reports)
        for stage in report["stages"]
        if stage["score"] != stage["max_score"]
    ]
    assert short == []


@pytest.mark.parametrize("attack", BUILT_NAMES, ids=lambda attack: attack["what"])
def test_an_attack_by_names_built_at_run_time_shows_the_scan_nothing(attack, tmp_path):
    # What catches these is the route switched off where the shortcut check runs (tests/test_tampering.py).
    scan = stage_file(tmp_path, attack["stage"], attack)
    assert scan.tampering == [] and shortcuts_taken(scan, attack["stage"]) == {}


def test_names_chained_onto_themselves_cost_the_scan_little_and_hide_nothing():
    """Red team round 7: `a = a.x0`, `a = a.x1`, ... doubled the paths the scan followed at each line (8 lines held
    the judge a minute a check). Paths are followed 6 names deep, and a reach behind such a chain is still found;
    a chain long enough to pass the scan's budget is code the judge will not read: hiding, as code nested too deep."""
    from grader.judge import source_scan

    def chained(lines: int) -> str:
        chain = "".join(f"    a = a.x{i}\n" for i in range(lines))
        return f"import inspect\n\n\ndef helper():\n    a = None\n{chain}    b = inspect\n    return b.stack()\n"

    assert sum(map(len, source_scan._aliases(source_scan.ast.parse(chained(8))).values())) <= source_scan.ALIAS_BUDGET
    assert any(use.name == "inspect.stack" for use in SourceScan(chained(8)).tampering)
    with pytest.raises(RecursionError):
        SourceScan(chained(40))


def test_statements_that_bind_and_read_one_name_cost_the_scan_in_proportion():
    """Red team round 8: 16,000 lines of `a = a` made each statement list every other (16,000² links, 2.3 GiB in the
    judge). A statement refers to names, each walked once, and what a function reaches is found as before."""
    lines = 3000
    source = "import inspect\na = 0\n" + "a = a\n" * lines + "b = inspect\n\n\ndef helper():\n    return a, b.stack()\n"
    scan = SourceScan(source)
    assert sum(len(refers) for refers in scan._refers.values()) <= lines + 10
    assert [use.name for use in scan.uses_reached_from("helper", {"inspect.stack"})] == ["inspect.stack"]
