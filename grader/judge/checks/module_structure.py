"""What the structure checks ask of a module beyond its names and shapes: it trains (every parameter takes a
gradient, no dropout overwrites what autograd keeps), its forward leaves it as it was for the next call, its
projections follow qkv_bias, and its mask buffer is the documented one."""

from typing import cast

import torch

from grader.judge.checks.naming import PROJECTION_NAMES, parameters_only
from grader.judge.checks.support import (
    CheckFailed,
    LearnerFailure,
    LearnerWorkers,
    agrees,
    build,
    generator,
    holds_weights,
)
from grader.runner.book_calls import SIGNATURE_REFUSED

# Two seeds of the judge's own: a module built after each holds other weights unless it seeds itself.
CALLER_SEEDS = (7, 8)


def expect_trainable(cls: str, shape: dict, learner: LearnerWorkers, stage: int, args: list | None) -> None:
    """``cls``'s module, described by its ``shape`` (a build's "structure"), can be trained: every parameter
    takes a gradient through forward and backward (built as ``cls(*args)``; ``args`` None where its parts are
    another stage's, graded by stand-ins that compute no attention), no dropout overwrites the attention weights
    autograd keeps for the backward pass, and its first weights come from its caller's seed."""
    if frozen := shape.get("frozen"):
        raise CheckFailed(
            f"{cls}'s {', '.join(map(str, frozen))} do not require grad, so training cannot change them: create "
            "each weight as nn.Parameter(...) (or nn.Linear) without requires_grad=False, as the book's class does"
        )
    if shape.get("training") is False:
        raise CheckFailed(
            f"{cls} is in eval mode as soon as it is built (self.eval() or self.training = False in __init__): "
            "nn.Module starts in training mode, where dropout acts, until its caller says .eval()",
            "built-in-eval",
        )
    if inplace := shape.get("inplace_dropout"):
        raise CheckFailed(
            f"{cls}'s {', '.join(map(str, inplace))} is nn.Dropout(..., inplace=True): in training it overwrites "
            "the attention weights that autograd keeps for the backward pass, and backward() raises; drop out "
            "into a new tensor, nn.Dropout(dropout)",
            "inplace-breaks-backward",
        )
    if args is None:
        return
    expect_caller_seed(learner, stage, cls, args)
    expect_calls_independent(learner, stage, cls, args)
    # stage 2's modules take the book's (num_tokens, d_in) inputs; the later ones a batch
    x = torch.rand(*(() if stage == 2 else (2,)), 3, args[0], generator=generator(f"gradients {cls}"))
    try:
        reply = cast(dict, learner.request(stage, "gradients", cls=cls, args=list(args), x=x))
    except LearnerFailure as failure:
        if failure.kind != "exception":
            raise  # not implemented, a crash, a timeout: the check fails as any would
        return  # forward raises: the result checks say so
    if said := reply.get("backward_raised"):
        raise CheckFailed(
            f"{cls}{tuple(args)}: forward runs, and backward() from its output raises RuntimeError: {said}",
            "inplace-breaks-backward" if "modified by an inplace operation" in said else None,
        )
    untouched = reply["no_gradient"]
    if untouched:
        raise CheckFailed(
            f"{cls}{tuple(args)}: after forward and backward, {', '.join(map(str, untouched))} got no gradient (or "
            "one of zeros), so training cannot change them: forward computes with a copy autograd does not follow "
            "(W.data, .detach(), torch.no_grad()), or through a step whose gradient is zero (torch.round); use the "
            "parameters themselves, x @ self.W_query",
            "no-gradient",
        )


def expect_caller_seed(learner: LearnerWorkers, stage: int, cls: str, args: list) -> None:
    """``cls(*args)`` draws its weights from its caller's seed: built after two different seeds it holds other
    weights, unless it calls torch.manual_seed itself (in __init__), so that every instance is the same."""
    try:
        first, second = (
            parameters_only(build(learner, stage, cls, args, seed=seed, return_state=True)["state"])
            for seed in CALLER_SEEDS
        )
    except LearnerFailure as failure:
        if failure.kind != "exception":
            raise
        return  # it cannot be built: the other checks say why
    weights = {name: t for name, t in first.items() if isinstance(t, torch.Tensor) and t.is_floating_point()}
    if weights and holds_weights(second, weights):
        seeds = " and after ".join(f"torch.manual_seed({seed})" for seed in CALLER_SEEDS)
        raise CheckFailed(
            f"{cls}{tuple(args)} built after {seeds} holds the very same weights: it sets its own seed "
            "(torch.manual_seed in __init__), so every instance holds the same weights whatever seed its caller "
            "set; seed before building it, as the book does",
            "seed-in-module",
        )


def expect_calls_independent(learner: LearnerWorkers, stage: int, cls: str, args: list) -> None:
    """``cls(*args)`` called on one input and then another gives for the second what a fresh module gives: forward
    keeps nothing of one call for the next (keys or values computed once, a cut mask stored on self)."""
    rng = generator(f"calls independent {cls}")
    first, second = (torch.rand(*(() if stage == 2 else (2,)), n, args[0], generator=rng) for n in (2, 3))
    try:
        fresh, twice = build(learner, stage, cls, args, seed=1, inputs=[second, second])["outputs"]
        again = build(learner, stage, cls, args, seed=1, inputs=[first, second])["outputs"][1]
    except LearnerFailure as failure:
        if failure.kind != "exception":
            raise
        return  # it raises: the result checks say why
    # another answer to the same input each time (dropout in eval) is the result checks' to judge
    if isinstance(fresh, torch.Tensor) and agrees(twice, fresh) and not agrees(again, fresh):
        raise CheckFailed(
            f"{cls}{tuple(args)} called on 2 tokens, then on 3, gives for the 3 other values than a fresh module "
            "does: forward keeps something of one call for the next (keys or values computed once, a cut mask "
            "stored on self); compute what each call needs from its own input",
            "forward-keeps-state",
        )


