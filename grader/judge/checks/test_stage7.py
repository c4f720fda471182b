"""Stage 7 (bonus): MultiHeadAttentionKV, stage 5's multi-head attention with a KV cache.

Each check feeds a sequence to the learner's module in steps (grader.runner.probes.cached_module) and
compares what comes back with the full causal forward of the whole sequence, which the judge computes from
the same weights: with torch's attention for the visible checks, with stage 5's reference MultiHeadAttention
for the hidden ones. A learner's class may subclass stage 5's MultiHeadAttention: while this stage is graded
that is a stand-in holding stage 5's documented attributes, whose forward refuses to run
(grader.runner.standins): a mistake in stage 5 costs nothing here, and no attention of ours runs beside theirs.
"""

import torch

from grader.judge.checks import documented
from grader.judge.checks.delegation import delegated_shortcut
from grader.judge.checks.device_note import device_hint, expect_module_dtype_followed
from grader.judge.checks.dropout_probe import expect_dropout_on_weights, one_head_state
from grader.judge.checks.examples import fail_if_example_fails
from grader.judge.checks.kv_cache_held import cached_keys_values, expect_cache, held_in_words, is_none, unchanged_cache
from grader.judge.checks.kv_feeding import (
    CHUNKS_FAIL,
    CLS,
    STAGE,
    chunk_steps,
    documented_state,
    expect_cache_unchanged_in_between,
    expect_cached_example,
    expect_like_full_forward,
    fed_token_by_token,
    feed,
    feed_past_a_cache,
    feed_past_a_reset,
    joined,
    refused_early,
)
from grader.judge.checks.module_structure import (
    expect_documented_mask,
    expect_projection_biases,
    expect_trainable,
    mask_buffer_hint,
)
from grader.judge.checks.shortcut import SHORTCUT_SEED, expect_work_recorded, switched_off_reply
from grader.judge.checks.support import (
    CheckFailed,
    agrees,
    build,
    check,
    expect_book_signature,
    expect_close,
    expect_documented_names,
    generator,
    holds_weights,
    init_order_hint,
    parameters_only,
    reference_output,
    reference_state,
)
from grader.judge.document_values import document_values
from grader.judge.tensor_diff import describe_value
from grader.runner.document_examples import journey_batch

# The book's seeded multi-head example (stage 5), fed one token at a time.
BOOK_ARGS: list = [3, 2, 6, 0.0, 2]  # ints and a float, as build takes them
# (batch, num_tokens, d_in, d_out, context_length, num_heads, qkv_bias): one token, the whole context,
# one head, head_dim = 2 with biases
TOKEN_SHAPES = [
    (1, 1, 3, 4, 4, 2, False),
    (3, 5, 4, 6, 8, 3, False),
    (2, 6, 3, 8, 6, 4, False),
    (4, 7, 6, 6, 7, 1, False),
    (2, 5, 5, 12, 9, 6, True),
]
# (batch, d_in, d_out, context_length, num_heads, qkv_bias, chunk sizes): one chunk is the whole forward
CHUNK_CASES = [
    (2, 4, 6, 8, 3, False, [3, 1, 2]),
    (3, 3, 8, 8, 2, False, [2, 2, 2, 1]),
    (1, 5, 4, 6, 2, True, [1, 4]),
    (2, 6, 6, 7, 1, False, [4, 3]),
    (2, 4, 8, 9, 4, False, [5]),
]


# What a cache holds, and what its known mistakes compute ------------------------------------------


