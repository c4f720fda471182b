"""The dropout probe of the causal modules (stages 4, 5, 7 and 8): with x = I, W_query = W_key = 0 and
W_value = I a module returns its attention weights, so training mode shows where dropout acts and eval mode
shows that it does not. A visible check's: it ships in the student release, and holds no hidden input."""

import torch

from grader.judge.checks.support import CheckFailed, build
from grader.judge.verdict import agrees


def one_head_state(n: int, d_out: int, value: torch.Tensor) -> dict[str, torch.Tensor]:
    """The weights of a one-head multi-head module (stage 5's layout) for expect_dropout_on_weights:
    no queries or keys (all scores equal), ``value`` as W_value, out_proj passing the head through."""
    return {
        "W_query.weight": torch.zeros(d_out, n),
        "W_key.weight": torch.zeros(d_out, n),
        "W_value.weight": value,
        "out_proj.weight": torch.eye(d_out),
        "out_proj.bias": torch.zeros(d_out),
    }


def expect_dropout_on_weights(learner, stage: int, cls: str, args_for, state_for) -> None:
    """With x = I, W_query = W_key = 0 and W_value = I, a causal module returns dropout(its weights).

    Row i of the weights is 1/(i+1) on tokens 1..i+1; dropout(0.5) must zero about half of them
    and double the rest. With W_value summing the tokens instead, each output is a row sum of the
    dropped weights, which is exactly 0 or 2 only if dropout hit the outputs instead. Before any
    verdict, the probe's assumption is checked: in eval mode it reads exactly those weights.
    """
    n, p = 40, 0.5
    problem = _dropout_problem(learner, stage, cls, args_for, state_for, n, p)
    eye = torch.eye(n).expand(4, n, n).contiguous()
    evaluated = build(learner, stage, cls, args_for(n, n), state=state_for(n, n, torch.eye(n)), inputs=[eye])
    if problem is None:
        if _dropped_in_eval(evaluated["outputs"][0], n, p):
            raise CheckFailed(
                f"{cls} with dropout={p} in eval mode still drops attention weights and scales the rest "
                f"by 1/(1 - p): after .eval() it must give every weight",
                "dropout-in-eval",
            )
        if agrees(evaluated["outputs"][0], (1 - p) * _even_causal(n).expand(4, n, n)):  # the classic rule, twice
            raise CheckFailed(
                f"{cls} with dropout={p} in eval mode gives every weight times 1 - p = {1 - p}: nn.Dropout already "
                "scales the kept weights by 1/(1 - p) in training, so after .eval() the weights must come unchanged",
                "dropout-in-eval",
            )
        return
    if not agrees(evaluated["outputs"][0], _even_causal(n).expand(4, n, n)):
        raise CheckFailed(
            f"{cls}: the dropout check could not run. It reads the attention weights with "
            "W_query = W_key = 0, W_value = I and one-hot tokens, where eval mode should return 1/1, "
            "1/2, ... over each row's tokens so far, and it does not: the other checks' messages say "
            "what differs; fix that first"
        )
    raise problem


def _dropped_in_eval(output, n: int, p: float) -> bool:
    """Eval mode's reading of the weights (x = I, W_value = I) shows dropout at work: about ``p`` of them zero,
    the others exactly 1/(1 - p) times the right ones."""
    if not isinstance(output, torch.Tensor) or output.shape != (4, n, n):
        return False
    allowed = torch.ones(n, n, dtype=torch.bool).tril().expand(4, n, n)
    weights, right = output.double()[allowed], _even_causal(n).expand(4, n, n)[allowed]
    kept = weights != 0
    return abs(1 - kept.double().mean().item() - p) < 0.05 and torch.allclose(
        weights[kept], right[kept] / (1 - p), atol=1e-5
    )


def _even_causal(n: int) -> torch.Tensor:
    """(n, n) weights spread evenly over each row's tokens so far: 1/(i+1) on tokens 1..i+1."""
    return torch.tril(torch.ones(n, n, dtype=torch.float64)) / torch.arange(1, n + 1, dtype=torch.float64).view(n, 1)


def _dropout_before_weights(learner, stage: int, cls: str, args_for, state_for, n: int) -> bool:
    """Whether training mode gives other weights than eval mode once the scores differ (random W_query and
    W_key, x = I, W_value = I), none of them dropped: dropout acted on the inputs, queries, keys or scores,
    which equal scores (the main probe's) hide, since dropping a zero score changes nothing."""
    rng = torch.Generator().manual_seed(n)
    state = {
        name: torch.randn(weight.shape, generator=rng) if name in ("W_query.weight", "W_key.weight") else weight
        for name, weight in state_for(n, n, torch.eye(n)).items()
    }
    eye = torch.eye(n).expand(4, n, n).contiguous()
    trained, evaluated = (
        build(learner, stage, cls, args_for(n, n), state=state, inputs=[eye], train=train)["outputs"][0]
        for train in (True, False)
    )
    if not all(isinstance(t, torch.Tensor) and t.shape == (4, n, n) for t in (trained, evaluated)):
        return False
    allowed = torch.ones(n, n, dtype=torch.bool).tril().expand(4, n, n)
    return bool((trained.double()[allowed] != 0).all()) and not agrees(trained, evaluated)


