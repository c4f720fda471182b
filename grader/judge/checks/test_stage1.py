"""Stage 1: attention scores, a softmax by hand, context vectors."""

import torch

from grader.judge.checks.device_note import expect_device_followed, expect_dtype_followed
from grader.judge.checks.examples import expect_function_values_explained
from grader.judge.checks.shortcut import SOFTMAX_BY_HAND, expect_not_spelled, expect_work_recorded, switched_off_reply
from grader.judge.checks.support import (
    CheckFailed,
    call,
    check,
    expect_close,
    expect_function_on_cases,
    expect_inputs_kept,
    generator,
)
from grader.judge.diagnosis import simple_attention_variants, softmax_variants
from grader.judge.verdict import agrees, hint_of, proven_mistake

STAGE = 1
# (num_tokens, d_in): few tokens, narrow, the book's, wide. A single token is an edge that structure.outputs prices,
# once: code that fails there alone (inputs[1] read as the query) loses that check, not every check of its function.
SHAPES = [(2, 3), (5, 2), (6, 3), (9, 16)]


@check("document.attention_scores", visible=True, target="attention_scores")
def test_document_attention_scores(learner):
    expect_function_values_explained(
        learner, STAGE, ["stage1.attn_scores_2", "stage1.attn_scores", "stage1.attn_weights_2_tmp"], "attention_scores"
    )


@check("document.softmax_naive", visible=True, target="softmax_naive")
def test_document_softmax_naive(learner):
    expect_function_values_explained(
        learner,
        STAGE,
        ["stage1.attn_weights_2_naive", "stage1.attn_weights_2_naive_sum", "stage1.attn_weights"],
        "softmax_naive",
    )


@check("document.context_vector", visible=True, target="context_vector")
def test_document_context_vector(learner):
    expect_function_values_explained(learner, STAGE, ["stage1.context_vec_2"], "context_vector")


@check("document.simple_self_attention", visible=True, target="simple_self_attention")
def test_document_simple_self_attention(learner):
    expect_function_values_explained(learner, STAGE, ["stage1.all_context_vecs"], "simple_self_attention")


@check("random.attention_scores", target="attention_scores")
def test_random_attention_scores(learner, reference):
    rng = generator("random.attention_scores")
    cases = [(torch.rand(n, d, generator=rng), torch.rand(d, generator=rng)) for n, d in SHAPES]
    expect_function_on_cases(
        learner,
        STAGE,
        "attention_scores",
        reference.attention_scores,
        cases,
        lambda inputs, query: f"attention_scores of {inputs.shape[0]} token(s) of size {inputs.shape[1]}",
    )


@check("random.softmax_naive", target="softmax_naive")
def test_random_softmax_naive(learner, reference):
    rng = generator("random.softmax_naive")
    cases = [(torch.rand(n, generator=rng) * 8 - 4,) for n in (2, 3, 6, 6)]  # one score: structure.outputs
    expect_function_on_cases(
        learner,
        STAGE,
        "softmax_naive",
        reference.softmax_naive,
        cases,
        lambda x: f"softmax_naive of {x.shape[0]} score(s)",
        softmax_variants,
    )


@check("random.context_vector", target="context_vector")
def test_random_context_vector(learner, reference):
    rng = generator("random.context_vector")
    cases = [(torch.rand(n, d, generator=rng), torch.softmax(torch.rand(n, generator=rng), dim=0)) for n, d in SHAPES]
    # the rows summed, each times its weight, whatever the weights add up to (a weighted mean is right only at 1)
    cases.append((torch.rand(4, 3, generator=rng), torch.rand(4, generator=rng) * 2))

    def described(inputs: torch.Tensor, weights: torch.Tensor) -> str:
        total = float(weights.sum())
        summing = "" if abs(total - 1) < 1e-6 else f", weights that sum to {total:.4g}"
        return f"context_vector of {inputs.shape[0]} token(s) of size {inputs.shape[1]}{summing}"

    expect_function_on_cases(learner, STAGE, "context_vector", reference.context_vector, cases, described)


@check("random.simple_self_attention", target="simple_self_attention")
def test_random_simple_self_attention(learner, reference):
    rng = generator("random.simple_self_attention")
    cases = [(torch.rand(n, d, generator=rng),) for n, d in SHAPES]
    expect_function_on_cases(
        learner,
        STAGE,
        "simple_self_attention",
        reference.simple_self_attention,
        cases,
        lambda x: f"simple_self_attention of {x.shape[0]} token(s) of size {x.shape[1]}",
        simple_attention_variants,
    )


