"""note.fixed_device: code that makes a tensor on a fixed device (no device=) where its inputs' device belongs.

The book makes its scores with torch.empty(n), on the CPU whatever the inputs' device: right on the CPU, an
error or a CPU result on a GPU. What we know beyond the book is a note, 0 points unless a course prices it.
"""

from typing import cast

import torch

from grader.judge.checks.support import LearnerTensor, build
from grader.judge.verdict import CheckFailed
from grader.sandbox.workers import LearnerWorkers


def expect_device_followed(learner: LearnerWorkers, stage: int, cases: dict[str, list]) -> None:
    """note.fixed_device of functions: each, called on its arguments, makes no tensor on a fixed device that
    meets them and returns its result on their device (on a GPU the one fails, the other hands the caller a
    CPU tensor). One note names every function it concerns."""
    found = []
    for function, args in cases.items():
        reply = cast(dict, learner.request(stage, "call", function=function, args=list(args), watch_device=True))
        result, given = reply["result"], [a for a in reply["args_after"] if isinstance(a, torch.Tensor)]
        if failed := fixed_device_failure(reply, function, "its arguments"):
            found.append(failed)
        elif (
            isinstance(result, torch.Tensor)
            and given
            and cast(LearnerTensor, result).learner_device != cast(LearnerTensor, given[0]).learner_device
        ):
            found.append(
                CheckFailed(
                    f"{function} returned its result on {cast(LearnerTensor, result).learner_device} for arguments "
                    f"on {cast(LearnerTensor, given[0]).learner_device}: a tensor it made without device= holds the "
                    "result",
                    "fixed-device",
                )
            )
    if found:
        raise CheckFailed("\n".join(f.message for f in found), found[0].hint)


def fixed_device_failure(reply: dict, who: str, meets: str) -> CheckFailed | None:
    """note.fixed_device's failure, as a call proved it: a tensor made without device= met ``meets`` (the
    worker's watch), or the call failed on the GPU and was answered from the CPU (``device_fallback``)."""
    operation, on_gpu = reply.get("fixed_device_use"), reply.get("device_fallback")
    if operation is None and on_gpu is None:
        return None
    made = (
        f"{who} makes a tensor on the default device, the CPU (no device=), and combines it with {meets} ({operation})"
        if operation
        else f"{who} fails on the GPU"
    )
    then = (
        f": on the GPU it raised {on_gpu}. The other checks graded it on the CPU"
        if on_gpu
        else ": on a GPU that raises an error, or leaves the result on the CPU"
    )
    return CheckFailed(made + then, "fixed-device")


def device_hint(reply: dict, cls: str) -> CheckFailed | None:
    """The failure a module's forward proves: a tensor made on a fixed device meets the module's own."""
    return fixed_device_failure(reply, f"{cls}.forward", "the module's tensors")


def expect_no_fixed_device(learner, stage: int, cls: str, args: list, x: torch.Tensor) -> None:
    """The note.fixed_device of a module: its forward makes no tensor on a fixed device that meets its own."""
    moved = device_hint(build(learner, stage, cls, args, device_input=x), cls)
    if moved is not None:
        raise moved
