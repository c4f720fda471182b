"""Stage 7's KV cache fed in steps: a sequence given to the learner's MultiHeadAttentionKV token by token or in
chunks (grader.runner.probes.cached_module), the outputs joined back, and what each way of caching would give."""

import zlib

import torch

from grader.judge.checks import documented
from grader.judge.checks.examples import SHAPE_ERRORS
from grader.judge.checks.support import (
    CheckFailed,
    LearnerFailure,
    agrees,
    build,
    build_with_weights,
    expect_all_close,
    generator,
    parameters_only,
    reference_output,
    reference_state,
)
from grader.judge.diagnosis import linear, multihead_variants
from grader.judge.tensor_diff import describe_value

STAGE = 7
CLS = "MultiHeadAttentionKV"
PROJECTIONS = ("W_query", "W_key", "W_value")
# A small public example that tells the cache's mistakes apart: a chunk of 2 tokens after cached ones.
EXAMPLE_ARGS, EXAMPLE_SIZES = [3, 4, 6, 0.0, 2], [2, 1, 2]
# A chunk that raises other than ValueError where one token at a time is refused rightly: no check of the context.
CHUNKS_FAIL = "one token at a time it refused the 7th with ValueError, as it should: chunks fail elsewhere"


def chunk_steps(sizes: list[int]) -> list[dict]:
    """Feed consecutive chunks of ``sizes`` tokens with use_cache=True."""
    steps, start = [], 0
    for size in sizes:
        steps.append({"tokens": [start, start + size], "use_cache": True})
        start += size
    return steps


def feed(learner, args: list, x: torch.Tensor, steps: list[dict], state: dict | None = None, **options) -> dict:
    """The learner's MultiHeadAttentionKV(*args), holding ``state`` if given, run through ``steps`` on x."""
    if state is None:
        return build(learner, STAGE, CLS, args, probe="cached_module", x=x, steps=steps, **options)
    return build_with_weights(learner, STAGE, CLS, args, state, probe="cached_module", x=x, steps=steps, **options)


def feed_chunks(learner, args: list, state: dict, x: torch.Tensor, sizes: list[int], training: bool = False) -> dict:
    """``feed`` in chunks of ``sizes``, naming a chunk mask not offset by the cache when the failure proves it:
    a shape error from a module that takes the widest chunk on an empty cache, and the same tokens one at a time
    (where a chunk's rows of the mask are one row whatever its start: a start that counts calls, or rows cut from
    the mask's top, fit there)."""
    try:
        return feed(learner, args, x, chunk_steps(sizes), state, training=training)
    except LearnerFailure as failure:
        shape_error = failure.kind == "exception" and any(e in failure.message for e in SHAPE_ERRORS)
        widest = max(sizes)
        if shape_error and _first_chunk_fails_cached(learner, args, state, x, sizes[0]):
            raise CheckFailed(
                f"{CLS}{tuple(args)} fed chunks of {sizes} tokens with use_cache=True raised {failure}; on an empty "
                f"cache its first {sizes[0]} token(s) raise with use_cache=True and run without: the cached path "
                "cuts the causal mask for another number of tokens than it attends to; a chunk's rows start at the "
                "number of tokens cached before it (0 here), read before its keys are appended",
                "cache-mask-not-offset",
            ) from None
        if len(sizes) < 2 or widest == 1 or not shape_error:
            raise
        try:
            feed(learner, args, x, chunk_steps([widest]), state)
            feed(learner, args, x, chunk_steps([1] * sum(sizes)), state)
        except LearnerFailure:
            raise failure from None
        raise CheckFailed(
            f"{CLS}{tuple(args)} fed chunks of {sizes} tokens with use_cache=True raised {failure}; it takes a "
            f"chunk of {widest} tokens on an empty cache, and the same tokens one at a time: a chunk after cached "
            "tokens takes the wrong rows of the causal mask, which start at the number of tokens cached "
            "(cache_k.shape[2]), whatever the calls before it fed",
            "cache-mask-not-offset",
        ) from None


def _first_chunk_fails_cached(learner, args: list, state: dict, x: torch.Tensor, n: int) -> bool:
    """The first ``n`` tokens raise with use_cache=True on an empty cache, and run with use_cache=False."""
    try:
        feed(learner, args, x, [{"tokens": [0, n], "use_cache": True}], state)
        return False
    except LearnerFailure as failure:
        if failure.kind != "exception":
            return False
    try:
        feed(learner, args, x, [{"tokens": [0, n], "use_cache": False}], state)
    except LearnerFailure:
        return False
    return True


