"""What the source scan (grader/judge/source_scan.py) calls reaching into the grader: names, name fragments,
builtins and dotted paths that have no use in the exercises but to switch off or read what the grader records."""

# Names that serve only to reach into what the grader records: other frames and what they hold,
# the garbage collector's list of every object, raw memory, hooks that watch running code, the
# builtins the recorder relies on, and code run from strings, files or bytes. None has a use in
# the exercises, wherever it is spelled (an attribute, an import, a string). Importing the
# grader's own modules the worker refuses by itself (forbidden-import).
TAMPERING_NAMES = frozenset(
    {
        "_getframe",
        "_getframemodulename",
        "_current_frames",
        "_current_exceptions",
        "f_back",
        "f_locals",
        "f_globals",
        "f_builtins",
        "f_trace",
        "tb_frame",
        "gi_frame",
        "cr_frame",
        "ag_frame",
        "currentframe",
        "getouterframes",
        "getinnerframes",
        "walk_stack",
        "walk_tb",
        "__globals__",
        "__self__",
        "__subclasses__",
        "__code__",
        "CodeType",
        "get_objects",
        "get_referrers",
        "get_referents",
        "ctypes",
        "_ctypes",
        "pythonapi",
        "cffi",
        "settrace",
        "setprofile",
        "settrace_all_threads",
        "setprofile_all_threads",
        "_settraceallthreads",
        "_setprofileallthreads",
        "addaudithook",
        "call_tracing",
        "builtins",
        "__builtins__",
        "__import__",
        "runpy",
        "marshal",
        "pickle",
        "_pickle",
        "cloudpickle",
        "dill",
        "spec_from_file_location",
        "SourceFileLoader",
    }
)


# PyTorch's function and dispatch modes, and the switches around them (TorchFunctionMode,
# DisableTorchFunction, torch.utils._python_dispatch, _disable_current_modes, _push_mode, the
# DispatchKey guards...): a name holding one of these, lower-cased and without underscores.
TAMPERING_FRAGMENTS = (
    "torchfunction",
    "functionmode",
    "functionstack",
    "dispatch",
    "currentmodes",
    "pushmode",
    "popmode",
    "inframode",
)


# Builtins that run code from strings, when the code calls them by name: `torch.compile` and
# `module.eval()` are attributes, other things altogether.
TAMPERING_BUILTINS = frozenset({"exec", "eval", "compile"})


# Attributes that reach into the grader only under their module's name (torch.stack is not inspect.stack).
TAMPERING_PATHS = ("inspect.stack", "inspect.trace", "sys.modules", "sys.monitoring", "torch.library")
