"""note.fixed_device and note.fixed_dtype: code that makes a tensor on a fixed device (no device=), or of a fixed
dtype (no dtype=), where its inputs' belong.

The book makes its scores with torch.empty(n), on the CPU whatever the inputs' device: right on the CPU, an
error or a CPU result on a GPU. What we know beyond the book is a note, 0 points unless a course prices it.
"""

from typing import cast

import torch

from grader.judge.checks.support import LearnerTensor, build
from grader.judge.verdict import CheckFailed
from grader.sandbox.workers import LearnerFailure, LearnerWorkers


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


# note.fixed_dtype: the same mistake seen through the dtype. A tensor made with the defaults (torch.zeros(n),
# torch.empty(n, n)) is float32 whatever the inputs are: float64 inputs then raise where it meets them, or come
# back as float32. The book's loops do it (context_vec = torch.zeros(query.shape)), so it is a note.
WIDE = torch.float64


def _widened(args: list) -> list:
    return [a.to(WIDE) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]


def dtype_failure(run, who: str, given: str) -> str | None:
    """What ``run(wide)`` (wide: True for float64, False for float32) proves about ``who``: it raises on float64
    while float32 runs, or hands back another dtype. None when float64 is kept, or float32 fails as well (the
    other checks' matter)."""
    try:
        result = run(True)
    except LearnerFailure as failure:
        if failure.kind != "exception":
            raise
        try:
            run(False)
        except LearnerFailure as again:
            if again.kind != "exception":
                raise  # not implemented, a crash, a timeout: the check fails as any would
            return None
        raised = f"{failure.type or failure.kind}: {failure.message}"
        return f"{who} raises on float64 {given} ({raised}) and runs on float32"
    dtype = cast(LearnerTensor, result).learner_dtype if isinstance(result, torch.Tensor) else None
    if dtype is not None and dtype != "float64":
        return f"{who} returns {dtype} for float64 {given}"
    return None


def raise_dtype_failures(found: list[str | None]) -> None:
    if failed := [f for f in found if f]:
        raise CheckFailed(
            "\n".join(failed) + ": a tensor made without dtype= (torch.zeros(n), torch.empty(n, n)) is float32 "
            "whatever it meets; make it from the inputs (torch.zeros_like, or dtype=x.dtype, device=x.device)",
            "fixed-dtype",
        )


def expect_dtype_followed(learner: LearnerWorkers, stage: int, cases: dict[str, list]) -> None:
    """note.fixed_dtype of functions: each, called on float64 arguments, runs and returns float64."""
    raise_dtype_failures(
        [
            dtype_failure(
                lambda wide, function=function, args=args: cast(
                    dict, learner.request(stage, "call", function=function, args=_widened(args) if wide else list(args))
                )["result"],
                function,
                "arguments",
            )
            for function, args in cases.items()
        ]
    )


def expect_module_dtype_followed(
    learner: LearnerWorkers, stage: int, cls: str, args: list, x: torch.Tensor, steps: list | None = None
) -> None:
    """note.fixed_dtype of a module: ``cls(*args).double()`` runs forward on float64 ``x`` (through the cache's
    ``steps`` where given) and returns float64."""
    raise_dtype_failures([module_dtype_failure(learner, stage, cls, args, x, steps)])


def module_dtype_failure(
    learner: LearnerWorkers, stage: int, cls: str, args: list, x: torch.Tensor, steps: list | None = None
) -> str | None:
    """What float64 proves about ``cls(*args)`` (see dtype_failure), or None."""

    try:
        if build(learner, stage, cls, args)["structure"]["plain_tensors"]:
            return None  # weights held as plain tensors stay float32 under .double(): not-parameters says why
    except LearnerFailure as failure:
        if failure.kind != "exception":
            raise  # not implemented, a crash, a timeout: the check fails as any would
        return None

    def last_output(wide: bool) -> object:
        dtype = "float64" if wide else None
        if steps is None:
            return build(learner, stage, cls, args, inputs=[x], dtype=dtype)["outputs"][0]
        return build(learner, stage, cls, args, probe="cached_module", x=x, steps=steps, dtype=dtype)["steps"][-1][
            "output"
        ]

    return dtype_failure(last_output, f"{cls}{tuple(args)}.double()", "inputs")
