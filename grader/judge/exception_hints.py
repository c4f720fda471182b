"""The causes an exception's own words prove, whichever check met it: torch's words for tensors on two devices,
Python's for a constructor that refuses the documented arguments or an attribute an object lacks."""

import re

import torch

from grader.core.stages import registry
from grader.runner.book_calls import SIGNATURE_REFUSED
from grader.runner.route_names import OUTSIDE_THE_LIST, SWITCHED_OFF_HERE


def refused_call(message: str, why: str) -> str:
    """A refused call in the learner's words: what it called, and ``why`` a switched-off route earns nothing, or
    that the operator is off the list of what the exercises need (grader.runner.operators)."""
    called, _, reason = message.partition(SWITCHED_OFF_HERE)
    if reason.startswith(OUTSIDE_THE_LIST):
        return f"calls {called}, an operator outside those these exercises need (see grader/core/operators.toml)"
    return f"calls torch's own {called}, which {why}"


def _layer_as_tensor(message: str) -> bool:
    """Python's or torch's words for one of torch.nn's layers used where a tensor belongs: transposed, multiplied,
    indexed or handed to a tensor function (self.W_key.T for self.W_key(x)). A class of the learner's own that
    lacks an attribute proves no such thing, nor does a torch.nn layer asked for an attribute tensors lack too."""
    if found := MISSING_ATTRIBUTE.search(message):
        return _is_layer(found.group(1)) and hasattr(torch.Tensor, found.group(2))
    named = (name for pattern in NOT_A_TENSOR for found in pattern.finditer(message) for name in found.groups())
    return any(_is_layer(name) for name in named)


def _documented_functions() -> frozenset[str]:
    """The stages' public functions (stages.toml's names that are not classes)."""
    return frozenset(n for stage in registry().values() for n in stage.names if n[0].islower())


def _is_layer(name: str | None) -> bool:
    layer = getattr(torch.nn, name or "", None)
    return isinstance(layer, type) and issubclass(layer, torch.nn.Module)


def hint_for_exception(message: str, at_call: bool = False) -> str | None:
    """A cause an exception's own words prove. A shape error proves none: many mistakes raise one. ``at_call``:
    the exception came from calling the learner's function itself, before any line of it ran (a signature that
    refuses the documented call; the same words from inside it are the learner's own call of another)."""
    if SWITCHED_OFF_HERE in message:  # a route, or an operator off the list, refused the call (self-harm if forged)
        return "banned-api"
    if "Expected all tensors to be on the same device" in message:
        return "device-mismatch"
    if "in nn.Linear's layout" in message and "the book's code multiplies" in message:  # document_examples
        return "weights-layout"
    if "view size is not compatible with input tensor's size and stride" in message:
        return "view-not-contiguous"
    if SIGNATURE_REFUSED in message or CONSTRUCTOR_REFUSED.search(message):  # the documented call refused
        return "signature"
    if at_call and (found := FUNCTION_REFUSED.search(message)) and found.group(1) in _documented_functions():
        return "signature"  # the judge calls a stage's function as documented: its signature refused the call
    if UNDEFINED_NAME.search(message):
        return "name-undefined"
    if _layer_as_tensor(message):
        return "layer-not-called"
    # a class's object without an attribute read from it (a stand-in holds the documented attributes alone); a
    # builtin's ('NoneType', 'int', 'tuple') is a value of another kind where a module or tensor belongs
    if (found := MISSING_ATTRIBUTE.search(message)) and found.group(1)[0].isupper() and found.group(1) != "NoneType":
        stand_in = found.group(1).startswith("StandIn") or STAND_IN_BASE in message  # the worker's words
        return "undocumented-attribute" if stand_in else "attribute-missing"
    return None


# Python's words for a constructor that refuses the documented arguments (a misspelt __init__ leaves nn.Module's),
# and for an attribute an object lacks: "'SelfAttention_v2' object has no attribute 'W'".
CONSTRUCTOR_REFUSED = re.compile(
    r"\.__init__\(\) (got an unexpected keyword argument|takes \d+ positional argument|missing \d+ required)"
)
FUNCTION_REFUSED = re.compile(
    r"\b(\w+)\(\) (got an unexpected keyword argument|takes \d+ positional argument|missing \d+ required)"
)
MISSING_ATTRIBUTE = re.compile(r"'(\w+)' object has no attribute '(\w+)'")
# Python's words for a name no scope defines where it is read (an argument the function does not take)
UNDEFINED_NAME = re.compile(r"\bname '\w+' is not defined")
# Python's and torch's words for an object where a tensor belongs: an operand, an index, an argument
NOT_A_TENSOR = (
    re.compile(r"unsupported operand type\(s\) for [^:]+: '(\w+)' and '(\w+)'"),
    re.compile(r"'(\w+)' object is not subscriptable"),
    re.compile(r"must be Tensor, not (\w+)"),
)
# How a worker ends the message of an attribute missing from a learner's class that derives from a stand-in.
STAND_IN_BASE = "which holds the documented attributes alone)"
