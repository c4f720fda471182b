"""torch's own Python made again from its code objects: refused in a worker once learner code may run.

grader.runner.routes switches off torch's Python functions of a route (attention written in torch.onnx's
reference kernels, softmax in torch._decomp) by replacing their code. A fresh copy of that code, loaded from torch's
files and made into functions outside the import system, would bring the route back: types.FunctionType over one
of its code objects, exec of a module's code, compile of a torch file, a function's __code__ set to one. An audit
hook (which nothing can remove) refuses each of those for code whose file lies in torch's package, and refuses
making code objects by hand (types.CodeType, code.replace), which could give torch's code another file name; the
torch modules imported through the import system (grader.runner.routes' loader, whose files IMPORTING lists) run
as usual. Reading torch's source text and compiling it under a name of one's own is copying it: no sandbox tells
that from code written by hand (the threat model in docs/grading-a-class.md says so).
"""

import os
import sys
import types
from collections.abc import Callable

import torch

from grader.runner.route_names import SWITCHED_OFF_HERE
from grader.runner.routes import IMPORTING, RouteSwitchedOff

TORCH_TREE = os.path.dirname(torch.__file__) + os.sep
# "your code calls torch's own Python code, made again ...": the judge's words around a refusal (refused_call)
REFUSAL = (
    f"Python code, made again from its files outside the import system{SWITCHED_OFF_HERE}the grader checks that "
    "what an exercise builds is written by hand"
)


def guard_torch_code(own_code: types.CodeType) -> None:
    """From now on, in this process, torch's code runs only as torch's modules imported through the import system;
    ``own_code``: the one function allowed to make code objects (grader.runner.routes' refusing code)."""
    sys.addaudithook(_hook(own_code))


def _hook(own_code: types.CodeType) -> Callable[[str, tuple], None]:
    def from_torch(filename: object) -> bool:
        name = os.fsdecode(filename) if isinstance(filename, (str, bytes)) else ""
        return name.startswith(TORCH_TREE)

    def importing(filename: object) -> bool:
        return isinstance(filename, (str, bytes)) and os.fsdecode(filename) in IMPORTING

    def hook(event: str, args: tuple) -> None:
        if event == "function.__new__":
            refused = from_torch(args[0].co_filename)
        elif event == "exec":
            code = args[0]
            refused = (
                isinstance(code, types.CodeType) and from_torch(code.co_filename) and not importing(code.co_filename)
            )
        elif event == "compile":
            refused = from_torch(args[1]) and not importing(args[1])
        elif event == "object.__setattr__":
            refused = args[1] == "__code__" and isinstance(args[2], types.CodeType) and from_torch(args[2].co_filename)
        elif event == "code.__new__":
            refused = sys._getframe(1).f_code is not own_code
        else:
            return
        if refused:
            raise RouteSwitchedOff(REFUSAL)

    return hook
