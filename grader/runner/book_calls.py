"""Learner classes met the way the book meets them: built with the book's parameter names, and their
weights found by creation order when they go by other names.

Grading maths on maths: a constructor that takes the book's arguments in another order, or lacks a
default the book leaves out, still builds what the book's call means; projections named W_q, W_k, W_v
still receive the documented weights. What differs on the surface is priced once, by the stage's
structure check or a note, never again by every check that builds the module.
"""

import functools
import inspect

import torch

# The book's signatures of the classes the checks build (the stubs' and solutions' too: a test keeps them
# equal). The runner sees no solution, so they are written here.
BOOK_SIGNATURES = {
    "SelfAttention_v1": "d_in, d_out",
    "SelfAttention_v2": "d_in, d_out, qkv_bias=False",
    "CausalAttention": "d_in, d_out, context_length, dropout, qkv_bias=False",
    "MultiHeadAttentionWrapper": "d_in, d_out, context_length, dropout, num_heads, qkv_bias=False",
    "MultiHeadAttention": "d_in, d_out, context_length, dropout, num_heads, qkv_bias=False",
    "MultiHeadAttentionKV": "d_in, d_out, context_length, dropout, num_heads, qkv_bias=False",
    "GroupedQueryAttention": "d_in, d_out, context_length, dropout, num_heads, num_kv_groups, qkv_bias=False",
}
# How the error of a book call the learner's signature refuses begins its tell-tale part: the judge reads it to
# know that a check's call, not the maths, failed (note.signature prices that).
SIGNATURE_REFUSED = "which the book's signature"
_KEYWORD_KINDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


@functools.cache
def book_signature(name: str) -> inspect.Signature:
    namespace: dict = {}
    exec(f"def {name}({BOOK_SIGNATURES[name]}): pass", namespace)  # the table's own text, nothing else
    return inspect.signature(namespace[name])


@functools.cache
def book_constructor(cls: object, name: str) -> object:
    """``cls`` (the class called ``name``) as a callable that builds it the way the book calls it; anything
    that is not one of the book's classes as it is. One callable per class, so callers may cache by it."""
    if name not in BOOK_SIGNATURES or not isinstance(cls, type):
        return cls
    try:
        learner = inspect.signature(cls)
    except (TypeError, ValueError):  # a signature Python cannot read: called as given
        return cls
    book = book_signature(name)
    named = {n for n, p in learner.parameters.items() if p.kind in _KEYWORD_KINDS}
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in learner.parameters.values())

    def construct(*args, **kwargs):
        try:
            given = dict(book.bind(*args, **kwargs).arguments)
        except TypeError:  # not a call the book makes: as given
            return cls(*args, **kwargs)
        # an argument the learner's signature lacks, at the book's default, is the default it builds anyway
        kept = {
            n: v
            for n, v in given.items()
            if n in named or takes_any or v is not book.parameters[n].default and v != book.parameters[n].default
        }
        if takes_any or set(kept) <= named:
            # what the learner requires and the book leaves to a default, or defaults otherwise (qkv_bias=True):
            # the book's call means the book's default
            for n, p in learner.parameters.items():
                if (
                    n not in kept
                    and n in book.parameters
                    and not same_default(p.default, book.parameters[n].default)
                    and p.kind in _KEYWORD_KINDS
                    and book.parameters[n].default is not inspect.Parameter.empty
                ):
                    kept[n] = book.parameters[n].default
            return cls(**kept)
        # Other names (in_dim for d_in, n_heads for num_heads): the book's arguments by position, in the book's
        # order, leaving out trailing ones at the book's default where the learner's signature has no room for them.
        names, values = list(given), list(given.values())
        while True:
            try:
                learner.bind(*values)
            except TypeError:
                default = book.parameters[names[-1]].default if names else inspect.Parameter.empty
                if default is not inspect.Parameter.empty and values[-1] == default:
                    names.pop(), values.pop()
                    continue
                shown = ", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kwargs.items())])
                raise TypeError(
                    f"the grader builds {name}({shown}), {SIGNATURE_REFUSED} {name}"
                    f"({BOOK_SIGNATURES[name]}) takes, and your {name}{learner} does not"
                ) from None
            return cls(*values)

    construct.__name__ = construct.__qualname__ = name
    construct.__wrapped__ = cls  # type: ignore[attr-defined]
    return construct


