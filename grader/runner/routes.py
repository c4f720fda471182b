"""Switching off torch's own routes to what an exercise builds, in a worker, before learner code loads.

A shortcut check runs the learner's function where torch's softmax (or attention, or solvers) is not
there to call: every operator whose name says so refuses at every dispatch key that has a kernel for
it, and so does torch's Python code of that name, which computes one from plain operations
(torch._refs, torch._decomp's tables, F.multi_head_attention_forward, flex attention's math_attention,
the classes' methods: SoftmaxTransform, nn.MultiheadAttention). A Python function is switched off in
place (its code replaced), so that every reference to it refuses, whichever table, closure or module
holds it. A right answer then shows work done by hand, whatever the worker reports about itself.

The registrations are held by handles that no Python container references (a reference count taken
by hand), so learner code cannot find them to take them back; it can register kernels of its own over
them, but those have to compute the answer, which is the work. Undoing it from the inside (raw memory
through ctypes) is what the source scan calls tampering (grader.judge.tampering_names); so is running
torch's Python source again (a reload, exec of its files), which brings fresh copies of that code.
"""

import ctypes
import functools
import importlib.abc
import importlib.machinery
import sys
import types
import warnings
from collections.abc import Callable

import torch

from grader.runner.route_names import ROUTES, SWITCHED_OFF_HERE, SwitchedOff

# Modules whose Python functions reach a route, and those below torch._refs and torch._decomp, which
# compute one from plain operations (all of them loaded with torch itself).
PYTHON_MODULES = ("torch", "torch.nn.functional", "torch.special", "torch.linalg")
PYTHON_PACKAGES = ("torch._refs", "torch._decomp")
# Softmax and attention have Python code of their name all over torch (flex attention, distributions,
# quantizable modules): every torch module is searched for them, these loaded first. A solver's fragments
# ("solve", "inverse") name unrelated helpers there (torch.unique's _return_inverse), so solvers keep to
# the modules above.
SEARCHED_EVERYWHERE = ("softmax", "attention")


class RouteSwitchedOff(RuntimeError):
    """Learner code called a route the grader switched off for this check."""


def switch_off(off: SwitchedOff, done: SwitchedOff = SwitchedOff()) -> int:
    """Make every operator and function of ``off`` refuse in this process, but those of ``done``, which this
    process inherited switched off already (from the zygote); how many registrations it made."""
    if not off:
        return 0

    def wanted(name: str) -> bool:
        return off.covers(name) and not done.covers(name)

    made, handles = 0, {}
    with warnings.catch_warnings():  # torch warns of each kernel it overrides
        warnings.simplefilter("ignore")
        for qualified, keys in _kernels().items():
            namespace, _, name = qualified.partition("::")
            if wanted(name.split(".")[0]):
                for key in keys:
                    if (namespace, key) not in handles:
                        handles[namespace, key] = torch._C._dispatch_library("IMPL", namespace, key)
                    handles[namespace, key].impl(name, key, _refusal(qualified), False)
                    made += 1
    for handle in handles.values():
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(handle))  # kept alive, referenced by nothing
    for module, attribute, value in _functions():
        if wanted(attribute.lower()):
            name = f"{module.__name__}.{attribute}"
            _switch_off_code(value, name)
            # A function's name then refuses too (a builtin's code cannot be replaced); a class or an operator
            # object stays what it is, for isinstance and registrations, its methods or kernels refusing.
            if isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
                setattr(module, attribute, _refusal(name))
            made += 1
    for op, table, key, function, cache in _python_kernels():
        if wanted(op):
            _switch_off_code(function, op)
            table[key] = _refusal(op)
            cache.clear()  # a higher-order operator's kernels as it last looked them up
            made += 1
    if wanted(THREADS_REFUSED_BY):
        made += _switch_off_differentiation()
    return made


# torch's only switches of autograd's recording and of forward gradients: torch.enable_grad, set_grad_enabled,
# inference_mode's exit and torch.func's transforms all call these two.
GRAD_SETTERS = ("_set_grad_enabled", "_set_fwd_grad_enabled")
# The route whose switch-off takes autograd with it, and new threads (grader.runner.seccomp refuses them)
THREADS_REFUSED_BY = "softmax"


