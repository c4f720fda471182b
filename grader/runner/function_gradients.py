"""A worker's request for a learner function's gradients: the judge compares them with its own reference's.

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
