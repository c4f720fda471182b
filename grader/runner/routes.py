"""Switching off torch's own routes to what an exercise builds, in a worker, before learner code loads.

A shortcut check runs the learner's function where torch's softmax (or attention, or solvers) is not
there to call: every aten operator whose name says so refuses at every dispatch key that has a kernel
for it, and so do the Python functions of torch's modules of that name (torch._refs, torch._decomp,
F.multi_head_attention_forward, which compute with plain operations). A right answer then shows work
done by hand, whatever the worker reports about itself.

The registrations are held by handles that no Python container references (a reference count taken
by hand), so learner code cannot find them to take them back; it can register kernels of its own over
them, but those have to compute the answer, which is the work. Undoing it from the inside (raw memory
through ctypes) is what the source scan calls tampering (grader.judge.tampering_names).
"""

import ctypes
import functools
import sys
import warnings
from dataclasses import dataclass

import torch

# Each route by the fragments of the names that make it; names that hold a fragment by chance are excepted.
ROUTES: dict[str, tuple[str, ...]] = {
    "softmax": ("softmax",),
    "attention": ("attention",),
    "solvers": ("lstsq", "pinv", "solve", "inverse", "linalg_inv", "tensorinv"),
}
NOT_A_ROUTE = frozenset({"resolve_conj", "resolve_neg", "slice_inverse"})
# Modules whose Python functions reach a route, and those below torch._refs and torch._decomp, which
# compute one from plain operations (all of them loaded with torch itself).
PYTHON_MODULES = ("torch", "torch.nn.functional", "torch.special", "torch.linalg")
PYTHON_PACKAGES = ("torch._refs", "torch._decomp")
STAND_IN_KERNEL = "_scaled_dot_product_attention_math"  # what stage 6's stand-in runs where attention is off


class RouteSwitchedOff(RuntimeError):
    """Learner code called a route the grader switched off for this check."""


@dataclass(frozen=True)
class SwitchedOff:
    """What a worker runs without: ``routes`` (keys of ROUTES), except the operators named in ``kept``."""

    routes: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()

    @classmethod
    def from_wire(cls, sent: dict | None) -> "SwitchedOff":
        """The value the judge sent as dataclasses.asdict (None: nothing switched off)."""
        return cls(tuple((sent or {}).get("routes", ())), tuple((sent or {}).get("kept", ())))

    def __bool__(self) -> bool:
        return bool(self.routes)

    def covers(self, name: str) -> bool:
        """Whether an operator or function called ``name`` belongs to a switched-off route."""
        if "backward" in name or name in NOT_A_ROUTE or name in self.kept:
            return False
        return any(fragment in name for route in self.routes for fragment in ROUTES[route])


def switch_off(off: SwitchedOff) -> int:
    """Make every operator and function of ``off`` refuse in this process; how many registrations it made."""
    if not off:
        return 0
    made = 0
    with warnings.catch_warnings():  # torch warns of each kernel it overrides
        warnings.simplefilter("ignore")
        for qualified, keys in _kernels().items():
            if off.covers(qualified.removeprefix("aten::").split(".")[0]):
                for key in keys:
                    handle = torch._C._dispatch_library("IMPL", "aten", key)
                    handle.impl(qualified.removeprefix("aten::"), key, _refusal(qualified), False)
                    ctypes.pythonapi.Py_IncRef(ctypes.py_object(handle))  # kept alive, referenced by nothing
                    made += 1
    for module, attribute in _functions():
        if off.covers(attribute):
            setattr(module, attribute, _refusal(f"{module.__name__}.{attribute}"))
            made += 1
    return made


def prepare() -> None:
    """Find every operator and function a route could switch off, once, in the process workers are forked
    from: asking the dispatcher which keys hold kernels takes a tenth of a second."""
    _kernels()
    _functions()


_EVERY_ROUTE = SwitchedOff(tuple(ROUTES))


@functools.cache
def _kernels() -> dict[str, list[str]]:
    """Each aten overload of any route (aten::_softmax.out), with the dispatch keys that hold a kernel for it."""
    found = {}
    for qualified in sorted(torch._C._dispatch_get_all_op_names()):
        namespace, _, name = qualified.partition("::")
        if namespace == "aten" and _EVERY_ROUTE.covers(name.split(".")[0]):
            found[qualified] = _kernel_keys(qualified)
    return found


@functools.cache
def _functions() -> list[tuple[object, str]]:
    """The Python functions of any route in PYTHON_MODULES and PYTHON_PACKAGES, as (module, attribute)."""
    found = []
    for module_name, module in list(sys.modules.items()):
        if module_name in PYTHON_MODULES + PYTHON_PACKAGES or module_name.startswith(
            tuple(package + "." for package in PYTHON_PACKAGES)
        ):
            for attribute, value in list(vars(module).items()):
                if callable(value) and not isinstance(value, type) and _EVERY_ROUTE.covers(attribute):
                    found.append((module, attribute))
    return found


_KEYS = tuple(torch._C.DispatchKey.__members__)


def _kernel_keys(qualified: str) -> list[str]:
    keys = []
    for key in _KEYS:
        try:
            if torch._C._dispatch_has_kernel_for_dispatch_key(qualified, key):
                keys.append(key)
        except RuntimeError:  # a range marker of the enum, no key
            continue
    return keys


def _refusal(name: str):
    def refuse(*args, **kwargs):
        raise RouteSwitchedOff(f"{name} is switched off here: the grader checks that this is computed by hand")

    return refuse
