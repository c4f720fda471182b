"""The requests a judge may send a worker. Each runs learner code and returns plain results.

Modules are built on the CPU (under a seed when given, as the documents do), take any injected weights, then
move to the worker's device. Learner results that are not tensors come back as Foreign values, never live."""

import contextlib
from collections.abc import Callable

import torch
import torch.nn as nn

from grader.runner.book_calls import by_owner, renamed
from grader.runner.device_watch import FixedDeviceWatch, fixed_device_use
from grader.runner.document_examples import run_recipe
from grader.runner.implementation import Implementation, announcing
from grader.runner.protocol import Foreign
from grader.runner.seeding import manual_seed
from grader.runner.shortcuts import recording
from grader.runner.standins import seeded_transfer_pair

Probe = Callable[..., object]
PROBES: dict[str, Probe] = {}


def probe(function: Probe) -> Probe:
    PROBES[function.__name__] = function
    return function


def learner_value(value: object) -> object:
    """A learner's result as it may cross over: tensors as they are, anything else as Foreign."""
    if isinstance(value, torch.Tensor):
        return value
    return Foreign(type(value).__qualname__, _safe_repr(value))


def _safe_repr(value: object) -> str:
    try:
        return repr(value)[:500]
    except Exception:
        return "<unprintable>"


def _to(device: str, value: object) -> object:
    """A judge's argument on the worker's device, in the dtype the judge sent: the wire widens
    dtypes numpy lacks (bfloat16) to float64 and names the true one (protocol.learner_dtype)."""
    if not isinstance(value, torch.Tensor):
        return value
    sent = getattr(torch, getattr(value, "learner_dtype", ""), None)
    return value.to(device, sent if isinstance(sent, torch.dtype) else value.dtype)


@probe
def recipe(impl: Implementation, device: str, name: str) -> object:
    return learner_value(run_recipe(name, announcing(impl), device))


@probe
def recipes(impl: Implementation, device: str, names: list[str]) -> list:
    """Several recipes in one request: a check of a seeded module runs up to fifteen."""
    return [learner_value(run_recipe(name, announcing(impl), device)) for name in names]


@probe
def call(
    impl: Implementation,
    device: str,
    function: str,
    args: list,
    record: bool = False,
    watch_device: bool = False,
    kwargs: dict | None = None,
) -> dict:
    """Call a learner function with ``args`` and keyword arguments ``kwargs``; with ``record``, also
    name the torch operations it reached; with ``watch_device``, the first operation that mixed a
    tensor it made on a fixed device with its arguments."""
    target = impl.name(function)
    args = [_to(device, a) for a in args]
    kwargs = {name: _to(device, value) for name, value in (kwargs or {}).items()}
    watch = FixedDeviceWatch() if watch_device else contextlib.nullcontext()
    with torch.no_grad(), recording(record) as seen, watch:
        result = target(*args, **kwargs)
    # The arguments as the call left them: the judge compares them with what it sent.
    return {
        "result": learner_value(result),
        "ops": sorted(seen),
        "args_after": [learner_value(a) for a in args],
        "fixed_device_use": watch.mixed if watch_device else None,
    }


@probe
def module(
    impl: Implementation,
    device: str,
    cls: str,
    args: list,
    kwargs: dict | None = None,
    seed: int | None = None,
    state: dict | None = None,
    train: bool = False,
    inputs: list | None = None,
    repeat: int = 1,
    record: bool = False,
    heads: bool = False,
    return_state: bool = False,
    device_input: torch.Tensor | None = None,
    pairing: dict | None = None,
    dtype: str | None = None,
) -> dict:
    """Build a learner module, inject weights, run forward on each input ``repeat`` times.

    ``dtype``: the module and its inputs in that floating dtype ("float64"), as module.to(dtype) makes them.

    ``pairing``: documented projection -> the learner's (W_query -> W_k), the judge's choice of which of the
    learner's renamed projections takes which documented weight (else they pair by creation order:
    book_calls.renamed).

    ``device_input``: last, run forward on this input watching for tensors made without a device
    that meet the module's tensors (see FixedDeviceWatch): what fails on a GPU, seen on a CPU.
    """
    built, report = _built(impl, device, cls, args, kwargs, seed, state, return_state, pairing, dtype)
    if built is None:
        return report
    built.train(train)
    outputs, head_outputs = [], []
    with torch.no_grad(), recording(record) as seen:
        for x in inputs or []:
            x = x.to(device, _floating(dtype))
            outputs.extend(learner_value(built(x)) for _ in range(repeat))
            if heads:
                head_outputs.append([learner_value(head(x)) for head in built.heads])
    report.update(outputs=outputs, head_outputs=head_outputs, ops=sorted(seen))
    if inputs:  # what forward left of the buffers: a forward leaves its module as it found it
        report["buffers_after"] = [[name, list(b.shape)] for name, b in built.named_buffers()]
    if device_input is not None:
        report["fixed_device_use"] = fixed_device_use(built, device_input.to(device))
    return report