@check("document.MultiHeadAttentionKV", visible=True, target=CLS)
def test_document(learner):
    batch = journey_batch(torch.device("cpu"))
    steps = chunk_steps([1] * 6)
    what = "MultiHeadAttentionKV(3, 2, 6, 0.0, num_heads=2) with seed 123, fed the book's batch one token at a time"
    reply = feed(learner, BOOK_ARGS, batch, steps, seed=123)
    value = next(v for v in document_values(5) if v.id == "stage5.multihead_output")
    problem = value.check(joined(reply, batch, steps, BOOK_ARGS[1], what))
    if problem is not None:
        failed = CheckFailed(f"{value.citation}, {what} with use_cache=True: {problem}")
        fail_if_example_fails(failed, lambda: expect_cached_example(learner))
        seeded = build(learner, STAGE, CLS, BOOK_ARGS, seed=123, return_state=True)["state"]
        if holds_weights(seeded, parameters_only(reference_state(documented.MultiHeadAttention, BOOK_ARGS, 123))):
            raise CheckFailed(
                f"{failed.message}\nIts seeded weights are the book's, and with other weights put into "
                "it, it gives the right outputs on a small example fed in chunks of 2, 1 and 2 tokens: "
                "look at what differs when the tokens come one at a time"
            )
        raise CheckFailed(
            f"{failed.message}\nWith the same seed its weights are not the book's: they are stage 5's "
            "parameters (W_query, W_key, W_value, out_proj), created in that order",
            init_order_hint(learner, STAGE, CLS, BOOK_ARGS, 123, maths_checked=True),
        )
    gpt2_small = build(learner, STAGE, CLS, [768, 768, 1024, 0.0, 12])["structure"]["parameters"]
    count = next(v for v in document_values(5) if v.id == "stage5.exercise_3_3_parameter_count")
    problem = count.check(torch.tensor(sum(torch.Size(size).numel() for _, size in gpt2_small)))
    if problem is not None:
        raise CheckFailed(
            f"{count.citation}: MultiHeadAttentionKV(768, 768, 1024, 0.0, 12) holds stage 5's "
            f"parameters and no others, so the same count; {problem}"
        )


@check("example.MultiHeadAttentionKV", visible=True, target=CLS)
def test_example(learner):
    expect_cached_example(learner)


@check("random.token_by_token", target=CLS)
def test_random_token_by_token(learner, reference):
    expect_like_full_forward(
        learner,
        reference,
        "random.token_by_token",
        [
            ([d_in, d_out, context_length, 0.0, num_heads, bias], (b, n, d_in), [1] * n)
            for b, n, d_in, d_out, context_length, num_heads, bias in TOKEN_SHAPES
        ],
    )


@check("random.chunks", target=CLS)
def test_random_chunks(learner, reference):
    expect_like_full_forward(
        learner,
        reference,
        "random.chunks",
        [
            ([d_in, d_out, context_length, 0.0, num_heads, bias], (b, sum(sizes), d_in), sizes)
            for b, d_in, d_out, context_length, num_heads, bias, sizes in CHUNK_CASES
        ],
    )


@check("property.use_cache_off", visible=True, target=CLS)
def test_use_cache_off(learner):
    """use_cache=False (and the default) neither reads nor changes the cache."""
    args = [4, 6, 8, 0.0, 3]
    state = documented_state(args, 9300)
    x = torch.rand(2, 8, 4, generator=generator("property.use_cache_off"))
    # The last step may raise: a cache the calls before it grew has no room for 2 more tokens.
    steps: list[dict] = [
        {"tokens": [0, 3], "use_cache": True},
        {"tokens": [3, 8], "use_cache": None},
        {"tokens": [3, 8], "use_cache": False},
        {"tokens": [3, 5], "use_cache": True, "may_raise": True},
    ]
    reply = feed_past_a_cache(learner, args, x, steps, state)
    full = lambda tokens: documented.output("MultiHeadAttention", args, state, tokens)  # noqa: E731
    # What the cache holds, in whatever layout, is structure.MultiHeadAttentionKV's to judge; here it must
    # only stay as forward(x[:, 0:3], use_cache=True) left it.
    before = reply["steps"][0]["cache"]
    for done, call in zip(reply["steps"][1:3], ("forward(x[:, 3:8])", "forward(x[:, 3:8], use_cache=False)")):
        expect_close(
            done["output"],
            full(x[:, 3:8]),
            f"{call} after 3 tokens were cached, against the causal forward of those 5 tokens alone",
            {"cache-without-use-cache": full(x)[:, 3:8]},
        )
        if changed := [
            name for name in ("cache_k", "cache_v") if not unchanged_cache(done["cache"][name], before[name])
        ]:
            raise CheckFailed(
                f"{call} changed the cache that forward(x[:, 0:3], use_cache=True) left: {' and '.join(changed)} "
                f"went from {held_in_words(before[changed[0]])} to {held_in_words(done['cache'][changed[0]])}",
                "cache-without-use-cache",
            )
    expected = full(x[:, :5])[:, 3:5]
    if reply["steps"][3]["raised"] or not agrees(reply["steps"][3]["output"], expected):
        expect_cache_unchanged_in_between(learner, args, x, [steps[0], steps[3]], state, expected)
    if reply["steps"][3]["raised"]:
        raise CheckFailed(
            f"forward(x[:, 3:5], use_cache=True) after the calls without the cache raised "
            f"{': '.join(reply['steps'][3]['raised'])}"
        )
    expect_close(
        reply["steps"][3]["output"],
        expected,
        "forward(x[:, 3:5], use_cache=True) after the calls without the cache, against rows 4-5 of the "
        "causal forward of x[:, 0:5]",
    )


