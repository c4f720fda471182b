"""A watch on the tensors learner code makes without a device: what fails on a GPU, seen on a CPU.

The book makes its scores with torch.empty(n), on the CPU whatever the inputs' device; the watch notes the
first operation that combines such a tensor with the module's (or the arguments') tensors.
"""

import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode

# Functions that make a new tensor on the default device unless given one.
FACTORIES = {
    "ones",
    "zeros",
    "full",
    "empty",
    "arange",
    "eye",
    "rand",
    "randn",
    "randint",
    "tensor",
    "linspace",
    "as_tensor",
}


class FixedDeviceWatch(TorchFunctionMode):
    """Follows the tensors forward makes without a device, and notes the first operation that
    combines one (more than one number: CPU scalars are fine anywhere) with the module's tensors.

    A tensor made from such tensors alone inherits the mark; .to(device), .to(tensor) and .cuda()
    clear it. On a GPU that combination is exactly what fails.
    """

    def __init__(self):
        super().__init__()
        self.fixed: dict[int, torch.Tensor] = {}  # id -> tensor, kept alive so ids stay unique
        self.mixed: str | None = None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        inputs = list(_tensors((args, kwargs)))
        moved = name in ("to", "cuda") and (
            kwargs.get("device") is not None
            or name == "cuda"
            or any(isinstance(a, (torch.device, str, torch.Tensor)) for a in args[1:])
        )
        marked = [t for t in inputs if id(t) in self.fixed and t.numel() > 1]
        # Advanced indexing moves CPU index tensors to the indexed tensor's device (PyTorch's own
        # test_index_cuda_with_cpu): only the indexed tensor itself must be on the module's device.
        indexing = name == "__getitem__" and bool(args) and id(args[0]) not in self.fixed
        if marked and not moved and not indexing and len(marked) < len(inputs) and self.mixed is None:
            self.mixed = name  # noted before the call: on a GPU the call itself raises
        result = func(*args, **kwargs)
        if name in FACTORIES and "device" not in kwargs and not inputs:
            self._mark(result)
        elif marked and not moved and len(marked) == len(inputs):
            self._mark(result)
        return result

    def _mark(self, result) -> None:
        for t in _tensors(result):
            self.fixed[id(t)] = t


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)


def fixed_device_use(built: nn.Module, x: torch.Tensor) -> str | None:
    """The first operation of forward that combines a tensor made on a fixed device with the module's."""
    watch = FixedDeviceWatch()
    try:
        with torch.no_grad(), watch:
            built(x)
    except Exception:
        if watch.mixed is None:
            raise
    return watch.mixed