@check("property.softmax_naive", visible=True, target="softmax_naive")
def test_softmax_naive_properties(learner):
    x = torch.rand(7, generator=generator("property.softmax_naive")) * 6 - 3
    # shifted far below zero, where exp() is tiny but no float32 is lost: an epsilon added to the sum shows there
    weights, shifted = call(learner, STAGE, "softmax_naive", x), call(learner, STAGE, "softmax_naive", x - 20.0)
    try:
        expect_close(
            weights.sum() if isinstance(weights, torch.Tensor) else weights,
            torch.tensor(1.0),
            "the sum of softmax_naive's weights",
        )
        assert isinstance(weights, torch.Tensor)  # expect_close has failed anything else
        if not (weights > 0).all():
            raise CheckFailed("softmax_naive gave a weight that is not positive: exp() is always positive")
        expect_close(
            shifted, weights, "softmax_naive(x - 20) compared with softmax_naive(x) (a softmax ignores a shift)"
        )
        if not torch.equal(torch.argsort(weights), torch.argsort(x)):
            raise CheckFailed("softmax_naive changed the order of the scores: a larger score must get a larger weight")
    except CheckFailed as failed:  # it names a mistake only when the weights themselves are that mistake's
        proven = proven_mistake(weights, torch.softmax(x, dim=0), softmax_variants(x))
        raise CheckFailed(failed.message, failed.hint or (proven and hint_of(proven))) from None


def _calls(rng: torch.Generator) -> dict[str, list]:
    """Arguments for each of the stage's functions: 4 tokens of size 3, the second as the query."""
    inputs = torch.rand(4, 3, generator=rng)
    return {
        "attention_scores": [inputs, inputs[1].clone()],
        "softmax_naive": [torch.rand(5, generator=rng) * 4 - 2],
        "context_vector": [inputs, torch.softmax(torch.rand(4, generator=rng), dim=0)],
        "simple_self_attention": [inputs],
    }


@check("property.inputs_kept", visible=True)
def test_inputs_kept(learner):
    expect_inputs_kept(learner, STAGE, _calls(generator("property.inputs_kept")))


@check("shortcut.softmax_naive", target="softmax_naive")
def test_softmax_naive_is_written_by_hand(learner, learner_source, reference):
    expect_not_spelled(learner_source, STAGE, "softmax_naive", SOFTMAX_BY_HAND)
    scores = torch.rand(6, generator=generator("shortcut.softmax_naive"))
    reply = switched_off_reply(
        SOFTMAX_BY_HAND,
        "softmax_naive",
        lambda off: learner.request(
            STAGE, "call", function="softmax_naive", args=[scores], record=True, switched_off=off
        ),
    )
    right = agrees(reply["result"], reference.softmax_naive(scores))
    expect_work_recorded(reply["ops"], SOFTMAX_BY_HAND, right, "softmax_naive")


@check("structure.outputs", visible=True)
def test_output_shapes(learner):
    rng = generator("structure.outputs")
    # one token of 2 features, fewer than the worked example's 3: an axis of 1, or a number written for 3, shows;
    # 7 tokens of 4 features, more than the example's 6 and 3: a size written for the example shows
    for tokens, features, which in ((1, 2, "a single token"), (7, 4, "7 tokens, one more than the worked example's 6")):
        inputs, query = torch.rand(tokens, features, generator=rng), torch.rand(features, generator=rng)
        score, weights = torch.rand(tokens, generator=rng), torch.softmax(torch.rand(tokens, generator=rng), dim=0)
        results = {
            "attention_scores": (lambda: call(learner, STAGE, "attention_scores", inputs, query), (tokens,)),
            "softmax_naive": (lambda: call(learner, STAGE, "softmax_naive", score), (tokens,)),
            "context_vector": (lambda: call(learner, STAGE, "context_vector", inputs, weights), (features,)),
            "simple_self_attention": (
                lambda: call(learner, STAGE, "simple_self_attention", inputs),
                (tokens, features),
            ),
        }
        for name, (run, shape) in results.items():
            result = run()
            if not isinstance(result, torch.Tensor) or tuple(result.shape) != shape:
                got = tuple(result.shape) if isinstance(result, torch.Tensor) else type(result).__name__
                failed = CheckFailed(f"{name} with {which}: expected shape {shape}, got {got}", "wrong-shape")
                failed.called = name  # the shape probe tells why, from runs of this function alone
                raise failed


