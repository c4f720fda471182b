"""What a stage file's classes declare, read from the judge's own copy of the file (never from the worker):
their constructors' parameters, for the checks that grade a signature or adapt to one."""

import ast


def _init_of(source: bytes | None, cls: str) -> ast.FunctionDef | None:
    """Class ``cls``'s __init__ in a stage file's text; None where the file does not define it plainly."""
    try:
        tree = ast.parse(source or b"")
    except (SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return next(
                (item for item in node.body if isinstance(item, ast.FunctionDef) and item.name == "__init__"), None
            )
    return None


def init_parameters(source: bytes | None, cls: str) -> list[str] | None:
    """The parameter names of class ``cls``'s __init__ (without self) in the judge's own copy of a stage file;
    None where the file does not define them plainly (no such class or __init__, a **kwargs, unreadable)."""
    init = _init_of(source, cls)
    if init is None or init.args.kwarg:
        return None
    return [a.arg for a in [*init.args.posonlyargs, *init.args.args, *init.args.kwonlyargs]][1:]


def init_signature(source: bytes | None, cls: str) -> str | None:
    """Class ``cls``'s __init__ parameters as written (without self and annotations), e.g. "d_in, d_out,
    qkv_bias=False", from the judge's own copy of a stage file; None where the file does not define them."""
    init = _init_of(source, cls)
    if init is None:
        return None
    arguments = init.args
    for argument in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]:
        if argument is not None:
            argument.annotation = None
    if arguments.posonlyargs:
        arguments.posonlyargs = arguments.posonlyargs[1:]
    elif arguments.args:
        arguments.args = arguments.args[1:]
    return ast.unparse(arguments)
