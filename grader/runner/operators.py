"""Every torch operator learner code may reach, and the refusal of every other, in the zygote before any worker
is forked (an allowlist at the dispatcher: grader/core/operators.toml says what it holds and why).

An operator is allowed by its name (aten's, without the overload), or because torch tags it ``pointwise`` or
``reduction``, or because its result is a view of an input or no tensor at all (its schema says so: a dtype, a
size), or as the backward or another spelling of an allowed one. Every overload of every other
operator of every namespace refuses, at every dispatch key that holds a kernel for it: aten's convolutions,
recurrent cells, norms, losses, transforms, decompositions and fused kernels, and all of quantized::, prims::,
mkldnn:: and the rest, forward or backward. A name switched off by a route (grader.runner.routes) refuses as that
route's, whatever this list says.

The registrations are held as grader.runner.routes holds its own: by handles no Python container references.

With ``record`` instead, nothing is refused: each of the worker's requests runs under torch's profiler, and the
names of the operators it reached go to the judge (``python -m grader.authoring.operators`` derives the list).
"""

import ctypes
import functools
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from grader.runner.route_names import OUTSIDE_THE_LIST, SWITCHED_OFF_HERE
from grader.runner.routes import RouteSwitchedOff

_ALLOWED: list[dict] = []  # what refuse_all_but was given, for operators registered later (refuse_new)


def refuse_all_but(allowed: dict) -> int:
    """Make every operator outside ``allowed`` ({"names": [...], "tags": [...], "views": bool}) refuse in this
    process and every process forked from it; how many registrations it made."""
    _ALLOWED[:] = [allowed]
    return _refuse(allowed, kernels())


def refuse_new() -> int:
    """Refuse the operators registered since refuse_all_but (by a torch module imported later: torch.onnx's) that
    the list does not allow; how many registrations it made."""
    if not _ALLOWED:
        return 0
    known = kernels()
    new = {q: _keys(q) for q in torch._C._dispatch_get_all_op_names() if q not in known}
    known.update(new)  # each once
    return _refuse(_ALLOWED[0], new)


def _refuse(allowed: dict, overloads: dict[str, tuple[str, ...]]) -> int:
    names, tags, views = frozenset(allowed.get("names", ())), frozenset(allowed.get("tags", ())), allowed.get("views")
    handles: dict[tuple[str, str], object] = {}
    made = 0
    with warnings.catch_warnings():  # torch warns of each kernel it overrides
        warnings.simplefilter("ignore")
        for qualified, keys in overloads.items():
            namespace, _, name = qualified.partition("::")
            if namespace == "aten" and _allowed(name.split(".")[0], names, tags, bool(views)):
                continue
            for key in keys:
                if (namespace, key) not in handles:
                    handles[namespace, key] = torch._C._dispatch_library("IMPL", namespace, key)
                handles[namespace, key].impl(name, key, _refusal(qualified), False)  # type: ignore[attr-defined]
                made += 1
    for handle in handles.values():
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(handle))  # kept alive, referenced by nothing
    return made


@functools.cache
def kernels() -> dict[str, tuple[str, ...]]:
    """Every operator overload (aten::_softmax.out), with the dispatch keys that hold a kernel of its own for it
    that computes values (alias keys such as CompositeImplicitAutograd included; fallthroughs, fallbacks and
    kernels that pass the call on not)."""
    return {qualified: _keys(qualified) for qualified in torch._C._dispatch_get_all_op_names()}


def _keys(qualified: str) -> tuple[str, ...]:
    keys = []
    for line in torch._C._dispatch_dump(qualified).splitlines():
        key, colon, rest = line.partition(":")
        if not colon or " " in key or "fallthrough" in rest or key in ("name", "schema", "debug"):
            continue  # a heading, or a key that passes calls on without a kernel
        keys.append(key.removesuffix("[alias]"))
    computing = [key for key in keys if _computes(key)]
    # an operator whose autograd kernel is its only one computes there (a custom autograd function)
    return tuple(computing or [key for key in keys if key.startswith("Autograd")])


