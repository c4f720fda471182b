"""What a stage file's classes declare, read from the judge's own copy of the file (never from the worker):
their constructors' parameters, for the checks that grade a signature or adapt to one."""

import ast
import inspect

from grader.runner.book_calls import same_default


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


def extends_the_book(written: str, book: str) -> bool:
    """Whether a constructor's parameters as ``written`` (init_signature's text) take every call the ``book``'s
    take, meaning the same: the book's parameters first, in its order, with its defaults (and none it lacks), and after
    them only
    parameters of their own that have a default (max_seq_len=None, *, dtype=None), *args or **kwargs."""
    try:
        mine, theirs = (ast.parse(f"def f({text}): pass").body[0].args for text in (written, book))  # type: ignore[attr-defined]
    except SyntaxError:
        return False
    own, books = [*mine.posonlyargs, *mine.args], [*theirs.posonlyargs, *theirs.args]
    if [a.arg for a in own[: len(books)]] != [a.arg for a in books]:
        return False

    def defaults(arguments: ast.arguments, count: int) -> list[object]:  # each positional's default, as a value
        absent = [inspect.Parameter.empty] * (count - len(arguments.defaults))
        return absent + [_value(d) for d in arguments.defaults]

    mine_defaults, book_defaults = defaults(mine, len(own)), defaults(theirs, len(books))
    # a default the book lacks is a difference too
    same_defaults = all(same_default(m, b) for m, b in zip(mine_defaults, book_defaults))
    extras_defaulted = all(d is not inspect.Parameter.empty for d in mine_defaults[len(books) :])
    keywords_defaulted = all(d is not None for d in mine.kw_defaults)
    return same_defaults and extras_defaulted and keywords_defaulted


def _value(default: ast.expr) -> object:
    """A default as the value it is where it is a literal (False, 0.1), else as its text (a name, a call)."""
    try:
        return ast.literal_eval(default)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return ast.unparse(default)
