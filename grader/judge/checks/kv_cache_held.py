"""What a MultiHeadAttentionKV's cache should hold after each step (cache_k, cache_v: the keys and values of
every token fed so far, per head), and how a cache that differs is told."""

import torch

from grader.judge.checks.kv_feeding import split_heads
from grader.judge.checks.support import CheckFailed, agrees, expect_close
from grader.judge.diagnosis import linear
from grader.judge.tensor_diff import describe_value
from grader.runner.protocol import Foreign


def cached_keys_values(x: torch.Tensor, state: dict, num_heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    """What cache_k and cache_v hold once all of x is fed: (b, num_heads, num_tokens, head_dim) each."""
    return split_heads(linear(x, state, "W_key"), num_heads), split_heads(linear(x, state, "W_value"), num_heads)


def expect_cache(
    cache: dict,
    keys: torch.Tensor,
    values: torch.Tensor,
    when: str,
    x: torch.Tensor | None = None,
    *others: tuple[torch.Tensor, torch.Tensor],
) -> None:
    """cache_k and cache_v (as cached_module read them) hold ``keys`` and ``values``.

    A cache holding the right numbers in another layout is cache-layout, one holding the inputs
    ``x`` is cache-holds-inputs. ``others``: the keys and values it may hold instead (the tokens up to
    a step that raised, when it raised before or after growing the cache), named the same way.
    """
    for name, expected, other in (
        ("cache_k", keys, [k for k, _ in others]),
        ("cache_v", values, [v for _, v in others]),
    ):
        held = cache[name]
        shape = tuple(expected.shape)
        if held == "missing":
            raise CheckFailed(
                f"{when}, the module has no attribute {name}: it holds the cache, "
                f"(b, num_heads, tokens so far, head_dim), or None while the cache is empty"
            )
        if not isinstance(held, torch.Tensor):
            raise CheckFailed(
                f"{when}, {name} is {describe_value(held)}, expected the {name[-1]} of the tokens so "
                f"far: a tensor of shape {shape} (b, num_heads, tokens so far, head_dim)"
            )
        if any(agrees(held, t) for t in (expected, *other)):
            continue
        if any(same_numbers(held, t) for t in (expected, *other)):
            raise CheckFailed(
                f"{when}, {name} holds the right numbers with shape {tuple(held.shape)}, laid out "
                f"otherwise than {shape} (b, num_heads, tokens so far, head_dim)",
                "cache-layout",
            )
        if any(slots_beyond(held, t) for t in (expected, *other)):
            raise CheckFailed(
                f"{when}, {name} has shape {tuple(held.shape)}: more token slots than tokens fed, the first ones "
                f"holding the right keys or values; it must hold the tokens cached so far alone, {shape}: grow it "
                "with torch.cat rather than filling a preallocated tensor",
                "cache-layout",
            )
        if any(tokens_reordered(held, t) for t in (expected, *other)):
            raise CheckFailed(
                f"{when}, {name} holds the right keys or values of every token, in another order along the "
                "tokens (dim 2): each step's new ones belong after those cached, torch.cat([cached, new], dim=2)",
                "cache-layout",
            )
        if x is not None and any(agrees(held, x[:, : t.shape[2]]) for t in (expected, *other)):
            raise CheckFailed(
                f"{when}, {name} holds the inputs x themselves, shape {tuple(held.shape)}, not their "
                f"projections split into heads, {shape}",
                "cache-holds-inputs",
            )
        if tuple(held.shape) != shape:
            raise CheckFailed(
                f"{when}, {name} has shape {tuple(held.shape)}, expected {shape} (b, num_heads, tokens "
                "so far, head_dim)"
            )
        expect_close(
            held,
            expected,
            f"{when}, {name} against W_{'key' if name == 'cache_k' else 'value'}(x) of the "
            "tokens so far, split into heads",
        )


def same_numbers(held: torch.Tensor, expected: torch.Tensor) -> bool:
    """The same values, in another order or shape: sorted, they agree."""
    return (
        tuple(held.shape) != tuple(expected.shape)
        and held.numel() == expected.numel() > 1
        and agrees(held.flatten().sort().values, expected.flatten().sort().values)
    )


def is_none(value: object) -> bool:
    return isinstance(value, Foreign) and value.type == "NoneType"


def tokens_reordered(held: torch.Tensor, expected: torch.Tensor) -> bool:
    """The shape of ``expected`` (b, num_heads, tokens, head_dim) and each token's keys, but the tokens in another
    order: every token of ``held`` is one of ``expected``'s, each a different one."""
    if tuple(held.shape) != tuple(expected.shape) or expected.dim() != 4:
        return False
    found = [
        next((i for i in range(expected.shape[2]) if agrees(held[:, :, j], expected[:, :, i])), None)
        for j in range(held.shape[2])
    ]
    return None not in found and len(set(found)) == len(found)


def unchanged_cache(held: object, before: object) -> bool:
    """A cache attribute holds what it held before: the same tensor values, or the same None or value."""
    if isinstance(held, torch.Tensor) and isinstance(before, torch.Tensor):
        return held.shape == before.shape and torch.equal(held.nan_to_num(), before.nan_to_num())
    return type(held) is type(before) and held == before  # None, "missing" (no such attribute), or a value


def held_in_words(value: object) -> str:
    """What a cache attribute holds, in words: a tensor's shape, or what else it is."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    return "no such attribute" if value == "missing" else describe_value(value)


def slots_beyond(held: torch.Tensor, expected: torch.Tensor) -> bool:
    """``held`` has more token slots (dim 2) than ``expected`` (b, num_heads, tokens, head_dim), and its first
    ones hold ``expected``: a preallocated cache handed out whole."""
    n = expected.shape[2] if expected.dim() == 4 else -1
    return (
        held.dim() == 4
        and held.shape[:2] == expected.shape[:2]
        and held.shape[3] == expected.shape[3]
        and held.shape[2] > n
        and agrees(held[:, :, :n], expected)
    )
