"""softmax_naive computed by torch's autograd earns nothing: the gradient (or a tangent) of a log-sum-exp is the
softmax, which the engine computes from plain operations (red team round 6). Where softmax is switched off,
autograd is too (grader/runner/routes.py: _switch_off_differentiation), however it is asked back, and no thread
starts (grader/runner/seccomp.py), which would start with autograd on and out of the recorder's sight."""

import pytest

from tests.grading import grade, learner_copy

SOLUTION = "    exp_x = torch.exp(x)\n    return exp_x / exp_x.sum(dim=0)"
# Each spelt as an attacker spells it, past the source scan: names decoded at run time (each letter shifted).
NAMED = "    N = lambda parts: ''.join(chr(ord(c) - 1) for c in ''.join(parts))  # noqa: E731\n    ag = getattr(torch, N(['bvup', 'hsbe']))\n    lse = getattr(torch, N(['mph', 'tvnfyq']))\n"
ONE_HOTS = "    rows = []\n    for i in range(x.shape[0]):\n        v = torch.zeros_like(x)\n        v[i] = 1.0\n"
BACKWARD = "        t = x.detach().clone().requires_grad_(True)\n        getattr(lse(t, 0), N(['cbdl', 'xbse']))()\n"
ROUTES = {
    "autograd.grad": NAMED + "    with getattr(torch, N(['fobcmf', '`hsbe']))():\n"
    "        t = x.detach().clone().requires_grad_(True)\n        (g,) = getattr(ag, N(['hs', 'be']))(lse(t, 0), t)\n"
    "    return g.detach()",
    "func.jvp": NAMED + ONE_HOTS + "        jvp = getattr(getattr(torch, N(['gv', 'od'])), N(['k', 'wq']))\n"
    "        rows.append(jvp(lambda t: lse(t, 0), (x,), (v,))[1])\n    return torch.stack(rows)",
    "a new thread": NAMED
    + "    import importlib\n    out = {}\n\n    def work():\n"
    + BACKWARD
    + "        out['g'] = t.grad\n\n"
    "    th = importlib.import_module(N(['uisfbe', 'joh'])).Thread(target=work)\n    th.start()\n    th.join()\n"
    "    return out['g']",
    # The engine called by its own name in a thread, which the recorder does not watch, and a decoy exponential in
    # the watched one (the shortcut check wants to see one): 8/8 while threads could start (Python 3.11 audits none)
    "a new thread, a decoy beside": NAMED
    + "    import importlib\n    out = {}\n\n    def work():\n"
    + "        t = x.detach().clone().requires_grad_(True)\n        y = lse(t, 0)\n"
    + "        engine = getattr(getattr(ag, N(['Wbsjbcmf'])), N(['`fyfdvujpo', '`fohjof']))\n"
    + "        (out['g'],) = getattr(engine, N(['sv', 'o`cbdlxbse']))((y,), (torch.ones_like(y),), False, False, (t,), False, False)\n"
    + "\n    th = importlib.import_module(N(['uisfbe', 'joh'])).Thread(target=work)\n    th.start()\n    th.join()\n"
    + "    return out['g'].detach() + 0 * torch.exp(x)",
    # TorchScript's own operator sets grad mode past its setters (red team round 7): no graph is recorded all the same
    "torch.ops.aten.set_grad_enabled": NAMED
    + "    on = getattr(torch.ops.aten, N(['tfu`hsbe', '`fobcmfe']))\n"
    + "    on(True)\n"
    + "    t = x.detach().clone().requires_grad_(True)\n"
    + "    (g,) = getattr(ag, N(['hs', 'be']))(lse(t, 0), t)\n"
    + "    on(False)  # as it was: the worker's own no_grad() exits into grad mode off\n"
    + "    return g",
    "inference_mode(False)": NAMED
    + "    with getattr(torch, N(['jogfsfodf', '`npef']))(False):\n"
    + BACKWARD
    + "    return t.grad",
}


@pytest.mark.parametrize("route", ROUTES)
def test_softmax_through_autograd_earns_nothing(tmp_path, route):
    mutant = {"what": route, "file": "stage1_softmax.py", "find": SOLUTION, "replace": ROUTES[route]}
    _, report = grade(learner_copy(tmp_path / "submission", mutant, stages=[1]), "--stage", "1")
    checks = [c for c in report["stages"][0]["checks"] if c["target"] == "softmax_naive"]
    assert [c["id"] for c in checks if c["score"]] == []
    shortcut = next(c for c in checks if c["id"] == "shortcut.softmax_naive")
    if "thread" in route:  # it cannot start
        assert any("can't start new thread" in c["message"] for c in checks), checks
    elif route != "torch.ops.aten.set_grad_enabled":  # that one is let through, and autograd records nothing
        assert shortcut["hint"] == "banned-api", shortcut["message"]
