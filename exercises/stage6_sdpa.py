# Stage 6 exercise: replace each `raise NotImplementedError(...)` with your code.
"""Stage 6 (bonus): scaled dot-product attention as one function, from primitives.

Guide: docs/stage6.md
"""

import math

import torch


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    """softmax(query @ key^T * scale + mask) @ value, as PyTorch's F.scaled_dot_product_attention computes it.

    - scale: 1 / sqrt(E) unless given.
    - is_causal: query i sees keys 0..i (a lower-triangular L x S mask, aligned top-left).
    - attn_mask: a bool mask (True = the key takes part) or a float mask added to the scores;
      either broadcasts over the leading dimensions.
    - A row whose every key is masked gives zeros, not NaN.
    - dropout_p > 0: dropout on the attention weights (kept ones scaled by 1 / (1 - dropout_p)),
      whatever the caller's mode: a function has no training flag.
    - enable_gqa: key and value have fewer heads (dim -3) than query; key/value head j serves
      query heads j * group ... (j + 1) * group - 1 (repeat_interleave).

    Shapes: query (..., L, E), key (..., S, E), value (..., S, Ev) -> (..., L, Ev)

    Example: q = k = torch.eye(2); v = torch.tensor([[1.0, 0.0], [0.0, 1.0]]) ->
        [[0.6698, 0.3302], [0.3302, 0.6698]] (the softmax of [1/sqrt(2), 0] in each row);
        with is_causal=True, the first row is [1.0, 0.0].
    """
    # YOUR CODE HERE
    raise NotImplementedError('scaled_dot_product_attention is not implemented yet: write it here, then run `make grade` (guide: docs/stage6.md)')
