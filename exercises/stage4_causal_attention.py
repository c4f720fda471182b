# Stage 4 exercise: replace each `raise NotImplementedError(...)` with your code.
"""Stage 4: causal attention: hide future tokens, then drop out attention weights.

Guide: docs/stage4.md
"""

import torch
import torch.nn as nn


def mask_and_renormalize(attn_weights: torch.Tensor) -> torch.Tensor:
    """Zero the weights above the diagonal (torch.tril), then divide each row by its sum.

    Shapes: attn_weights (num_tokens, num_tokens) -> same shape, as in the book.
    Advice, shown as notes (0 points unless your instructor prices them): work on a batch
    (..., num_tokens, num_tokens) too, and make the mask on attn_weights' device.

    Example: row 2 of the book's weights [0.2041, 0.1659, 0.1662, ...] -> [0.5517, 0.4483, 0, 0, 0, 0]
    """
    # YOUR CODE HERE
    raise NotImplementedError('mask_and_renormalize is not implemented yet: write it here, then run `make grade` (guide: docs/stage4.md)')


def causal_softmax(attn_scores: torch.Tensor, d_k: int) -> torch.Tensor:
    """Causal attention weights with the -inf trick: masked_fill above the diagonal, then softmax.

    The scores are divided by sqrt(d_k) before the softmax, along the last dim.

    Shapes: attn_scores (num_tokens, num_tokens) -> same shape, as in the book (advice, as
    for mask_and_renormalize: a batch (..., num_tokens, num_tokens) too, the mask on its device)

    Example: gives the same weights as mask_and_renormalize on the softmax of the same scores.
    """
    # YOUR CODE HERE
    raise NotImplementedError('causal_softmax is not implemented yet: write it here, then run `make grade` (guide: docs/stage4.md)')


class CausalAttention(nn.Module):
    """Single-head causal self-attention with dropout on the attention weights, for batches.

    Attributes: W_query, W_key, W_value (nn.Linear, created in that order), dropout
    (nn.Dropout), and a buffer named ``mask``: torch.triu(ones(context_length,
    context_length), diagonal=1), so that it moves with .to(device) and is saved in
    state_dict. Inputs may be shorter than context_length.

    Shapes: forward x (b, num_tokens, d_in) -> (b, num_tokens, d_out)

    Example: torch.manual_seed(123); CausalAttention(3, 2, 6, 0.0)(batch) -> each batch item
        row 1 [-0.4519, 0.2216], row 6 [-0.5299, -0.1081]
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, qkv_bias: bool = False):
        super().__init__()
        # YOUR CODE HERE
        raise NotImplementedError('CausalAttention.__init__ is not implemented yet: write it here, then run `make grade` (guide: docs/stage4.md)')

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # YOUR CODE HERE
        raise NotImplementedError('CausalAttention.forward is not implemented yet: write it here, then run `make grade` (guide: docs/stage4.md)')
