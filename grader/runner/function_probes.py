"""A worker's requests about a learner function beyond calling it: its gradients (the judge compares them with
the maths'), and a call on inputs laid out as an attention module passes them (not contiguous in memory).

Apart from probes.py, which holds the module requests; registered in the same table (probes.PROBES)."""

import torch

from grader.runner.implementation import Implementation
from grader.runner.probes import _to, learner_value, probe


@probe
def input_gradients(impl: Implementation, device: str, function: str, args: list, weighting: torch.Tensor) -> dict:
    """Call ``function(*args)`` with autograd on for every floating tensor argument and go back from
    ``(result * weighting).sum()``: "gradients" holds each such argument's gradient (None where it got none),
    "detached" says the result is outside autograd (torch.tensor([...]), .detach(), .item(), no_grad)."""
    target = impl.name(function)
    inputs = [_to(device, a) for a in args]
    for tensor in inputs:
        if isinstance(tensor, torch.Tensor) and tensor.is_floating_point():
            tensor.requires_grad_(True)
    result = target(*inputs)
    if not isinstance(result, torch.Tensor) or result.shape != weighting.shape:
        # not a tensor of the documented shape: the result checks say what is wrong with it
        return {"result": learner_value(result), "detached": False, "gradients": None}
    shown = result.detach().clone()
    if not result.requires_grad:
        return {"result": shown, "detached": True, "gradients": None}
    try:
        (result.to(torch.float64) * weighting.to(device, torch.float64)).sum().backward()
    except RuntimeError as error:  # forward ran; autograd cannot go back through it
        return {"result": shown, "detached": False, "gradients": None, "backward_raised": str(error)[:300]}
    return {
        "result": shown,
        "detached": False,
        "gradients": [
            (t.grad.detach().cpu() if t.grad is not None else None) if isinstance(t, torch.Tensor) else None
            for t in inputs
        ],
    }


@probe
def call_strided(impl: Implementation, device: str, function: str, args: list, kwargs: dict | None = None) -> dict:
    """Call ``function`` with every tensor argument of three or more dimensions as a view whose last-but-two and
    last-but-one axes are swapped in memory, as x.view(b, n, heads, head_dim).transpose(1, 2) leaves the heads an
    attention module passes: the same values, not contiguous (a view(-1, L, E) of them fails)."""

    def strided(value: object) -> object:
        value = _to(device, value)
        if isinstance(value, torch.Tensor) and value.dim() >= 3:
            return value.transpose(-3, -2).contiguous().transpose(-3, -2)
        return value

    target = impl.name(function)
    with torch.no_grad():
        result = target(*map(strided, args), **{name: strided(v) for name, v in (kwargs or {}).items()})
    return {"result": learner_value(result)}