# Keys whose kernels only pass the call on to a key below (after autocasting, tracing, functionalising, batching,
# recording a view or the graph of gradients), or compute no values (Meta): a refusal at the keys below holds there.
PASSING_ON = (
    "Meta",
    "Autocast",
    "Tracer",
    "Functionalize",
    "ADInplaceOrView",
    "BackendSelect",
    "Conjugate",
    "Negative",
    "ZeroTensor",
    "Python",
    "Mode",
    "PreDispatch",
    "Autograd",
    "Batched",
    "PrivateUse",
)


def _computes(key: str) -> bool:
    """Whether a kernel at ``key`` computes values: a backend's (CPU, CUDA, SparseCPU, QuantizedCPU, ...), a
    composite one's (CompositeImplicitAutograd, ...) or a batching decomposition's."""
    return (
        key.startswith("Composite")
        or key == "FuncTorchBatchedDecomposition"
        or not any(part in key for part in PASSING_ON)
    )


@functools.cache
def _allowed(packet: str, names: frozenset[str], tags: frozenset[str], views: bool) -> bool:
    """Whether aten's ``packet`` is allowed: by name, by one of its overloads' tags or views, as the backward of an
    allowed operator (select_backward of select, _softmax_backward_data of _softmax), or as another spelling of
    one (abs_ of abs, __ior__ of bitwise_or)."""
    if packet in names:
        return True
    forward = packet.removesuffix("_data").removesuffix("_backward")
    if forward != packet and forward and _allowed(forward, names, tags, views):
        return True
    if _variant_of(packet) and _allowed(_variant_of(packet), names, tags, views):
        return True
    overloads = _overloads().get(packet, ())
    if overloads and all(_makes_no_tensor(qualified) for qualified in overloads):
        return True  # promote_types, is_floating_point, size: facts about tensors, never a tensor's values
    return any(_overload_tags(qualified) & tags or (views and _is_view(qualified)) for qualified in overloads)


def _variant_of(packet: str) -> str:
    """The operator ``packet`` is another spelling of: abs_ of abs (in place), __iand__ of __and__, __and__ of
    bitwise_and (Python's operators); "" where it is none."""
    if packet.startswith("__i") and packet.endswith("__"):
        return f"__{packet[3:]}"
    if packet.startswith("__") and packet.endswith("__"):
        return f"bitwise_{packet[2:-2]}" if packet[2:-2] in ("and", "or", "xor") else ""
    if packet.endswith("_") and not packet.startswith("_"):
        return packet[:-1]
    return ""


@functools.cache
def _overloads() -> dict[str, list[tuple[str, str]]]:
    """aten's operators, each with its overloads as (name, overload): ("mm", "out")."""
    found: dict[str, list[tuple[str, str]]] = {}
    for qualified in kernels():
        namespace, _, name = qualified.partition("::")
        if namespace == "aten":
            packet, _, overload = name.partition(".")
            found.setdefault(packet, []).append((f"aten::{packet}", overload))
    return found


def _overload_tags(qualified: tuple[str, str]) -> set[str]:
    found = torch._C._get_operation_overload(*qualified)
    return set() if found is None else {str(tag).rpartition(".")[2] for tag in found[2]}


def _makes_no_tensor(qualified: tuple[str, str]) -> bool:
    """Whether the overload returns no tensor and writes none of its arguments (a dtype, a size, a flag)."""
    schema = torch._C._get_schema(*qualified)
    writes = any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)
    return not writes and not any("Tensor" in str(r.type) for r in schema.returns)


def _is_view(qualified: tuple[str, str]) -> bool:
    """Whether the overload's result aliases an input without writing it (view, transpose, select, ...)."""
    returns = [r.alias_info for r in torch._C._get_schema(*qualified).returns if r.alias_info is not None]
    return bool(returns) and not any(r.is_write for r in returns)


@functools.cache
def _refusal(name: str):
    def refuse(*args, **kwargs):
        raise RouteSwitchedOff(f"{name}{SWITCHED_OFF_HERE}{OUTSIDE_THE_LIST}")

    return refuse


@contextmanager
def recorded(record: bool) -> Iterator[set[str] | frozenset[str]]:
    """Yields a set that fills, once the block ends, with the operators the block reached ("aten::mm"),
    where ``record``; otherwise an empty frozenset, and nothing is watched."""
    if not record:
        yield frozenset()
        return
    seen: set[str] = set()
    with torch.autograd.profiler.profile() as profile:
        yield seen
    seen.update(event.name for event in profile.function_events if "::" in event.name and " " not in event.name)
