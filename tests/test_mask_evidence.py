"""A causal mask that hides the wrong keys is named from what it does, NaN rows included, and drawn.

The most common slip of chapter 3 is a `torch.tril` buffer given to `masked_fill`: it hides the diagonal
and the past, so the last token has no key left and its row is NaN. The NaN row must neither stop the
grader from naming the mistake nor from drawing the learner's attention map.
"""

import pytest
import torch

from grader.judge.checks.attention_probe import describe_weights
from grader.judge.diagnosis import renormalize_variants, weight_variants
from grader.judge.verdict import proven_mistake
from tests.grading import grade, learner_copy

TRIL_BUFFER = {
    "file": "stage4_causal_attention.py",
    "find": 'self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))',
    "replace": 'self.register_buffer("mask", torch.tril(torch.ones(context_length, context_length)))',
}


def learners_weights(queries: torch.Tensor, keys: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
    """What a learner's masked_fill with the bool ``hidden`` mask, then the softmax, gives (NaN included)."""
    scores = (queries @ keys.transpose(-2, -1)).masked_fill(hidden, -torch.inf)
    return torch.softmax(scores / keys.shape[-1] ** 0.5, dim=-1)


@pytest.mark.parametrize(
    ("diagonal", "named"),
    [
        (0, "mask-wrong-triangle:the mask hides the past and the diagonal"),
        (1, "mask-wrong-triangle:the mask hides the past, the diagonal and the next token"),
        (-1, "mask-wrong-triangle:the mask hides the past"),
    ],
)
def test_a_tril_mask_given_to_masked_fill_is_named_from_its_nan_rows(diagonal, named):
    generator = torch.Generator().manual_seed(diagonal + 7)
    queries, keys = torch.randn(2, 5, 4, generator=generator), torch.randn(2, 5, 4, generator=generator)
    learner = learners_weights(queries, keys, torch.tril(torch.ones(5, 5, dtype=torch.bool), diagonal=diagonal))
    assert learner.isnan().any() == (diagonal >= 0)  # the last row hides every key
    right = learners_weights(queries, keys, torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1))
    assert proven_mistake(learner, right, weight_variants(queries, keys, causal=True)) == named


def test_row_sums_taken_without_keepdim_are_named_with_what_they_divide():
    weights = torch.softmax(torch.randn(4, 4, generator=torch.Generator().manual_seed(3)), dim=-1)
    masked = weights * torch.tril(torch.ones(4, 4))
    learner = masked / masked.sum(dim=-1)  # no keepdim=True: the (4,) sums line up with the keys
    right = masked / masked.sum(dim=-1, keepdim=True)
    named = proven_mistake(learner, right, renormalize_variants(weights))
    assert named is not None and named.startswith("mask-not-renormalized:") and "keepdim=True" in named


def test_a_nan_row_is_said_and_the_other_rows_are_still_described():
    scores = torch.randn(4, 4, generator=torch.Generator().manual_seed(5))
    weights = learners_weights(scores, torch.eye(4), torch.tril(torch.ones(4, 4, dtype=torch.bool)))
    described = describe_weights(weights, scores, causal=True)
    assert "row 3 not a number (NaN)" in described
    assert "attends to later tokens" in described and "scores divided by 2" in described


def test_the_tril_buffer_is_named_and_its_attention_drawn_with_the_nan_row_marked(tmp_path):
    _, report = grade(learner_copy(tmp_path / "submission", TRIL_BUFFER, stages=[4]), "--stage", "4")
    checks = {c["id"]: c for c in report["stages"][0]["checks"]}
    document = checks["document.CausalAttention"]
    assert document["hint"] == "mask-wrong-triangle" and "hides the past and the diagonal" in document["message"]
    evidence = document["evidence"]
    assert evidence is not None
    nan_rows = [i for i, row in enumerate(evidence["actual"]) if all(v is None for v in row)]
    assert nan_rows == [len(evidence["actual"]) - 1]  # the last token's row, drawn as not-a-number
    assert all(v is not None for row in evidence["expected"] for v in row)
    assert "NaN" in evidence["note"] and "attends to later tokens" in evidence["note"]
    # every failed check of what the class computes shows its map, not only those that draw one themselves
    of_the_class = ("document.CausalAttention", "example.CausalAttention", "random.CausalAttention", "property.causal")
    results = [checks[i] for i in (*of_the_class, "property.dropout")]
    assert all(c["status"] == "failed" and c["evidence"] == evidence for c in results), [c["id"] for c in results]
    # the functions the class does not use stay right: one mistake, one function's checks
    assert checks["document.causal_softmax"]["status"] == checks["random.mask_and_renormalize"]["status"] == "passed"


def test_a_causal_map_with_more_queries_than_keys_is_described_row_by_row():
    # is_causal's top-left corner: query i sees keys 0..i, and a query past the last key sees them all
    scores = torch.randn(7, 5, generator=torch.Generator().manual_seed(4))
    weights = torch.softmax(scores.masked_fill(~torch.ones(7, 5, dtype=torch.bool).tril(), float("-inf")), dim=-1)
    assert "attends only to itself and earlier tokens" in describe_weights(weights, None, causal=True)
    assert "attends to later tokens" in describe_weights(torch.softmax(scores, dim=-1), None, causal=True)