@probe
def gradients(impl: Implementation, device: str, cls: str, args: list, x: torch.Tensor) -> dict:
    """Build ``cls(*args)`` (in eval mode: no dropout), run forward on ``x`` with autograd on and backward from a
    random weighting of its output (a plain sum over a softmax's axis is constant): "no_gradient" lists the
    parameters that got none (W.data, .detach(), no_grad: right numbers, nothing trained)."""
    built, report = _built(impl, device, cls, args, None, None, None, False)
    assert built is not None  # no state injected: nothing to reject
    built.eval()
    x = x.to(device)
    output = built(x)
    if not isinstance(output, torch.Tensor):
        report["no_gradient"] = []  # not one tensor: the result checks say so
        return report
    if output.requires_grad:
        try:
            weighting = torch.rand(output.shape, generator=torch.Generator().manual_seed(0)).to(device)
            (output.float() * weighting).sum().backward()
        except RuntimeError as error:  # forward ran; autograd cannot go back through it (may only veto)
            report["no_gradient"], report["backward_raised"] = [], str(error)[:300]
            return report
    # named: parameters that move the output with no gradient, or one of zeros (torch.round); unused: result checks
    report["no_gradient"] = [
        n
        for n, p in built.named_parameters()
        if p.requires_grad and (p.grad is None or not p.grad.any()) and _moves(built, x, p, output)
    ]
    return report


def _moves(built: nn.Module, x: torch.Tensor, parameter: nn.Parameter, output: torch.Tensor) -> bool:
    """Changing ``parameter`` changes what ``built`` returns for ``x``."""
    with torch.no_grad():
        parameter.add_(1.0)
        try:
            moved = built(x)
        finally:
            parameter.sub_(1.0)
    return not (isinstance(moved, torch.Tensor) and moved.shape == output.shape and torch.allclose(moved, output))


def _floating(dtype: str | None) -> torch.dtype | None:
    """The torch dtype a probe's ``dtype`` names ("float64"), or None: as built."""
    return getattr(torch, dtype) if dtype else None


def _built(
    impl: Implementation,
    device: str,
    cls: str,
    args: list,
    kwargs: dict | None,
    seed: int | None,
    state: dict | None,
    return_state: bool,
    pairing: dict | None = None,
    dtype: str | None = None,
) -> tuple[nn.Module | None, dict]:
    """The learner's ``cls(*args, **kwargs)``, built on the CPU (under ``seed``), holding ``state``, on
    ``device`` (in ``dtype``, where given); and the report of what it holds. None instead of the module when
    ``state`` holds weights of other shapes: the report's "rejected" lists them."""
    if seed is not None:
        manual_seed(seed)
    built = impl.book(cls)(*args, **(kwargs or {}))
    report: dict = {"structure": structure(built)}
    if return_state:
        report["state"] = {k: v for k, v in built.state_dict().items()}
    if state is not None:
        # Documented weights under the learner's own names, where it holds the same projections by other names
        # (the structure check prices the naming, once).
        if pairing is not None:
            mapping = {key: by_owner(key, pairing) for key in state}
        else:
            mapping = renamed(
                {k: tuple(p.shape) for k, p in built.named_parameters()}, {k: tuple(v.shape) for k, v in state.items()}
            )
        if mapping is not None:
            state = {mapping.get(k, k): v for k, v in state.items()}
            report["renamed"] = mapping
        # Injected names the learner's module does not have: it lacks a documented weight.
        try:
            report["rejected"] = list(built.load_state_dict(state, strict=False).unexpected_keys)
        except RuntimeError as error:  # a weight of another shape than documented: torch lists them
            report["rejected"] = [line.strip() for line in str(error).splitlines() if "size mismatch" in line]
            if not report["rejected"]:
                raise
            return None, report
    built = built.to(device, _floating(dtype))
    report["buffers_on"] = {name: str(b.device) for name, b in built.named_buffers()}
    return built, report