@check("property.reset_cache", visible=True, target=CLS)
def test_reset_cache(learner):
    """reset_cache() empties the cache: the next tokens start a new sequence."""
    args = [5, 8, 8, 0.0, 2]
    state = documented_state(args, 9400)
    x = torch.rand(3, 7, 5, generator=generator("property.reset_cache"))
    steps: list[dict] = [
        {"reset": True},
        {"tokens": [0, 4], "use_cache": True},
        {"reset": True},
        {"tokens": [4, 7], "use_cache": True},
    ]
    reply = feed_past_a_reset(learner, args, x, steps, state)
    for name in ("cache_k", "cache_v"):
        held = reply["steps"][2]["cache"][name]
        if held == "missing":
            raise CheckFailed(f"the module has no attribute {name}: it holds the cache, or None while it is empty")
        if not is_none(held):
            shown = f"shape {tuple(held.shape)}" if isinstance(held, torch.Tensor) else describe_value(held)
            raise CheckFailed(
                f"after 4 tokens fed with use_cache=True then reset_cache(), {name} is {shown}, expected None",
                "cache-not-reset",
            )
    full = lambda tokens: documented.output("MultiHeadAttention", args, state, tokens)  # noqa: E731
    expect_close(
        reply["steps"][3]["output"],
        full(x[:, 4:7]),
        "forward(x[:, 4:7], use_cache=True) after reset_cache(), against the causal forward of those 3 tokens alone",
        {"cache-not-reset": full(x)[:, 4:7]},
    )
    expect_cache(
        reply["steps"][3]["cache"],
        *cached_keys_values(x[:, 4:7], state, 2),
        "after reset_cache() and 3 tokens fed with use_cache=True",
        x[:, 4:],
    )