def _switch_off_differentiation() -> int:
    """Autograd off, for good, in a worker where softmax is: the gradient of a log-sum-exp is a softmax (and its
    tangent too), computed by torch's engine from plain operations. Grad mode and forward gradients go off, and
    every reference to their setters becomes one that may switch them off but never on (the originals, left
    referenced by nothing, are freed); inference mode, whose exit is the other way on, refuses. A new thread would
    start with autograd on: the worker's seccomp filter lets none start (THREADS_REFUSED_BY)."""
    made = 0
    for name in GRAD_SETTERS:
        original = getattr(torch._C, name)
        original(False)
        kept_off = _kept_off(f"torch.{name.lstrip('_')}(True), autograd (of a log-sum-exp: the softmax)")
        for holder in _holders(name):
            made += _replace_in(holder, original, kept_off)
        del original
    # Below grad mode, which a TorchScript operator sets too (torch.ops.aten.set_grad_enabled): autograd's dispatch
    # keys leave this thread's dispatch altogether, so no operation records a graph whatever grad mode says, and
    # what could put them back refuses: the setter of that exclusion, and the guards that force or restore a set.
    torch._C._dispatch_tls_set_dispatch_key_excluded(torch._C.DispatchKey.AutogradCPU, True)  # every backend's
    for holder in _holders("_dispatch_tls_set_dispatch_key_excluded"):
        made += _replace_in(
            holder, torch._C._dispatch_tls_set_dispatch_key_excluded, _refusal("a dispatch key's switch")
        )
    # inference_mode(False) switches autograd on again, as a guard of C++'s: its class refuses to be made at all (a
    # class is reachable from object.__subclasses__(), so its own __init__ refuses; none of this worker's code needs
    # it), as do the guards that set dispatch keys outright
    for guard in (
        "_InferenceMode",
        "_ForceDispatchKeyGuard",
        "_SetExcludeDispatchKeyGuard",
        "_RestorePythonTLSSnapshot",
    ):
        getattr(torch._C, guard).__init__ = _refusal(f"torch._C.{guard} (it switches autograd on)")
        made += 1
    return made


@functools.cache
def _holders(name: str) -> tuple[dict | list | set, ...]:
    """The containers that reference torch._C's ``name``: its module's namespace, and torch.fx's tables of
    side-effectful functions. Found once, in the process workers are forked from (prepare)."""
    import gc

    return tuple(r for r in gc.get_referrers(getattr(torch._C, name)) if isinstance(r, (dict, list, set)))


def _replace_in(holder: dict | list | set, old: object, new: object) -> int:
    if isinstance(holder, dict):
        keys = [k for k, v in holder.items() if v is old]
        holder.update(dict.fromkeys(keys, new))
        return len(keys)
    if isinstance(holder, list):
        places = [i for i, v in enumerate(holder) if v is old]
        for i in places:
            holder[i] = new
        return len(places)
    if old in holder:
        holder.discard(old)
        holder.add(new)
        return 1
    return 0


def _kept_off(name: str) -> Callable[[bool], None]:
    def set_enabled(mode: bool) -> None:
        if mode:
            raise refused(name)

    return set_enabled


class SwitchOffOnImport(importlib.abc.MetaPathFinder):
    """Switches off what a torch module imported after the zygote (torch.onnx's, torch._inductor's) holds of ``off``:
    its functions named after a route, every function of a module named after one (fuse_attention), and, through
    grader.runner.operators, the operators it registers that the allowlist does not name."""

    def __init__(self, off: SwitchedOff, after: Callable[[], object]):
        self.off, self.after = off, after

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith("torch.") or fullname in sys.modules:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _SwitchingLoader(spec.loader, self.off, self.after)
        return spec


# The files of the torch modules being imported now, through the import system (grader.runner.code_guard lets their
# code run; torch's code from anywhere else refuses).
IMPORTING: list[str | None] = []