def same_default(default: object, book_default: object) -> bool:
    """Whether a learner's default is the book's: the same value of the same type (False is not 0); none where
    the book has none (inspect.Parameter.empty both). The one rule, for objects here and for the text of a
    signature (grader.judge.class_source)."""
    try:
        return default is book_default or (type(default) is type(book_default) and bool(default == book_default))
    except Exception:  # a default whose == raises or is no truth value (a tensor): not the book's
        return False


def _owners(shapes: dict[str, tuple]) -> dict[str, dict[str, tuple]]:
    """Parameter names grouped by what holds them, in order: "W_query.weight" -> W_query: {weight: shape};
    a bare parameter "W_query" -> W_query: {"": shape}."""
    owners: dict[str, dict[str, tuple]] = {}
    for key, shape in shapes.items():
        owner, _, leaf = key.rpartition(".")
        owner, leaf = (owner, leaf) if owner else (key, "")
        owners.setdefault(owner, {})[leaf] = tuple(shape)
    return owners


def renamed(held: dict[str, tuple], documented: dict[str, tuple]) -> dict[str, str] | None:
    """Documented parameter name -> the learner's, where the learner's module lacks documented names but
    holds, in creation order, the same number of projections of the documented kinds and shapes (W_q, W_k,
    W_v for W_query, W_key, W_value). None when nothing is renamed or the projections cannot be paired.
    ``held`` and ``documented``: parameter name -> shape, in creation order."""
    ours, theirs = _owners(held), _owners(documented)
    missing = [owner for owner in theirs if owner not in ours]
    extra = [owner for owner in ours if owner not in theirs]
    if not missing or len(missing) != len(extra) or any(theirs[d] != ours[e] for d, e in zip(missing, extra)):
        return None
    pairs = dict(zip(missing, extra))
    return {
        key: (f"{pairs[owner]}.{leaf}" if leaf else pairs[owner]) if owner in pairs else key
        for owner, leaves in theirs.items()
        for leaf in leaves
        for key in [f"{owner}.{leaf}" if leaf else owner]
    }


def by_owner(key: str, owners: dict[str, str]) -> str:
    """A parameter name with its owner renamed by ``owners`` (documented owner -> the learner's): "W_query.bias"
    -> "W_q.bias", a bare "W_query" -> "W_q"; a name whose owner is not renamed, as it is."""
    owner, _, leaf = key.rpartition(".")
    owner, leaf = (owner, leaf) if owner else (key, "")
    if owner not in owners:
        return key
    return f"{owners[owner]}.{leaf}" if leaf else owners[owner]


PROJECTIONS = ("W_query", "W_key", "W_value")  # the book's names, in the order the book creates them


def projection(module: object, name: str) -> object:
    """``module``'s projection the book calls ``name`` (one of PROJECTIONS): by that name, else the one created
    in its place, for a module that holds exactly three nn.Parameter, or three submodules with weights."""
    if name not in PROJECTIONS or hasattr(module, name):
        return getattr(module, name)
    parameters = list(getattr(module, "_parameters", {}).values())
    weighted = [
        m for m in getattr(module, "_modules", {}).values() if m is not None and next(m.parameters(), None) is not None
    ]
    for held in (parameters, weighted):
        if len(held) == len(PROJECTIONS):
            return held[PROJECTIONS.index(name)]
    return getattr(module, name)  # raises the AttributeError the learner's module gives


def in_book_layout(module: object, d_in: int, d_out: int) -> object:
    """``module``, whose weights the book's code multiplies as x @ W: a weight held transposed, (d_out, d_in)
    as nn.Linear holds its own, is said in words, where torch would only say that shapes cannot be multiplied."""
    for name in ("W_query", "W_key", "W_value"):
        held = projection(module, name)
        if isinstance(held, torch.nn.Module):  # called, not multiplied: v2's way, its weight in nn.Linear's layout
            raise ValueError(
                f"the book's code multiplies x @ {name}, which takes {name} as a (d_in, d_out) = ({d_in}, {d_out}) "
                f"nn.Parameter; your SelfAttention_v1 holds it as a layer, {type(held).__name__}, whose weight is "
                f"({d_out}, {d_in}), in nn.Linear's layout: that is SelfAttention_v2's way"
            )
        shape = tuple(getattr(held, "shape", ()))
        if d_in != d_out and shape == (d_out, d_in):
            raise ValueError(
                f"the book's code multiplies x @ {name}, which takes {name} as (d_in, d_out) = ({d_in}, {d_out}); "
                f"your SelfAttention_v1({d_in}, {d_out}) holds it as ({d_out}, {d_in}), in nn.Linear's layout"
            )
    return module