def structure(built: nn.Module) -> dict:
    """Names, kinds and shapes of what a module holds: what the structure checks judge."""
    return {
        "parameters": [[name, list(p.shape)] for name, p in built.named_parameters()],
        "direct_parameters": [name for name, _ in built.named_parameters(recurse=False)],
        "buffers": [[name, list(b.shape)] for name, b in built.named_buffers()],
        "modules": [[name, type(m).__name__] for name, m in built.named_modules() if name],
        # the submodules that hold weights: one without any (a softmax, a scale) is the learner's own business
        "weighted_modules": [
            [name, type(m).__name__]
            for name, m in built.named_modules()
            if name and next(m.parameters(), None) is not None
        ],
        "state_dict": list(built.state_dict().keys()),
        # what training could not use: parameters that take no gradient, a dropout that overwrites its input
        "frozen": [name for name, p in built.named_parameters() if not p.requires_grad],
        "inplace_dropout": [n for n, m in built.named_modules() if isinstance(m, nn.Dropout) and m.inplace is True],
        # Tensors held as plain attributes: neither parameters nor buffers, so .to() leaves them.
        "plain_tensors": [name for name, value in vars(built).items() if isinstance(value, torch.Tensor)],
        "training": built.training,  # just built: nn.Module starts in training mode
        # as given: a bool here is an argument that went to the wrong place
        "dropout_p": {
            name: m.p
            for name, m in built.named_modules()
            if isinstance(m, nn.Dropout) and type(m.p) in (bool, int, float)
        },
        "dropout_kind": type(vars(built).get("dropout")).__name__,  # "float": the rate kept (dropout-not-layer)
        "attributes": {
            name: getattr(built, name)
            for name in ("d_out", "num_heads", "head_dim")
            if type(getattr(built, name, None)) is int
        },
    }


def _weight_of(layer: object) -> torch.Tensor | None:
    """A layer's weight as it holds it now, copied; None where it holds none."""
    weight = getattr(layer, "weight", None)
    return weight.detach().clone() if isinstance(weight, torch.Tensor) else None


@probe
def transfer(
    impl: Implementation, device: str, d_in: int, d_out: int, seed: int, qkv_bias: bool = False, record: bool = False
) -> dict:
    """The learner's weight transfer between stand-ins built under ``seed`` (v1 first, as in 3.1).

    What v2 held is not part of the answer: the judge builds the same pair itself.
    """
    sa_v1, sa_v2 = seeded_transfer_pair(d_in, d_out, seed, qkv_bias)
    names = ("W_query", "W_key", "W_value")
    before = {name: getattr(sa_v1, name) for name in names}
    held = {name: parameter.detach().clone() for name, parameter in before.items()}
    try:
        with recording(record) as seen:
            returned = impl.transfer_weights_v2_to_v1(sa_v2, sa_v1)
    except Exception as error:  # raising is the expected answer for qkv_bias=True
        if isinstance(error, NotImplementedError):
            raise
        # what a refusal left changed in sa_v1: a weight replaced or written before the error (may only veto)
        now = {name: getattr(sa_v1, name, None) for name in names}
        changed = [n for n, t in now.items() if not isinstance(t, torch.Tensor) or not torch.equal(t.detach(), held[n])]
        return {"raised": [type(error).__name__, str(error)[:300]], "v1_changed": changed}
    v1 = {}
    for name in names:
        value = getattr(sa_v1, name, None)
        v1[name] = value.detach().clone() if isinstance(value, torch.Tensor) else learner_value(value)
    return {
        "raised": None,
        "returned_v1": returned is sa_v1,
        "v1": v1,
        # what another module returned in sa_v1's place holds (a copy filled instead of sa_v1): may only veto
        "returned_weights": {
            name: value.detach().clone()
            for name in names
            if returned is not sa_v1
            and isinstance(returned, nn.Module)
            and isinstance(value := getattr(returned, name, None), torch.Tensor)
        },
        "grad_enabled": torch.is_grad_enabled(),  # after the call: autograd switched off for good (may only veto)
        "v1_parameters": [name for name, _ in sa_v1.named_parameters()],
        # a weight training cannot change: requires_grad off, or a copy autograd recorded (no longer a leaf)
        "v1_untrainable": [
            name for name, parameter in sa_v1.named_parameters() if not (parameter.requires_grad and parameter.is_leaf)
        ],
        # what sa_v2 holds after the transfer, which must leave it as it was (a learner's fact: it may only veto)
        "v2_after": {name: _weight_of(getattr(sa_v2, name, None)) for name in names},
        "same_parameters": all(getattr(sa_v1, name, None) is before[name] for name in names),
        "shares_memory": any(
            isinstance(getattr(sa_v1, name, None), torch.Tensor)
            and getattr(sa_v1, name).untyped_storage().data_ptr()
            == getattr(sa_v2, name).weight.untyped_storage().data_ptr()
            for name in names
        ),
        "ops": sorted(seen),
    }