class _SwitchingLoader(importlib.abc.Loader):
    def __init__(self, loader, off: SwitchedOff, after: Callable[[], object]):
        self.loader, self.off, self.after = loader, off, after

    def create_module(self, spec):
        return self.loader.create_module(spec)

    depth = 0  # imports under way: the operators are looked at once the outermost one is done

    def exec_module(self, module):
        _SwitchingLoader.depth += 1
        IMPORTING.append(getattr(module.__spec__, "origin", None))
        try:
            self.loader.exec_module(module)
        finally:
            _SwitchingLoader.depth -= 1
            IMPORTING.pop()
        switch_off_module(module, self.off)
        if not _SwitchingLoader.depth:
            self.after()  # grader.runner.operators.refuse_new: the operators the modules registered


def switch_off_module(module: types.ModuleType, off: SwitchedOff) -> None:
    """Switch off ``module``'s functions of ``off`` (all of them where its own name is a route's)."""
    whole = off.covers(module.__name__.rpartition(".")[2].lower())
    for attribute, value in list(vars(module).items()):
        own = getattr(value, "__module__", None) == module.__name__
        if callable(value) and (off.covers(attribute.lower()) or (whole and own)):
            name = f"{module.__name__}.{attribute}"
            _switch_off_code(value, name)
            if isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
                setattr(module, attribute, _refusal(name))
        # the plain function behind a custom op (torch.library's CustomOpDef), and those a table holds
        held = [_own_attribute(value, "_init_fn"), *(value.values() if isinstance(value, dict) else ())]
        for function in held:
            if isinstance(function, types.FunctionType) and (whole or off.covers(function.__name__.lower())):
                _switch_off_code(function, f"{module.__name__}.{function.__name__}")


def _own_attribute(value: object, name: str) -> object:
    """``value``'s own attribute ``name``, read without running any code of its class (a lazy module's
    __getattr__ imports what it stands for)."""
    try:
        return object.__getattribute__(value, "__dict__").get(name)
    except Exception:  # no __dict__ of its own
        return None


def switch_off_on_import(off: SwitchedOff, after: Callable[[], object]) -> None:
    """From now on, every torch module imported has what it holds of ``off`` switched off, and ``after`` run
    (SwitchOffOnImport)."""
    sys.meta_path.insert(0, SwitchOffOnImport(off, after))


def prepare() -> None:
    """Find every operator and function a route could switch off, once, in the process workers are forked
    from: asking the dispatcher which keys hold kernels takes a tenth of a second."""
    _kernels()
    for name in (*GRAD_SETTERS, "_dispatch_tls_set_dispatch_key_excluded"):
        _holders(name)
    # The refusing code and functions are made here, once: a worker only puts them in place.
    for module, attribute, value in _functions():
        _code_swaps(value, f"{module.__name__}.{attribute}")
        _refusal(f"{module.__name__}.{attribute}")
    for op, _, _, function, _ in _python_kernels():
        _code_swaps(function, op)
        _refusal(op)


_EVERY_ROUTE = SwitchedOff(tuple(ROUTES))


@functools.cache
def _kernels() -> dict[str, list[str]]:
    """Each aten overload of any route (aten::_softmax.out), with the dispatch keys that hold a kernel for it."""
    found = {}
    for qualified in sorted(torch._C._dispatch_get_all_op_names()):
        namespace, _, name = qualified.partition("::")
        if _EVERY_ROUTE.covers(name.split(".")[0]):  # aten's, and quantized::softmax and the like
            found[qualified] = _kernel_keys(qualified)
    return found