def expect_forward_keeps_buffers(learner: LearnerWorkers, stage: int, cls: str, args: list, tokens: int) -> None:
    """``cls(*args)``'s forward on ``tokens`` tokens (fewer than its context) leaves its buffers as they were, and
    the same module then computes on a full context what a fresh one does: a mask cut to the first input and kept
    (as self.mask, or any attribute) breaks the next, longer input. What a fresh module raises is the result
    checks' to judge."""
    rng = generator(f"buffers kept {cls}")
    short, full = torch.rand(2, tokens, args[0], generator=rng), torch.rand(2, args[2], args[0], generator=rng)
    try:
        fresh, again = build(learner, stage, cls, args, seed=1, inputs=[full, full])["outputs"]
        reply = build(learner, stage, cls, args, seed=1, inputs=[short])
    except LearnerFailure as failure:
        if failure.kind != "exception":
            raise  # not implemented, a crash, a timeout: the check fails as any would
        return
    if not isinstance(fresh, torch.Tensor) or not agrees(again, fresh):
        return  # not one tensor, or another answer each time (dropout in eval): the result checks say so
    before, after = reply["structure"]["buffers"], reply.get("buffers_after", [])
    if after != before:
        raise CheckFailed(
            f"{cls}{tuple(args)}'s forward on {tokens} tokens changed its buffers from {before} to {after}: keep "
            "what forward cuts from the mask in a local variable, so that self.mask stays whole for the next input",
            "forward-keeps-state",
        )
    then = f"{cls}{tuple(args)} called on {tokens} tokens, then on {args[2]}"
    try:
        second = build(learner, stage, cls, args, seed=1, inputs=[short, full])["outputs"][1]
    except LearnerFailure as failure:
        if failure.kind != "exception":
            raise
        raise CheckFailed(
            f"{then}, raised {failure} on the second call, which a fresh module answers", "forward-keeps-state"
        ) from None
    if not agrees(second, fresh):
        raise CheckFailed(f"{then}, returns other values than a fresh module does", "forward-keeps-state")


def expect_projection_biases(learner: LearnerWorkers, stage: int, cls: str, args: list) -> None:
    """``cls(*args, qkv_bias=True)`` gives each of W_query, W_key and W_value a bias. The structure checks build
    the module with qkv_bias=False, where a bias that never follows the argument hides."""
    try:
        shape = build(learner, stage, cls, args, kwargs={"qkv_bias": True})["structure"]
    except LearnerFailure as failure:
        if SIGNATURE_REFUSED in failure.message:  # no qkv_bias to follow: note.signature says so
            return
        raise
    biased = {name.removesuffix(".bias") for name, _ in shape["parameters"] if name.endswith(".bias")}
    missing = [name for name in PROJECTION_NAMES if name not in biased]
    if missing:
        raise CheckFailed(
            f"{cls}{tuple(args)} built with qkv_bias=True gives {', '.join(missing)} no bias: each of W_query, "
            "W_key and W_value should be nn.Linear(..., bias=qkv_bias)",
            "qkv-bias-ignored",
        )


def mask_buffer_hint(buffers: list) -> str | None:
    """Why a module lacks its (context_length, context_length) mask buffer: mask-not-buffer where no buffer is named
    mask; sizes-hard-coded where it is the worked example's (6, 6) whatever context_length says; else no cause."""
    sizes = [size for name, size in buffers if name == "mask"]
    if not sizes:
        return "mask-not-buffer"
    return "sizes-hard-coded" if sizes[0] == [6, 6] else None


def expect_documented_mask(learner: LearnerWorkers, stage: int, cls: str, args: list) -> None:
    """note.mask_buffer: the buffer named mask is the documented torch.triu(ones, diagonal=1), not its complement
    torch.tril(ones) read the other way round (mask == 0). The maths is the same, so it is a note; but a
    state_dict saved from one loads into the other with every future token visible and every past one hidden.
    Any other content, or a forward that is not causal with it, is the result checks' to judge."""
    n = args[2]  # context_length
    x = torch.rand(2, n, args[0], generator=generator(f"mask buffer {cls}"))
    later = x.clone()
    later[:, -1] += 1  # the last token changed: a causal forward keeps every earlier token's output
    try:
        reply = build(learner, stage, cls, args, return_state=True, inputs=[x, later])
    except LearnerFailure as failure:
        if failure.kind != "exception":
            raise  # not implemented, a crash, a timeout: the check fails as any would
        return
    mask, (before, after) = reply["state"].get("mask"), reply["outputs"]
    if not isinstance(mask, torch.Tensor) or tuple(mask.shape) != (n, n):
        return
    # the outputs as the learner's forward made them: compared only where they are (b, tokens, ...) alike
    causal = (
        isinstance(before, torch.Tensor)
        and isinstance(after, torch.Tensor)
        and before.shape == after.shape
        and before.shape[:2] == x.shape[:2]
        and agrees(after[:, :-1], before[:, :-1])
    )
    if causal and torch.equal(mask.to("cpu").ne(0), torch.ones(n, n, dtype=torch.bool).tril()):
        raise CheckFailed(
            f"{cls}{tuple(args)}'s buffer mask holds torch.tril(torch.ones({n}, {n})), 1 on and below the "
            f"diagonal, where the book's holds torch.triu(torch.ones({n}, {n}), diagonal=1), 1 above it. Your "
            "forward reads it the other way round, so it computes the same; but a state_dict saved by the book's "
            "class loads into yours (and yours into the book's) with the mask inverted",
            "mask-buffer-inverted",
        )
