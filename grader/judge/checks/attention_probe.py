"""Read a learner module's attention weights, with the probe's assumptions checked first.

With n one-hot tokens (x = I) and a value projection that routes token s to feature s of every
head, a module that computes weights @ values returns its own attention weights. That holds only
if the value path is what the probe assumes, so before reading, the probe checks it: doubling the
value weights doubles the output (no bias, nothing after the values but linear maps), permuting
them permutes the output the same way (weights @ values, per head), and with all scores equal
the weights read as an even spread. When a check fails, the reading is not made: the probe says
nothing rather than something untrue.
"""

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import torch

from grader.judge.checks.support import CheckFailed, LearnerFailure, build, expect_close
from grader.judge.diagnosis import attention_weights, weight_variants
from grader.judge.verdict import attention_evidence

# state_for(value_weight, query_weight, key_weight) -> the state to inject, for weights shaped
# like nn.Linear's (d_out, d_in).
StateFor = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], dict]


def _linear_state(v: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> dict:
    return {"W_query.weight": q, "W_key.weight": k, "W_value.weight": v}


def _multihead_state(v: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> dict:
    """Stage 5's layout (and stage 8's, whose keys and values may have fewer heads), out_proj passing the heads
    through."""
    return {**_linear_state(v, q, k), "out_proj.weight": torch.eye(len(q)), "out_proj.bias": torch.zeros(len(q))}


def _wrapper_state(v: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> dict:
    """The wrapper's heads, each a CausalAttention with its (n, n) block of each weight."""
    n = v.shape[1]
    return {
        f"heads.{h}.{name}.weight": weight[h * n : (h + 1) * n]
        for h in range(len(q) // n)
        for name, weight in (("W_query", q), ("W_key", k), ("W_value", v))
    }


@dataclass(frozen=True)
class Probe:
    """How to build a module class for the probe: n tokens, ``heads`` heads of size n each."""

    args: Callable[[int, int], list]
    state_for: StateFor
    causal: bool
    batch: bool  # takes (b, n, d_in) rather than (n, d_in)
    heads: int = 1  # how many heads a map is read with, for a failed check's evidence
    groups: Callable[[int], int] = lambda heads: heads  # key/value heads for that many query heads
    # For a module documented to keep (d_in, d_out) matrices: the state in nn.Linear's layout, (d_out, d_in).
    # A module whose weights read only this way computes x @ W.T: it keeps its weights transposed.
    transposed_state: StateFor | None = None


PROBES = {
    "SelfAttention_v1": Probe(
        lambda n, h: [n, n],
        lambda v, q, k: {"W_query": q.T, "W_key": k.T, "W_value": v.T},
        causal=False,
        batch=False,
        transposed_state=lambda v, q, k: {"W_query": q, "W_key": k, "W_value": v},
    ),
    "SelfAttention_v2": Probe(lambda n, h: [n, n], _linear_state, causal=False, batch=False),
    "CausalAttention": Probe(lambda n, h: [n, n, n, 0.0], _linear_state, causal=True, batch=True),
    "MultiHeadAttentionWrapper": Probe(
        lambda n, h: [n, n, n, 0.0, h], _wrapper_state, causal=True, batch=True, heads=2
    ),
    "MultiHeadAttention": Probe(lambda n, h: [n, h * n, n, 0.0, h], _multihead_state, causal=True, batch=True, heads=2),
    # Four query heads in two groups: head h shares the keys and values of group h // 2, which tells the
    # grouping of repeat_interleave from that of repeat.
    "GroupedQueryAttention": Probe(
        lambda n, h: [n, h * n, n, 0.0, h, h // 2],
        _multihead_state,
        causal=True,
        batch=True,
        heads=4,
        groups=lambda heads: heads // 2,
    ),
}
PROBES["MultiHeadAttentionKV"] = PROBES["MultiHeadAttention"]  # its forward without the cache is stage 5's


def _route(n: int, heads: int, order: torch.Tensor) -> torch.Tensor:
    """A (heads * n, n) value weight: feature (h, s) of every head carries token order[s]."""
    return torch.eye(n)[order].repeat(heads, 1)


def read_attention(
    learner,
    stage: int,
    cls: str,
    args: list,
    state_for: StateFor,
    n: int,
    heads: int,
    w_query: torch.Tensor,
    w_key: torch.Tensor,
    batch: bool,
    expected: torch.Tensor | None = None,
) -> "Reading":
    """The module's attention weights (heads, n, n) for queries x W_query^T and keys x W_key^T, x = I,
    and its output they are read from. ``w_key`` holds one (n, n) block per key/value head, which the
    value projection follows.

    The weights are None when an assumption of the probe does not hold (see the module's docstring). What
    the learner's code raises on the probe's inputs is raised. An output that is exactly ``expected``
    is taken as the weights without the checks: it proves nothing wrong, so no claim rests on it.
    """
    eye = torch.eye(n)
    x = eye[None] if batch else eye
    identity, shuffled = torch.arange(n), torch.roll(torch.arange(n), 1)
    groups = len(w_key) // n

    def run(value_weight: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor | None:
        out = build(learner, stage, cls, args, state=state_for(value_weight, q, k), inputs=[x])["outputs"][0]
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != (*x.shape[:-1], heads * n):
            return None
        return out.detach().to(torch.float64).reshape(n, heads, n).transpose(0, 1)  # (heads, n, n)

    read = run(_route(n, groups, identity), w_query, w_key)
    if read is not None and expected is not None and torch.allclose(read, expected, atol=1e-5):
        return Reading(read, read)  # exactly a right module's weights: nothing to claim, so nothing to verify
    doubled = run(2 * _route(n, groups, identity), w_query, w_key)
    permuted = run(_route(n, groups, shuffled), w_query, w_key)
    even = run(_route(n, groups, identity), torch.zeros_like(w_query), torch.zeros_like(w_key))
    if any(r is None for r in (read, doubled, permuted, even)) or cast(torch.Tensor, read).isnan().all():
        return Reading(read, None)
    assert (  # every run returned a tensor (checked just above)
        isinstance(read, torch.Tensor)
        and isinstance(doubled, torch.Tensor)
        and isinstance(permuted, torch.Tensor)
        and isinstance(even, torch.Tensor)
    )
    # A row that hides every key is NaN, in each run alike: the reading keeps it, for the map to show.
    if not _same(doubled, 2 * read) or not _same(permuted, read[..., shuffled]):
        return Reading(read, None)
    return Reading(read, read if _spread_evenly(even) else None)


@dataclass(frozen=True)
class Reading:
    """What the probe saw of a module: ``output``, its output (heads, n, n) on x = I with W_value routing
    token s to feature s of every head (None where the output has another size), which for a module that
    computes weights @ values is its weights; ``weights``, the same once the probe's assumptions held."""

    output: torch.Tensor | None
    weights: torch.Tensor | None


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.allclose(a, b, atol=1e-5, equal_nan=True)


def _spread_evenly(weights: torch.Tensor) -> bool:
    """Each (..., n) row, with all scores equal, gives the keys it keeps one equal weight (NaN where it keeps
    none): what a softmax does, over whichever keys a mask leaves. The weight need not be 1 / kept: weights
    scaled after the softmax are still weights, and their map shows the rows' wrong sums."""
    for row in weights.reshape(-1, weights.shape[-1]):
        if row.isnan().all():
            continue
        kept = row[row.abs() > 1e-6]
        if row.isnan().any() or len(kept) == 0 or not _same(kept, torch.full_like(kept, float(kept[0]))):
            return False
    return True


@dataclass(frozen=True)
class Measured:
    """A module's reading for random query and key weights (queries ``q``, keys ``k``, one (n, n) each a head),
    the weights a right module gives, and whether they were read only from weights in nn.Linear's layout."""

    reading: Reading
    expected: torch.Tensor
    q: torch.Tensor
    k: torch.Tensor
    transposed: bool = False


def _measure(learner, stage: int, cls: str, n: int, heads: int, rng: torch.Generator) -> Measured:
    probe = PROBES[cls]
    groups = probe.groups(heads)
    w_query, w_key = torch.randn(heads * n, n, generator=rng), torch.randn(groups * n, n, generator=rng)
    # x = I: head h's queries are rows h*n..(h+1)*n of W_query, transposed; the same for the keys of its group
    q = w_query.view(heads, n, n).transpose(-2, -1)
    k = w_key.view(groups, n, n).transpose(-2, -1).repeat_interleave(heads // groups, dim=0)
    expected = attention_weights(q, k, divisor=n**0.5, causal=probe.causal).double()

    def read(state_for: StateFor) -> Reading:
        return read_attention(
            learner, stage, cls, probe.args(n, heads), state_for, n, heads, w_query, w_key, probe.batch, expected
        )

    documented = read(probe.state_for)
    if documented.weights is None and probe.transposed_state is not None:
        transposed = read(probe.transposed_state)
        if transposed.weights is not None:
            return Measured(transposed, expected, q, k, transposed=True)
    return Measured(documented, expected, q, k)


def computes_transposed(learner, stage: int, cls: str) -> bool:
    """``cls`` runs on square weights and computes x @ W.T there: what it documents as (d_in, d_out) it uses as
    (d_out, d_in)."""
    return _measure(learner, stage, cls, n=4, heads=1, rng=torch.Generator().manual_seed(0)).transposed


TRANSPOSED = (
    "it computes x @ W.T, as with weights in nn.Linear's layout (d_out, d_in), where it documents (d_in, d_out)"
)


def _evidence(cls: str, n: int, measured: Measured) -> dict | None:
    """The heat map of what ``measured`` read, in the first head that differs (head 1 where none does): the
    weights, else the output they would be read from; None where the output has another size."""
    expected, read, output = measured.expected, measured.reading.weights, measured.reading.output
    shown = read if read is not None else output
    if shown is None:
        return None
    h = next((h for h in range(len(expected)) if not _same(shown[h], expected[h])), 0)
    scores, causal = measured.q[h] @ measured.k[h].T, PROBES[cls].causal
    head = f" of head {h + 1}" if len(expected) > 1 else ""
    if read is None:
        return attention_evidence(
            f"{cls}: output{head} on {n} one-hot tokens with W_value = I (rows: queries; for a right module, its "
            "attention weights)",
            expected[h],
            cast(torch.Tensor, output)[h],  # shown, which is not None
            "its attention weights could not be read apart from what it does to the values (see the message), "
            "so this is its output itself: with these inputs a module that computes weights @ values returns "
            "its weights",
        )
    right = torch.allclose(read, expected, atol=1e-4)
    if measured.transposed:
        note = f"read with each weight transposed, since {TRANSPOSED}"
        note += "" if right else f"; yours: {describe_weights(read[h], scores, causal)}"
    elif right:
        after = "the values, how the heads are put together, or out_proj" if len(read) > 1 else "the values"
        note = f"your attention weights are the expected ones (in every head): what differs comes after them: {after}"
    else:
        yours, wanted = describe_weights(read[h], scores, causal), describe_weights(expected[h], scores, causal)
        note = f"yours: {yours}. Expected: {wanted}"
    evidence = attention_evidence(
        f"{cls}: attention weights{head} on {n} one-hot tokens (rows: queries, columns: keys)",
        expected[h],
        read[h],
        note,
    )
    # right weights show no mistake of the weights (conftest's picture); weights read on later tokens prove a mask
    # that does not hide them, where the map is read straight from one head (conftest's READ_STRAIGHT)
    attends_later = causal and bool(read[h].triu(diagonal=1).abs().max() > 1e-6)
    return {**evidence, "matches": right, "attends_later": attends_later}


def expect_attention(learner, stage: int, cls: str, n: int, heads: int, rng: torch.Generator) -> None:
    """The module's measured attention weights must be the expected ones; a proven mistake is named."""
    measured = _measure(learner, stage, cls, n, heads, rng)
    read, expected, q, k = measured.reading.weights, measured.expected, measured.q, measured.k
    what = f"{cls} on {n} one-hot tokens with W_value = I"
    if read is None:
        raise CheckFailed(
            f"{what}: its attention weights could not be read from its output. Reading them needs doubling "
            "W_value to double the output, permuting W_value to permute it the same way, and equal scores to "
            "spread the weights evenly, and one of these did not hold (a bias in the projections, or something "
            "done to the values, breaks them): the other checks' messages say what differs",
            evidence=_evidence(cls, n, measured),
        )
    if measured.transposed:
        # weights held in the documented (d_in, d_out) shape and multiplied as x @ W.T, or held as (d_out, d_in)
        held = dict(build(learner, stage, cls, [4, 3])["structure"]["parameters"])
        hint = "weights-transposed-in-forward" if held.get("W_query") == [4, 3] else "weights-layout"
        raise CheckFailed(f"{what}: {TRANSPOSED}", hint, _evidence(cls, n, measured))
    try:
        expect_close(
            read if heads > 1 else read[0],
            expected if heads > 1 else expected[0],
            f"{what}: its attention weights" + (" (heads, queries, keys)" if heads > 1 else ""),
            lambda: {
                name: v if heads > 1 else v[0] for name, v in weight_variants(q, k, causal=PROBES[cls].causal).items()
            },
        )
    except CheckFailed as failed:
        raise CheckFailed(failed.message, failed.hint, _evidence(cls, n, measured)) from None


def evidence_for(
    learner,
    stage: int,
    cls: str,
    n: int = 5,
    heads: int = 1,
    rng: torch.Generator | None = None,
    right_too: bool = False,
) -> dict | None:
    """Heat-map evidence for a failed check: the learner's attention on a probe next to the expected one.

    None when the weights cannot be read, or are right (the mistake lies elsewhere: a map would not show it),
    unless ``right_too``: then right weights are shown as such, saying that what differs comes after them.
    """
    rng = rng or torch.Generator().manual_seed(n * 100 + heads)
    try:
        measured = _measure(learner, stage, cls, n, heads, rng)
    except (LearnerFailure, CheckFailed):  # evidence is extra: what keeps it from being read stays unsaid
        return None
    read = measured.reading.weights
    if (
        read is not None
        and torch.allclose(read, measured.expected, atol=1e-4)
        and not (right_too or measured.transposed)
    ):
        return None
    return _evidence(cls, n, measured)


def effective_divisor(weights: torch.Tensor, scores: torch.Tensor) -> float | None:
    """The number the scores were divided by, if ``weights`` are a softmax of scores / that number.

    For a softmax, log w[t, s] - log w[t, s'] = (scores[t, s] - scores[t, s']) / divisor within a
    row, over the positions it attends to; a least-squares fit over every such pair.
    """
    keep = weights > 1e-9
    num, den = 0.0, 0.0
    for row_w, row_s, row_keep in zip(weights.double(), scores.double(), keep):
        if row_keep.sum() < 2:
            continue
        log_w, s = row_w[row_keep].log(), row_s[row_keep]
        d_log, d_s = log_w - log_w.mean(), s - s.mean()
        num, den = num + float((d_s * d_s).sum()), den + float((d_s * d_log).sum())
    if den <= 0 or num == 0:
        return None
    divisor = num / den
    fitted = torch.softmax(scores.double().masked_fill(~keep, float("-inf")) / divisor, dim=-1)
    return divisor if torch.allclose(fitted.nan_to_num(), weights.double(), atol=1e-4) else None


def _all_one(sums: torch.Tensor) -> bool:
    return torch.allclose(sums, torch.ones_like(sums), atol=1e-4)


def describe_weights(weights: torch.Tensor, scores: torch.Tensor | None, causal: bool = True) -> str:
    """What a (n, n) attention map shows, in plain words: row sums, what a causal map attends to, and
    the divisor of the ``scores`` when the weights are a softmax of them divided by one number."""
    n = weights.shape[-1]
    sums = weights.sum(dim=-1)
    parts = [f"row sums {', '.join(f'{s:.2f}' for s in sums.tolist())}"]
    columns = weights.sum(dim=0)
    if weights.shape[0] > 1 and not weights.isnan().any() and _all_one(columns) and not _all_one(sums):
        parts.append(
            "each column sums to 1, not each row: it was normalised over the queries (dim=0) instead of over "
            "the keys (dim=-1)"
        )
    if nan := [i for i, row in enumerate(weights) if row.isnan().all()]:
        parts.append(f"row{'s' if len(nan) > 1 else ''} {', '.join(map(str, nan))} not a number (NaN)")
    # What follows is said of the rows that are numbers.
    finite = ~weights.isnan().any(dim=-1)
    rows, weights, sums = finite.nonzero().flatten(), weights[finite], sums[finite]
    scores = None if scores is None else scores[finite]
    if causal and len(rows):
        later = bool((weights * (torch.arange(n) > rows.view(-1, 1))).abs().max() > 1e-6)
        square = rows < n  # a query past the last key (L > S, is_causal's top-left corner) has no key of its own
        itself = bool((weights[torch.arange(len(rows))[square], rows[square]] != 0).all())
        parts.append(
            "attends to later tokens"
            if later
            else "attends only to itself and earlier tokens"
            if itself
            else "not every token attends to itself"
        )
    if scores is not None and len(weights):
        divisor = effective_divisor(weights, scores) if _all_one(sums) else None
        parts.append(
            f"the softmax of the scores divided by {divisor:.3g}"
            if divisor is not None
            else "no softmax of the expected scores gives these weights, whatever the scores are divided by"
        )
    return "; ".join(parts)


def measured_evidence(learner, stage: int, cls: str) -> dict | None:
    """The heat-map evidence of ``cls``'s measured attention, for a failed check of what it computes (right
    weights too, said to be right); None where ``cls`` is no module the probe reads, or its map cannot be read."""
    return evidence_for(learner, stage, cls, heads=PROBES[cls].heads, right_too=True) if cls in PROBES else None


@contextlib.contextmanager
def showing_attention(learner, stage: int, cls: str, heads: int = 1):
    """A check failing inside gets the heat-map evidence of ``cls``'s measured attention, if readable."""
    try:
        yield
    except CheckFailed as failed:
        if failed.evidence is None:
            failed.evidence = evidence_for(learner, stage, cls, heads=heads)
        raise