@check("property.context_length", visible=True, target=CLS)
def test_context_length(learner):
    """Exactly context_length tokens fit in the cache; one more raises ValueError."""
    args: list = [3, 4, 6, 0.0, 2]  # ints and a float, as build takes them
    x = torch.rand(2, 7, 3, generator=generator("property.context_length"))
    for sizes in ([1] * 7, [4, 3], [7]):
        steps = [{**step, "may_raise": True} for step in chunk_steps(sizes)]
        done = feed(learner, args, x, steps)["steps"]
        raised = next((i for i, step in enumerate(done) if step["raised"]), None)
        fed = "one token at a time" if len(sizes) == 7 else f"in chunks of {sizes} tokens"
        if raised is not None and raised < len(steps) - 1:
            raise refused_early(done, steps, raised, f"{CLS}(3, 4, context_length=6, ...) fed x {fed}", 6, (2, 2))
        if raised is None:
            # The claim needs a full cache: one that never held six tokens' keys misses more than a check.
            before = done[-2]["cache"]["cache_k"] if len(done) > 1 else torch.empty(x.shape[0], 6, args[1])
            full = isinstance(before, torch.Tensor) and before.numel() == x.shape[0] * 6 * args[1]
            held = (
                f"; before the last chunk its cache_k held {tuple(before.shape)}"
                if isinstance(before, torch.Tensor) and not full
                else "; before the last chunk its cache_k held no 6 tokens"
            )
            raise CheckFailed(
                f"{CLS}(3, 4, context_length=6, ...) fed 7 tokens {fed} with use_cache=True raised "
                "nothing: a cache that would grow past context_length must raise ValueError" + ("" if full else held),
                "cache-past-context" if full else None,
            )
        kind, message = done[raised]["raised"]
        after = done[raised]["cache"]["cache_k"]
        if kind == "ValueError" and isinstance(after, torch.Tensor) and after.numel() > x.shape[0] * 6 * args[1]:
            raise CheckFailed(
                f"{CLS}(3, 4, context_length=6, ...) fed 7 tokens {fed} with use_cache=True raised "
                f"ValueError only after its cache grew past 6 tokens (cache_k {tuple(after.shape)}): "
                "check before the cache grows, so that a refused chunk leaves it as it was",
                "cache-past-context",
            )
        if kind != "ValueError":  # after one token at a time was refused rightly, chunks fail elsewhere than here
            chunked = len(sizes) < 7 and kind != "AssertionError"
            raise CheckFailed(
                f"{CLS}(3, 4, context_length=6, ...) fed 7 tokens {fed} with use_cache=True raised {kind}: {message}; "
                + (CHUNKS_FAIL if chunked else "a cache that would grow past context_length must raise ValueError")
                + (" (an assert raises AssertionError, and python -O drops it)" if kind == "AssertionError" else ""),
                None if chunked else "cache-past-context",
            )


@check("property.dropout", visible=True, target=CLS)
def test_dropout(learner):
    """Dropout acts on the attention weights in training, as in stage 5 (forward without the cache)."""
    expect_dropout_on_weights(
        learner, STAGE, CLS, args_for=lambda n, d_out: [n, d_out, n, 0.5, 1], state_for=one_head_state
    )


@check("structure.MultiHeadAttentionKV", visible=True, target=CLS)
def test_structure(learner, device):
    reply, x, state = fed_token_by_token(learner, "structure.MultiHeadAttentionKV")
    shape = reply["structure"]
    expected_linears = [["W_query", [6, 4]], ["W_key", [6, 4]], ["W_value", [6, 4]], ["out_proj", [6, 6]]]
    linears = [[name.removesuffix(".weight"), s] for name, s in shape["parameters"] if name.endswith(".weight")]
    expect_documented_names(CLS, linears, expected_linears)
    if linears != expected_linears or [n for n, _ in shape["parameters"] if n.endswith(".bias")] != ["out_proj.bias"]:
        raise CheckFailed(
            f"MultiHeadAttentionKV(4, 6, 5, 0.1, 3) should hold stage 5's parameters: W_query, W_key, "
            f"W_value (6 x 4, no bias), then out_proj (6 x 6, with bias), and no others; it holds "
            f"{[name for name, _ in shape['parameters']]}",
            "param-init-order" if sorted(linears) == sorted(expected_linears) and linears else None,
        )
    expect_projection_biases(learner, STAGE, CLS, [4, 6, 5, 0.1, 3])
    expect_trainable(CLS, shape, learner, STAGE, [4, 6, 5, 0.1, 3])
    if kept := [key for key in reply["state_dict_after"] if key not in shape["state_dict"]]:
        raise CheckFailed(
            f"after tokens fed with use_cache=True, state_dict() holds {kept} too: the cache is no weight; keep it "
            "as plain attributes (or buffers registered with persistent=False)"
        )
    if ["mask", [5, 5]] not in shape["buffers"]:
        raise CheckFailed(
            f"MultiHeadAttentionKV should register a (context_length, context_length) buffer named mask; "
            f"its buffers are {shape['buffers']}",
            mask_buffer_hint(shape["buffers"]),
        )
    for name in ("cache_k", "cache_v"):
        held = reply["cache_before"][name]
        if not is_none(held):
            raise CheckFailed(
                f"a new MultiHeadAttentionKV should have {name} = None (an empty cache); it has {held_in_words(held)}",
                "cache-not-initialised",
            )
    keys, values = cached_keys_values(x, state, 3)
    for t, done in enumerate(reply["steps"], start=1):
        when = f"after {t} token{'s' if t > 1 else ''} fed one at a time with use_cache=True"
        earlier = (keys[:, :, : t - 1], values[:, :, : t - 1])
        if done["raised"]:  # the cache it left, grown or not, may still show how it grows
            when = f"when forward(x[:, {t - 1}:{t}], use_cache=True) raised {done['raised'][0]}"
            try:
                expect_cache(done["cache"], keys[:, :, :t], values[:, :, :t], when, x, earlier)
            except CheckFailed as failed:
                if failed.hint is not None:
                    raise
            raise CheckFailed(
                f"{CLS}(4, 6, 5, 0.1, 3) fed 5 tokens one at a time with use_cache=True: "
                f"forward(x[:, {t - 1}:{t}], use_cache=True) raised {': '.join(done['raised'])}"
            )
        expect_cache(done["cache"], keys[:, :, :t], values[:, :, :t], when, x)
        cached = done["cache"]["cache_k"]
        if not str(getattr(cached, "learner_device", device)).startswith(device):
            raise CheckFailed(
                f"{when}, cache_k is on {cached.learner_device} while the module is on {device}",
                "fixed-device" if reply["fixed_device_use"] else None,
            )