# What a KV cache holds is read from these attributes after every step (stage 7).
CACHE_ATTRIBUTES = ("cache_k", "cache_v")


@probe
def cached_module(
    impl: Implementation,
    device: str,
    cls: str,
    args: list,
    x: torch.Tensor,
    steps: list[dict],
    seed: int | None = None,
    state: dict | None = None,
    return_state: bool = False,
    record: bool = False,
    watch_device: bool = False,
    pairing: dict | None = None,
    dtype: str | None = None,
    training: bool = False,
) -> dict:
    """Build a module with a KV cache as ``module`` does (in eval mode unless ``training``), then run ``steps``
    on ``x`` (``dtype``: both in that floating dtype, as in ``module``).

    A step is {"tokens": [start, stop], "use_cache": True, False or None} (forward on x[:, start:stop]; None:
    called without use_cache) or {"reset": True} (reset_cache()). The reply holds, before the steps and after
    each, what cache_k and cache_v hold ("missing" for an attribute the module lacks), and each step's output,
    all copied when read: a cache filled in place later must not change what an earlier step showed. A step
    with "may_raise" that raises ends the steps, its "raised" [type, message] reported with the cache after
    it; elsewhere what the learner's code raises is its failure. ``watch_device``: the first operation of the
    steps that combined a tensor made without a device with the module's (see FixedDeviceWatch).
    """
    built, report = _built(impl, device, cls, args, None, seed, state, return_state, pairing, dtype)
    if built is None:
        return report
    built.train(training)
    x = x.to(device, _floating(dtype))
    report["cache_before"] = _cache_of(built)
    done = report["steps"] = []
    watch = FixedDeviceWatch() if watch_device else contextlib.nullcontext()
    with torch.no_grad(), recording(record) as seen, watch:
        for step in steps:
            try:
                if step.get("reset"):
                    output = built.reset_cache()
                else:
                    start, stop = step["tokens"]
                    chunk = x[:, start:stop]
                    output = built(chunk) if step["use_cache"] is None else built(chunk, use_cache=step["use_cache"])
            except Exception as error:
                if not step.get("may_raise") or isinstance(error, NotImplementedError):
                    raise
                done.append({"raised": [type(error).__name__, str(error)[:300]], "cache": _cache_of(built)})
                break
            done.append({"raised": None, "output": learner_value(_copied(output)), "cache": _cache_of(built)})
    report["ops"] = sorted(seen)
    report["fixed_device_use"] = watch.mixed if watch_device else None
    report["state_dict_after"] = list(built.state_dict().keys())  # a cache is no weight: it must stay out
    return report


def _copied(value: object) -> object:
    return value.detach().clone() if isinstance(value, torch.Tensor) else value


def _cache_of(built: nn.Module) -> dict:
    return {
        name: learner_value(_copied(getattr(built, name))) if hasattr(built, name) else "missing"
        for name in CACHE_ATTRIBUTES
    }