# A note: the book makes its scores with torch.empty(n), on the CPU whatever the inputs' device; what we know
# beyond the book costs nothing unless an instructor prices it (course.toml [notes]).
@check("note.fixed_device", visible=True)
def test_no_fixed_device(learner):
    expect_device_followed(learner, STAGE, _calls(generator("note.fixed_device")))


@check("note.fixed_dtype", visible=True)
def test_no_fixed_dtype(learner):
    """A note: float64 arguments give float64 results (the book's loops sum into a float32 torch.zeros)."""
    expect_dtype_followed(learner, STAGE, _calls(generator("note.fixed_dtype")))


@check("note.gradient", visible=True)
def test_gradients_flow(learner):
    """A note: each function's result stays in autograd, with the reference's gradients for its inputs (the book's
    loops fill torch.empty in place, which autograd follows); torch.tensor([...]) of the values, .item() or
    .detach() cut it off, so nothing before it could learn."""
    rng = generator("note.gradient")
    inputs, query = torch.rand(5, 3, generator=rng), torch.rand(3, generator=rng)
    calls = {
        "attention_scores": [inputs, query],
        "softmax_naive": [torch.randn(5, generator=rng)],
        "context_vector": [inputs, torch.softmax(torch.randn(5, generator=rng), 0)],
        "simple_self_attention": [inputs],
    }
    for function, args in calls.items():
        function_result, weighting, wanted = _reference_gradients(
            _MATHS[function], args, generator(f"note.gradient {function}")
        )
        reply = learner.request(STAGE, "input_gradients", function=function, args=args, weighting=weighting)
        named = f"{function}({', '.join(_ARG_NAMES[function])})"
        if not agrees(reply["result"], function_result):
            continue  # other values: the result checks say so, and its gradients would say nothing more
        if reply.get("detached"):
            raise CheckFailed(
                f"{named} returns a tensor outside autograd (requires_grad is False for inputs that require "
                "it): its values are rebuilt as new numbers (torch.tensor([...]), .item(), .detach(), "
                "torch.no_grad()), so a model built on it could not learn",
                "no-gradient",
            )
        if said := reply.get("backward_raised"):
            raise CheckFailed(f"{named} runs, and backward() from its result raises: {said}", "no-gradient")
        got = reply.get("gradients")
        if got is None:
            continue  # not a tensor of the documented shape: the result checks say so
        for name, mine, theirs in zip(_ARG_NAMES[function], got, wanted):
            # attention weights lie where they sum to 1, and maths that agrees there (a weighted mean) may have
            # another gradient off it: theirs must only reach them; any other argument's must be the maths'
            cut = mine is None or not mine.any() if name == "attn_weights" else mine is None or not agrees(mine, theirs)
            if theirs is not None and theirs.any() and cut:
                which = "none" if mine is None else "not the maths' one"
                raise CheckFailed(
                    f"{named}: the gradient reaching {name} is {which}: "
                    "part of the computation is outside autograd (a value copied as a number, torch.tensor([...]), "
                    ".item(), .detach(), torch.no_grad())",
                    "no-gradient",
                )


# Each function's maths, for the judge's own gradients: the release ships no solutions to take them from.
_MATHS = {
    "attention_scores": lambda inputs, query: inputs @ query,
    "softmax_naive": lambda x: torch.softmax(x, dim=0),
    "context_vector": lambda inputs, attn_weights: attn_weights @ inputs,
    "simple_self_attention": lambda inputs: torch.softmax(inputs @ inputs.T, dim=-1) @ inputs,
}
_ARG_NAMES = {
    "attention_scores": ["inputs", "query"],
    "softmax_naive": ["x"],
    "context_vector": ["inputs", "attn_weights"],
    "simple_self_attention": ["inputs"],
}


def _reference_gradients(function, args: list, rng: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, list]:
    """``function``'s result, a random weighting of it and each argument's gradient of the weighted sum (float64)."""
    wide = [a.to(torch.float64).requires_grad_(True) for a in args]
    result = function(*wide)
    weighting = torch.rand(result.shape, generator=rng, dtype=torch.float64)
    (result * weighting).sum().backward()
    return result.detach(), weighting, [a.grad for a in wide]