def feed_past_a_reset(learner, args: list, x: torch.Tensor, steps: list[dict], state: dict) -> dict:
    """``feed`` through steps with reset_cache() between tokens, naming a reset that leaves the module otherwise
    than a fresh one when the failure proves it: the steps raise, yet the tokens between two resets each run on a
    fresh module never reset."""
    try:
        return feed(learner, args, x, steps, state)
    except LearnerFailure as failure:
        # the tokens between two resets, each run on a fresh module that is never reset
        sequences: list[list[dict]] = [[]]
        for step in steps:
            if step.get("reset"):
                sequences.append([])
            else:
                sequences[-1].append(step)
        try:
            for sequence in filter(None, sequences):
                feed(learner, args, x, sequence, state)
        except LearnerFailure:
            raise failure from None
        raise CheckFailed(
            f"after reset_cache(), a forward with use_cache=True raised {failure}; a fresh module, never reset, "
            "takes the same tokens: reset_cache() leaves the module otherwise than a fresh one (a cache that is "
            "not None, or a count of the cached tokens, say)",
            "cache-not-reset",
        ) from None


def feed_past_a_cache(learner, args: list, x: torch.Tensor, steps: list[dict], state: dict) -> dict:
    """``feed`` through a first step with use_cache=True and then steps without the cache, naming a cache read
    where use_cache is off when the failure proves it: the steps without the cache raise after the cached one,
    yet the cached step alone and the others alone, on a fresh module, both run."""
    try:
        return feed(learner, args, x, steps, state)
    except LearnerFailure as failure:
        plain = [step for step in steps[1:] if not step.get("use_cache")]
        try:
            feed(learner, args, x, steps[:1], state)
            feed(learner, args, x, plain, state)
        except LearnerFailure:
            raise failure from None
        raise CheckFailed(
            f"a forward without the cache raised {failure} after tokens were cached with use_cache=True; on a fresh "
            "module, whose cache is empty, the same calls run: the forward reads the cache (its length, say) "
            "when use_cache is off",
            "cache-without-use-cache",
        ) from None


def refused_early(
    done: list[dict], steps: list[dict], raised: int, fed: str, context: int, heads: tuple
) -> CheckFailed:
    """The verdict on a cache that refused step ``raised`` of ``steps`` though it would not grow past ``context``
    tokens; ``heads``: (batch, num_heads) of a cache laid out right. Off by one (>= for >) is proven only of a
    cache laid out right, refused with ValueError on the chunk that fills it exactly."""
    kind, message = done[raised]["raised"]
    start, end = steps[raised]["tokens"]
    before = done[raised - 1]["cache"]["cache_k"] if raised else None
    laid_out = start == 0 or isinstance(before, torch.Tensor) and tuple(before.shape[:3]) == (*heads, start)
    return CheckFailed(
        f"{fed} with use_cache=True raised {kind}: {message}, on the chunk that brings the cache to {end} tokens: it "
        "is full at context_length tokens, and only a chunk that would grow it past that raises",
        "cache-past-context" if end == context and kind == "ValueError" and laid_out else None,
    )


def joined(reply: dict, x: torch.Tensor, steps: list[dict], d_out: int, what: str) -> torch.Tensor:
    """The forward steps' outputs side by side along the tokens; a step's output of the wrong kind or shape fails."""
    outputs = []
    for step, done in zip(steps, reply["steps"]):
        start, stop = step["tokens"]
        output, shape = done["output"], (x.shape[0], stop - start, d_out)
        if not isinstance(output, torch.Tensor) or tuple(output.shape) != shape:
            got = f"shape {tuple(output.shape)}" if isinstance(output, torch.Tensor) else describe_value(output)
            raise CheckFailed(
                f"{what}: forward(x[:, {start}:{stop}], use_cache=True) returned {got}, expected a "
                f"tensor of shape {shape}",
                "wrong-shape" if isinstance(output, torch.Tensor) else None,
            )
        outputs.append(output)
    return torch.cat(outputs, dim=1)