@functools.cache
def _functions() -> list[tuple[types.ModuleType, str, object]]:
    """The Python functions and classes of any route, as (module, attribute, value): of every route in
    PYTHON_MODULES and PYTHON_PACKAGES, and of SEARCHED_EVERYWHERE in every module of torch."""
    searched = SwitchedOff(SEARCHED_EVERYWHERE)
    found = []
    for module_name, module in list(sys.modules.items()):
        named = module_name in PYTHON_MODULES + PYTHON_PACKAGES or module_name.startswith(
            tuple(package + "." for package in PYTHON_PACKAGES)
        )
        in_torch = module_name == "torch" or module_name.startswith("torch.")
        if module is None or not (named or in_torch):
            continue
        for attribute, value in list(vars(module).items()):
            route = _EVERY_ROUTE if named else searched
            if callable(value) and route.covers(attribute.lower()):
                found.append((module, attribute, value))
    return found


@functools.cache
def _python_kernels() -> list[tuple[str, dict, object, object, dict]]:
    """torch's Python kernels of any route that no module attribute names, as (operator name, the table that
    holds it, its key there, the kernel, a cache of lookups in that table): the decompositions (torch._decomp's
    tables) and the kernels of higher-order operators (flex attention)."""
    import torch._decomp

    found = []
    for table in torch._decomp.global_decomposition_table.values():
        for op, kernel in list(table.items()):
            name = op.name().partition("::")[2].split(".")[0]
            if _EVERY_ROUTE.covers(name):
                found.append((name, table, op, kernel, {}))
    for name, operator in list(torch._ops._higher_order_ops.items()):
        if _EVERY_ROUTE.covers(name):
            for key, kernel in list(operator.py_kernels.items()):
                found.append((name, operator.py_kernels, key, kernel, operator._dispatch_cache))
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


@functools.cache
def _refusal(name: str):
    def refuse(*args, **kwargs):
        raise refused(name)

    return refuse


def refused(name: str) -> RouteSwitchedOff:
    return RouteSwitchedOff(f"{name}{SWITCHED_OFF_HERE}the grader checks that this is computed by hand")


def _switch_off_code(value: object, name: str) -> None:
    """Replace the code of Python function ``value`` (and of the functions it wraps), or of a class's own
    methods, by code that refuses: every reference to them, wherever it is held, then refuses too."""
    for function, code in _code_swaps(value, name):
        function.__code__ = code


@functools.cache
def _code_swaps(value: object, name: str) -> tuple[tuple[types.FunctionType, types.CodeType], ...]:
    """The functions _switch_off_code replaces the code of, each with the refusing code it gets."""
    if isinstance(value, type):
        swaps: list = []
        for attribute, method in list(vars(value).items()):
            if isinstance(method, (staticmethod, classmethod)):
                method = method.__func__
            if isinstance(method, types.FunctionType) and not attribute.startswith("__"):
                swaps += _code_swaps(method, f"{name}.{attribute}")
        return tuple(swaps)
    swaps, seen = [], set()
    while isinstance(value, types.FunctionType) and id(value) not in seen:
        seen.add(id(value))
        swaps.append((value, _refusing_code(len(value.__code__.co_freevars), name)))
        value = getattr(value, "__wrapped__", None)
    return tuple(swaps)


@functools.cache
def _refusing_code_template(free: int) -> types.CodeType:
    """A function's code that raises a constant, with ``free`` closure cells (a function's code can only
    be replaced by code with as many)."""
    cells = "".join(f"    _{i} = None\n" for i in range(free))
    uses = f"        ({', '.join(f'_{i}' for i in range(free))},)\n" if free else ""
    namespace: dict = {}
    source = f"def outer():\n{cells}    def refuse(*args, **kwargs):\n{uses}        raise 0\n    return refuse\n"
    exec(source, namespace)
    return next(c for c in namespace["outer"].__code__.co_consts if isinstance(c, types.CodeType))


def refusing_code_maker() -> types.CodeType:
    """The code of the one function that makes code objects in a worker (grader.runner.code_guard allows it)."""
    return _refusing_code.__code__


def _refusing_code(free: int, name: str) -> types.CodeType:
    template = _refusing_code_template(free)
    # The refusal travels as a constant of the code: it needs no name of the module whose function it replaces.
    consts = tuple(refused(name) if const == 0 and type(const) is int else const for const in template.co_consts)
    return template.replace(co_consts=consts)