@check("note.fixed_device", visible=True, target=CLS)
def test_no_fixed_device(learner):
    """A note: what we know beyond the book, which costs nothing unless an instructor prices it."""
    if moved := device_hint(fed_token_by_token(learner, "note.fixed_device")[0], CLS):
        raise moved


@check("note.fixed_dtype", visible=True, target=CLS)
def test_no_fixed_dtype(learner):
    """A note: a module made float64 computes in float64, its cache included (fed two tokens, then one)."""
    x = torch.rand(2, 3, 4, generator=generator("note.fixed_dtype"))
    expect_module_dtype_followed(learner, STAGE, CLS, [4, 6, 5, 0.1, 3], x, chunk_steps([2, 1]))


@check("shortcut.MultiHeadAttentionKV", target=CLS)
def test_shortcut(learner, learner_source, reference):
    shortcut = delegated_shortcut(learner_source, STAGE, CLS)  # calling the learner's own stage 6 is fine
    args, sizes = [3, 4, 6, 0.0, 2], [3, 2, 1]  # type: list, list[int]
    state = parameters_only(reference_state(reference.name(CLS), args, SHORTCUT_SEED))
    x = torch.rand(2, 6, 3, generator=generator("shortcut.MultiHeadAttentionKV"))
    reply = switched_off_reply(
        shortcut,
        f"{CLS}.forward",
        lambda off: feed(learner, args, x, chunk_steps(sizes), state, record=True, switched_off=off),
    )
    try:
        output = joined(reply, x, chunk_steps(sizes), args[1], CLS)
    except CheckFailed:
        output = None
    right = agrees(output, reference_output(reference.name("MultiHeadAttention"), args, state, x))
    expect_work_recorded(reply["ops"], shortcut, right, f"{CLS}.forward")


@check("note.signature", visible=True)
def test_book_signature(learner, learner_source):
    """A note: the book's signature, which the checks do not need (they call by the book's names)."""
    expect_book_signature(learner, learner_source[STAGE], STAGE, {"MultiHeadAttentionKV": [3, 2, 6, 0.0, 2]})


@check("note.mask_buffer", visible=True, target=CLS)
def test_mask_buffer(learner):
    expect_documented_mask(learner, STAGE, CLS, [4, 6, 5, 0.1, 3])