def _dropout_problem(learner, stage: int, cls: str, args_for, state_for, n: int, p: float) -> CheckFailed | None:
    """What training mode shows wrong about dropout, read with the probe of expect_dropout_on_weights."""
    eye = torch.eye(n).expand(4, n, n).contiguous()
    allowed = torch.ones(n, n, dtype=torch.bool).tril().expand(4, n, n)
    even = _even_causal(n).expand(4, n, n)
    weights = build(learner, stage, cls, args_for(n, n), state=state_for(n, n, torch.eye(n)), inputs=[eye], train=True)
    revealed = weights["outputs"][0]
    if not isinstance(revealed, torch.Tensor) or revealed.shape != (4, n, n):
        return CheckFailed(
            f"{cls}: expected an output of shape (4, {n}, {n}) from 4 batches of {n} tokens", "wrong-shape"
        )
    if revealed.triu(diagonal=1).abs().max() > 0:
        return CheckFailed(f"{cls} in training mode attends to later tokens", "mask-not-causal")
    kept = revealed.double()[allowed] != 0
    dropped = 1 - kept.double().mean().item()
    if dropped < 0.01:
        changed = not agrees(revealed, even) or _dropout_before_weights(learner, stage, cls, args_for, state_for, n)
        return CheckFailed(
            f"{cls} with dropout={p} in training mode dropped no attention weight"
            + (
                ": dropout acted before the weights were made (a dropped score still gets a weight)"
                if changed
                else ", and gave what eval mode gives: apply self.dropout to the attention weights"
            ),
            "dropout-wrong-place" if changed else "dropout-not-applied",
        )
    kept_map = revealed.double() != 0
    # Dropping a value zeroes its column of weights in every row at once; dropping weights does not.
    if bool(((kept_map == kept_map[:, -1:, :]) | ~allowed).all()):
        return CheckFailed(
            f"{cls}: dropout zeroed whole columns of the attention weights, the same tokens for every "
            "query: it hit the values, not the attention weights",
            "dropout-wrong-place",
        )
    twice = 1 - (1 - p) ** 2  # each weight kept by two dropouts in a row, and scaled by both
    if abs(dropped - twice) <= 0.05 and torch.allclose(
        revealed.double()[allowed][kept], (even[allowed] / (1 - p) ** 2)[kept], atol=1e-5
    ):
        return CheckFailed(
            f"{cls} with dropout={p} dropped {dropped:.1%} of the attention weights, about 1 - (1 - p)² = "
            f"{twice:.0%}, and scaled those it kept by 1/(1 - p)² = {1 / (1 - p) ** 2:g}: the weights went through "
            "dropout twice",
            "dropout-twice",
        )
    if abs(dropped - p) > 0.05:
        return CheckFailed(
            f"{cls} with dropout={p} dropped {dropped:.1%} of the attention weights, expected about {p:.0%}"
        )
    scaled = (even[allowed] / (1 - p))[kept]
    if not torch.allclose(revealed.double()[allowed][kept], scaled, atol=1e-5):
        return CheckFailed(
            f"{cls}: kept attention weights should be scaled by 1/(1 - p) = {1 / (1 - p):g}", "dropout-not-rescaled"
        )
    sums = build(
        learner, stage, cls, args_for(n, 1), state=state_for(n, 1, torch.ones(1, n)), inputs=[eye], train=True
    )["outputs"][0]
    rows = sums[:, 3:, 0].double()  # rows with several weights: their sum is rarely exactly 0 or 2
    if bool(((rows == 0) | ((rows - 2).abs() < 1e-6)).all()):
        return CheckFailed(f"{cls}: dropout hit the context vectors, not the attention weights", "dropout-wrong-place")
    first, second = build(
        learner, stage, cls, args_for(n, n), state=state_for(n, n, torch.eye(n)), inputs=[eye, eye], train=True
    )["outputs"]
    if isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor) and torch.equal(first, second):
        return CheckFailed(
            f"{cls} in training mode dropped the very same attention weights on two calls in a row: forward "
            "reseeds the random generator (torch.manual_seed), so dropout draws one mask for ever",
            "seed-in-module",
        )
    return None