def split_heads(t: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(b, n, d_out) -> (b, num_heads, n, head_dim)"""
    b, n, d_out = t.shape
    return t.view(b, n, num_heads, d_out // num_heads).transpose(1, 2)


def offset_mask(start: int, n: int) -> torch.Tensor:
    """The keys hidden from a chunk of n queries after ``start`` cached tokens: rows start.. of the causal mask."""
    return torch.ones(n, start + n, dtype=torch.bool).triu(start + 1)


def top_left_mask(start: int, n: int) -> torch.Tensor:
    return torch.ones(n, start + n, dtype=torch.bool).triu(1)


def no_mask(start: int, n: int) -> torch.Tensor:
    return torch.zeros(n, start + n, dtype=torch.bool)


def fed_in_chunks(
    x: torch.Tensor,
    state: dict,
    num_heads: int,
    sizes: list[int],
    hidden=offset_mask,
    reads_cache: bool = True,
    cached_values_are_keys: bool = False,
    divided_by_keys: bool = False,
    reads_cache_alone: bool = True,
) -> torch.Tensor:
    """Multi-head attention holding ``state`` on x fed in chunks of ``sizes``: a chunk of n queries after
    ``start`` cached tokens attends to the cached and its own keys, minus those ``hidden(start, n)`` marks;
    without ``reads_cache``, to its own keys only, causally; with ``cached_values_are_keys``, the cached
    tokens' keys stand in for their values; with ``divided_by_keys``, the scores are divided by the square root
    of the number of keys instead of head_dim's; without ``reads_cache_alone``, only one-token chunks read it."""
    q, k, v = (split_heads(linear(x, state, name), num_heads) for name in PROJECTIONS)
    contexts, start = [], 0
    for n in sizes:
        stop = start + n
        reads = reads_cache and (reads_cache_alone or n == 1)  # a chunk of several tokens may start afresh
        first, hide = (0, hidden(start, n)) if reads else (start, offset_mask(0, n))
        values = v[:, :, first:stop]
        if cached_values_are_keys:
            values = torch.cat([k[:, :, first:start], v[:, :, start:stop]], dim=2)
        divisor = (stop - first if divided_by_keys else q.shape[-1]) ** 0.5
        scores = q[:, :, start:stop] @ k[:, :, first:stop].transpose(-2, -1) / divisor
        contexts.append(torch.softmax(scores.masked_fill(hide, -torch.inf), dim=-1) @ values)
        start = stop
    context = torch.cat(contexts, dim=2).transpose(1, 2)
    return linear(context.reshape(*context.shape[:2], -1), state, "out_proj")


def cache_variants(x: torch.Tensor, state: dict, num_heads: int, sizes: list[int]) -> dict[str, torch.Tensor]:
    """The outputs of the usual KV-cache mistakes for x fed in chunks of ``sizes``, and of stage 5's mistakes
    made in every step alike (a mistake within each token's row gives the same rows however x is fed)."""

    def unmasked_once_cached(start: int, n: int) -> torch.Tensor:
        return no_mask(start, n) if start else offset_mask(start, n)

    def unmasked_while_empty(start: int, n: int) -> torch.Tensor:
        return offset_mask(start, n) if start else no_mask(start, n)

    return {
        **multihead_variants(x, state, num_heads),
        "cache-mask-not-offset": fed_in_chunks(x, state, num_heads, sizes, top_left_mask),
        # Named by what the output shows: a mask whose rows hide nothing gives the same as none.
        "mask-not-causal:with use_cache=True, a chunk's tokens see later ones, as with no mask at all": fed_in_chunks(
            x, state, num_heads, sizes, no_mask
        ),
        "mask-not-causal:once the cache holds tokens, a chunk's tokens see later ones, as with no mask": fed_in_chunks(
            x, state, num_heads, sizes, unmasked_once_cached
        ),
        "mask-not-causal:the first chunk, fed to an empty cache, is attended without the mask, so its tokens see "
        "later ones; it needs the causal mask as much as any chunk": fed_in_chunks(
            x, state, num_heads, sizes, unmasked_while_empty
        ),
        "cache-not-used": fed_in_chunks(x, state, num_heads, sizes, reads_cache=False),
        "cache-not-used:a chunk of several tokens attends to its own tokens alone, as if the cache were empty": (
            fed_in_chunks(x, state, num_heads, sizes, reads_cache_alone=False)
        ),
        # keys.shape[2] ** 0.5 for keys.shape[-1] ** 0.5: the number of keys, which grows with the cache
        "wrong-scaling:the scores are divided by the square root of the number of keys (keys.shape[2], the tokens "
        "cached and new), not by sqrt(head_dim) (keys.shape[-1])": fed_in_chunks(
            x, state, num_heads, sizes, divided_by_keys=True
        ),
        # torch.cat([self.cache_k, values]): the new values appended to the cached keys, a copy-paste slip
        "weights-swapped:the new values are appended to the cached keys, which then stand in for the cached "
        "values": fed_in_chunks(x, state, num_heads, sizes, cached_values_are_keys=True),
    }


def fed_case(
    learner, args: list, state: dict, x: torch.Tensor, sizes: list[int], expected: torch.Tensor, training: bool = False
) -> tuple:
    """(output, expected, what, variants) of x fed in chunks of ``sizes``, for expect_all_close; ``training``: the
    module left in training mode, as built (with dropout 0 that changes nothing: the cache serves either mode)."""
    what = (
        f"{CLS}{tuple(args)} on a {tuple(x.shape)} batch fed "
        + ("one token at a time" if set(sizes) == {1} and len(sizes) > 1 else f"in chunks of {sizes} tokens")
        + " with use_cache=True"
        + (" in training mode (dropout 0, as built)" if training else "")
        + ", against the full causal forward"
    )
    output = joined(feed_chunks(learner, args, state, x, sizes, training), x, chunk_steps(sizes), args[1], what)
    return output, expected, what, lambda: cache_variants(x, state, args[4], sizes)


def expect_like_full_forward(
    learner, reference, check_name: str, cases: list[tuple[list, tuple[int, ...], list[int]]], training: bool = False
) -> None:
    """Each case (args, x's shape, chunk sizes): the learner's module holding the reference's weights, fed a random
    x in chunks of those sizes (``training``: in training mode, see fed_case), against the reference's forward."""
    rng, judged = generator(check_name), []
    for index, (args, shape, sizes) in enumerate(cases):
        state = parameters_only(reference_state(reference.name(CLS), args, zlib.crc32(check_name.encode()) + index))
        x = torch.rand(*shape, generator=rng)
        expected = reference_output(reference.name("MultiHeadAttention"), args, state, x)
        judged.append(fed_case(learner, args, state, x, sizes, expected, training))
    expect_all_close(judged)


def expect_cached_example(learner) -> None:
    """The small public example: random weights, 5 tokens fed in chunks of 2, 1 and 2, to a module left in
    training mode as built (dropout 0: the cache serves either mode)."""
    state = parameters_only(reference_state(documented.MultiHeadAttention, EXAMPLE_ARGS, seed=zlib.crc32(CLS.encode())))
    x = torch.rand(2, 5, 3, generator=generator(f"example.{CLS}"))
    expected = documented.output("MultiHeadAttention", EXAMPLE_ARGS, state, x)
    expect_all_close([fed_case(learner, EXAMPLE_ARGS, state, x, EXAMPLE_SIZES, expected, training=True)])


def documented_state(args: list, seed: int) -> dict:
    """The weights a module of ``args`` gets under ``seed``, drawn by the documented structure alone: what a visible
    check injects, since the release has no reference solution (the same draws as the reference's)."""
    return parameters_only(reference_state(documented.DOCUMENTED[CLS], args, seed))


def fed_token_by_token(learner, check_name: str) -> tuple[dict, torch.Tensor, dict]:
    """CLS(4, 6, 5, 0.1, 3) with documented weights, fed 5 tokens one at a time (a step may raise), watching for
    tensors made on a fixed device: the reply, the input and the weights."""
    args = [4, 6, 5, 0.1, 3]
    state = documented_state(args, 9500)
    x = torch.rand(2, 5, 4, generator=generator(check_name))
    steps = [{**step, "may_raise": True} for step in chunk_steps([1] * 5)]
    return feed(learner, args, x, steps, state, watch_device=True), x, state


def expect_cache_unchanged_in_between(learner, args: list, x: torch.Tensor, steps: list[dict], state: dict, expected):
    """Where a cached step came out wrong after calls without the cache in between: the same ``steps`` (the cached
    one, then that step) with nothing between them give ``expected``, so those calls changed something the cache
    counts on (a position, a length), though cache_k and cache_v stayed as they were."""
    try:
        direct = feed(learner, args, x, steps, state)["steps"][1].get("output")
    except LearnerFailure:
        return
    if direct is not None and agrees(direct, expected):
        raise CheckFailed(
            "forward(x[:, 3:5], use_cache=True) gives rows 4-5 of the causal forward of x[:, 0:5] right after "
            "forward(x[:, 0:3], use_cache=True), and other rows after calls without the cache in between: those "
            "calls changed what the cache counts on (a position or length kept on self)",
            "cache-without-use-cache",
        )
