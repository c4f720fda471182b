"""The shape probe's rules: which runs that succeed prove which cause, and what each proven cause says.

Kept apart from shape_probe.py, which runs the probe: these are data, one rule per line, read first-match-wins.
"""

from grader.judge.checks.probe_sizes import (
    BATCH_ADDED,
    BATCHED_RUN,
    DOUBLED_RUN,
    EXAMPLE,
    EXAMPLE_RUN,
    EXAMPLE_TOKENS,
    FEWER_FEATURES,
    FULL_MASK_RUN,
    MORE_TOKENS,
    NO_LEADING_RUN,
    ONE_FEATURE,
    ONE_LEADING_RUN,
    SINGLE_TOKEN,
    SQUARE_HEADS,
    SQUARE_INPUTS,
    SQUARE_MATRIX_RUN,
    TOKENS_AS_OUTPUTS,
    VALUE_WIDTH_RUN,
    Call,
)

# hint -> (the runs that must succeed, the runs that may succeed too): named only where the runs that
# succeed are the required ones and no others but those allowed. First match wins. The worked example's
# sizes (and the same doubled) make several sizes equal at once, so they may run beside any single change
# that explains the rest; a number written in the code is proven only where the doubled sizes do not run.
WORKED = frozenset({EXAMPLE_RUN, DOUBLED_RUN})
RULES: list[tuple[str, frozenset[str], frozenset[str]]] = [
    ("mask-not-truncated", frozenset({"tokens = context_length"}), WORKED),
    ("d-in-for-d-out", frozenset({"d_in = d_out"}), frozenset({"d_in a multiple of num_heads"}) | WORKED),
    # a divisibility test of d_in instead of d_out: any multiple of num_heads, or one head, passes it
    ("d-in-for-d-out", frozenset({"d_in = d_out", "d_in a multiple of num_heads", "one head"}), WORKED),
    # num_kv_groups where num_heads // num_kv_groups belongs: a repeat count fits where the two agree; a head
    # index divided by it (arange(num_heads) // num_kv_groups) fits there, and where every group is one head
    (
        "kv-repeat-count",
        frozenset({"num_heads = num_kv_groups²"}),
        frozenset({"one head", "as many key/value groups as heads"}),
    ),
    ("kv-heads-count", frozenset({"as many key/value groups as heads"}), frozenset({"one head"})),
    ("heads-width-wrong", frozenset({"one head"}), WORKED | {ONE_FEATURE, SQUARE_HEADS}),
    ("heads-width-wrong", frozenset({ONE_FEATURE}), WORKED | {SQUARE_HEADS}),
    # a transpose missing after the split, or on other axes: only a (b, heads, tokens, head_dim) of equal axes runs
    ("heads-split-wrong", frozenset({SQUARE_HEADS}), frozenset({"one head"})),
    ("batch-fixed", frozenset({"a batch of one"}), WORKED),
    ("batch-required", frozenset({BATCH_ADDED}), frozenset()),
    ("tokens-for-features", frozenset({SQUARE_INPUTS}), WORKED),
    ("tokens-for-features", frozenset({TOKENS_AS_OUTPUTS}), WORKED),
    ("sizes-hard-coded", frozenset({EXAMPLE_RUN}), frozenset()),
    # a function: any run that takes the worked example's tokens or features, and only those
    (
        "sizes-hard-coded",
        frozenset({"6 tokens, as in the worked example"}),
        frozenset({EXAMPLE_RUN, "3 features, as in the worked example"}),
    ),
    ("sizes-hard-coded", frozenset({"3 features, as in the worked example"}), frozenset({EXAMPLE_RUN})),
    # a mask indexed as (L, S) runs on query matrices alone too; anything else that runs only there counts the
    # inputs' dimensions from the start
    (
        "mask-leading-dims",
        frozenset({"a mask without leading dimensions, (L, S)"}),
        frozenset({"no mask", NO_LEADING_RUN, SQUARE_MATRIX_RUN, FULL_MASK_RUN, ONE_LEADING_RUN}),
    ),
    # a mask indexed (scores[~mask] = ...) where it should broadcast: it runs where the mask has the scores' shape
    (
        "mask-leading-dims",
        frozenset({FULL_MASK_RUN}),
        frozenset({"no mask", NO_LEADING_RUN, SQUARE_MATRIX_RUN, ONE_LEADING_RUN}),
    ),
    # the query and key lengths paired (an L x L mask, a (..., L) flag without keepdim): only L == S runs, and a
    # call without a mask where the pairing is the mask's (a flag of fully masked rows)
    ("queries-for-keys", frozenset({"as many queries as keys"}), WORKED | {SQUARE_MATRIX_RUN, "no mask"}),
    ("queries-for-keys", frozenset({SQUARE_MATRIX_RUN}), WORKED | {"no mask"}),
    # an output shaped from the queries (out.view(query.shape)): it runs where the values are as wide
    ("value-width", frozenset({VALUE_WIDTH_RUN}), frozenset()),
    (
        "leading-dims",
        frozenset({NO_LEADING_RUN}),
        frozenset(
            {"a mask without leading dimensions, (L, S)", "no mask", "as many queries as keys", SQUARE_MATRIX_RUN}
        )
        | {ONE_LEADING_RUN},
    ),
    # something that takes exactly three dimensions (torch.bmm, a 3-D view): only a stack of matrices runs
    ("leading-dims", frozenset({ONE_LEADING_RUN}), frozenset()),
    # stage 4's functions: the first dimension read as a batch (scores[0]), so the documented (n, n) fails
    ("leading-dims", frozenset({BATCHED_RUN}), WORKED),
]
# What each named cause says, after the runs: the claim they prove.
CLAIMS = {
    "mask-not-truncated": "It runs only when the input is as long as context_length: the mask is not cut to "
    "the input's num_tokens.",
    "d-in-for-d-out": "What runs needs d_in to be what d_out should be (equal to it, or a multiple of num_heads): "
    "somewhere d_in stands where d_out belongs (a view, a reshape, a divisibility test or a layer's size).",
    "kv-repeat-count": "It runs only where num_kv_groups == num_heads // num_kv_groups: each group must serve "
    "num_heads // num_kv_groups query heads, so repeat the keys and values that many times.",
    "kv-heads-count": "It runs only where num_kv_groups == num_heads: the keys and values, num_kv_groups heads, "
    "are used as num_heads heads.",
    "heads-width-wrong": "It runs with one head, not with several: the heads are split or merged with the "
    "wrong width or axis.",
    "wrapper-head-size": "It gives the documented width with one head, not with several: each head must "
    "return d_out features, num_heads * d_out in all.",
    "wrapper-concat-dim": "It gives the documented width with one head, not with several, and each head holds "
    "d_out features as documented: their outputs are combined otherwise than concatenated along the last "
    "dimension (summed, averaged, or joined along another axis), where num_heads * d_out features belong.",
    "batch-fixed": "It runs only on a batch of one: a batch size is fixed (or squeezed away) somewhere.",
    "batch-required": "It runs only on a batch, (b, num_tokens, d_in), not on the documented single sequence "
    "(num_tokens, d_in): the code unpacks or indexes x as if it always had a batch dimension.",
    "sizes-hard-coded": "It runs on the worked example's sizes and not on the same sizes doubled, which relate "
    "to one another as the example's do: a size is written as a number instead of being read from the input or "
    "the constructor's arguments.",
    "returns-tuple": "It returns a tuple where one tensor is documented.",
    "returns-none": "Every run returned None, whatever the sizes: the function computes its result but never returns "
    "it (a missing return statement, or print where return belongs).",
    "kv-projection-size": "It runs only where num_kv_groups == num_heads // num_kv_groups, and W_key gives other than "
    "num_kv_groups * head_dim features: the keys and values are projected to the wrong width.",
    "leading-dims": "It runs on (L, E) matrices alone, not with leading dimensions in front: a dimension is "
    "counted from the start (dim 1, size(0)) where it should be counted from the end.",
    "queries-for-keys": "It runs only where the queries are as many as the keys (L == S): something pairs the "
    "query length with the key length (a mask built L x L, a per-row flag of shape (..., L) without keepdim=True "
    "against (..., L, S) scores).",
    "mask-leading-dims": "It runs with a mask of shape (L, S), not with one whose leading dimensions broadcast over "
    "the batch and heads: the mask is reshaped or indexed as if it had two dimensions.",
    "value-width": "It runs only where the values are as wide as the queries (Ev = E): the output is (..., L, Ev), "
    "value's width, and something shapes it from the queries instead.",
    "heads-split-wrong": "It runs only where num_tokens, num_heads and head_dim are equal, where (b, num_heads, "
    "num_tokens, head_dim) keeps its shape with any two of its last three axes swapped: a transpose after the "
    "split into heads is missing, or swaps other axes (the keys' is transpose(2, 3), their last two).",
    "tokens-for-features": "It runs only where num_tokens == d_in: somewhere the token axis meets the feature "
    "axis (weights of the tokens broadcast along the features, a product with inputs where inputs.T belongs).",
    "kv-expanded": "It runs only where num_kv_groups == num_heads (or 1): .expand() repeats only an axis of size 1, "
    "and the keys' heads axis holds num_kv_groups groups.",
    "weights-transposed-in-forward": "It runs only when d_in == d_out, and there it computes x @ W.T: weights "
    "documented as (d_in, d_out) are used as if they were nn.Linear's (d_out, d_in).",
    "input-length-refused": "It runs only when the input is as long as context_length, and what stops the others is "
    "a check of your own: inputs may be shorter than context_length.",
}
# What a rule's runs prove where a raise or assert of the learner's own stops those that fail: its check asks
# for what the rule's claim says (d_in where d_out belongs, the example's numbers, a batch of one) or, for an
# input as long as context_length, refuses shorter ones. A cause in a view or a mask is then unproven.
OWN_CHECK_CAUSES = {
    "mask-not-truncated": "input-length-refused",
    "d-in-for-d-out": "d-in-for-d-out",
    "sizes-hard-coded": "sizes-hard-coded",
    "batch-fixed": "batch-fixed",
    "mask-leading-dims": "mask-leading-dims",
    "leading-dims": "leading-dims",
}
OWN_CHECK_CLAIM = (
    "It runs only with {runs}, and what stops the other runs is a check of your own (a raise or an assert): it "
    "refuses sizes the docstring allows."
)
# What a rule's runs prove where they say more than its hint's CLAIMS: (hint, the runs it needs) -> the claim.
RULE_CLAIMS = {
    ("heads-width-wrong", frozenset({ONE_FEATURE})): "It runs only where each head has one feature (d_out = "
    "num_heads, as in the worked example's 2 heads of d_out 2): num_heads stands where head_dim belongs, or the "
    "other way round, in a view or reshape that splits or merges the heads.",
    ("leading-dims", frozenset({BATCHED_RUN})): "It runs on a batch of matrices, (B, n, n), and not on the documented "
    "(n, n) matrix: something takes the first dimension as the batch (scores[0], ones_like(scores[0])) where "
    "the weights may have none; count from the end (the last two dimensions are the matrix).",
    ("tokens-for-features", frozenset({TOKENS_AS_OUTPUTS})): "It runs only where num_tokens == d_out: a product "
    "pairs the token axis of the queries, keys or values with their feature axis (queries.T @ keys, a (d_out, "
    "d_out) matrix, where queries @ keys.T compares every token with every other).",
    ("leading-dims", frozenset({ONE_LEADING_RUN})): "It runs on a stack of matrices, (H, L, E), and not with two "
    "leading dimensions or none: something takes exactly three dimensions (torch.bmm, a 3-D view or index) where "
    "matmul (@) and dimensions counted from the end take any number.",
    ("kv-repeat-count", frozenset({"as many key/value groups as heads"})): "It runs only where num_kv_groups == "
    "num_heads, where no group is shared: the keys and values reach the query heads without the right repeat "
    "(num_heads // num_kv_groups times along the heads axis, dim=1).",
    ("heads-width-wrong", frozenset({"as many key/value groups as heads"})): "It runs only where num_kv_groups == "
    "num_heads, and what stops it is the merge of the heads: a view to the keys' width, num_kv_groups * head_dim, "
    "where d_out belongs.",
    ("queries-for-keys", frozenset({SQUARE_MATRIX_RUN})): "It runs only on matrices alone with as many queries "
    "as keys, (L, E) with L == S: a per-row tensor of shape (..., L) (a reduction over the keys without "
    "keepdim=True, such as .all(dim=-1) or .sum(dim=-1)) meets the (..., L, S) scores, where broadcasting lines "
    "its L up with S, and its leading dimensions with the rows; keep it (..., L, 1).",
    ("mask-leading-dims", frozenset({FULL_MASK_RUN})): "It runs with a mask of the scores' own shape, not with "
    "one whose leading dimensions (or their absence) broadcast to it: the mask is indexed (scores[~mask] = ...) "
    "or reshaped where it should broadcast, as masked_fill and + do.",
}
# What torch's own error proves where every run of a module that splits heads fails at a product whose input is
# (batch, num_tokens * d_out): the heads were merged over the token axis as well.
TOKENS_FOLDED_CLAIM = (
    "Every run fails at a matrix product given (batch, num_tokens * d_out) inputs, whatever the sizes: the merge "
    "of the heads folds the tokens into the features too (flatten(1), view(b, -1)), where (b, num_tokens, d_out) "
    "belongs: flatten(2), or view(b, num_tokens, d_out) after transpose(1, 2)."
)
# A single token's run that raises torch's "index 1 is out of bounds for dimension 0 with size 1" where every larger
# size runs: a row read by its number ({index}: the first number in torch's words), as the worked example reads its
# query, inputs[1].
ROW_PAST_ONE_TOKEN = r"index (\d+) is out of bounds for dimension \d+ with size 1\b"
ROW_PAST_ONE_TOKEN_CLAIM = (
    "It runs on the judge's sizes and fails on a single token, reading index {index} of an axis that holds one: a "
    "token is read by its number (as the worked example reads its query, inputs[1]) where what every input has "
    "belongs: its sizes (inputs.shape[-1]), a row that always exists (inputs[0]), or every row in a loop."
)
# An edge run that fails where the judge's own sizes run: the cause its failure proves, and what it says.
EDGE_CAUSES = {
    SINGLE_TOKEN: (
        "size-one-squeezed",
        "It runs on the judge's sizes and fails on a single token: an axis of size 1 is lost on the way (squeeze() "
        "without a dim, or an index where a slice belongs), and the rest no longer finds the token axis.",
    ),
    MORE_TOKENS: (
        "sizes-hard-coded",
        f"It runs on the judge's {Call().tokens} tokens and fails on {EXAMPLE_TOKENS + 1}, one more than the worked "
        f"example's {EXAMPLE_TOKENS}: a size is fixed at the example's (torch.empty({EXAMPLE_TOKENS}, "
        f"{EXAMPLE_TOKENS}), range({EXAMPLE_TOKENS})) where the input's own, inputs.shape[0], belongs.",
    ),
    FEWER_FEATURES: (
        "sizes-hard-coded",
        f"It runs with the worked example's {EXAMPLE.d_in} features or more and fails with {EXAMPLE.d_in - 1}: a "
        f"feature is reached by its number (inputs[:, {EXAMPLE.d_in - 1}], a loop over range({EXAMPLE.d_in})) where "
        "the inputs' own size, inputs.shape[1], belongs.",
    ),
}
