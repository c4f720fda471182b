# Stage 5 exercise: replace each `raise NotImplementedError(...)` with your code.
"""Stage 5: multi-head attention, first as a stack of heads, then with one weight split.

Guide: docs/stage5.md
"""

import torch
import torch.nn as nn

from exercises.stage4_causal_attention import CausalAttention


class MultiHeadAttentionWrapper(nn.Module):
    """num_heads independent CausalAttention heads whose outputs are concatenated.

    ``heads`` is an nn.ModuleList; every head has output size d_out, so the result has
    num_heads * d_out features (as in the book).

    Shapes: forward x (b, num_tokens, d_in) -> (b, num_tokens, num_heads * d_out)

    Example: torch.manual_seed(123); MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2)(batch)
        -> row 1 of each batch item [-0.4519, 0.2216, 0.4772, 0.1063]
    """

    def __init__(
        self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int, qkv_bias: bool = False
    ):
        super().__init__()
        # YOUR CODE HERE
        raise NotImplementedError('MultiHeadAttentionWrapper.__init__ is not implemented yet: write it here, then run `make grade` (guide: docs/stage5.md)')

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # YOUR CODE HERE
        raise NotImplementedError('MultiHeadAttentionWrapper.forward is not implemented yet: write it here, then run `make grade` (guide: docs/stage5.md)')


class MultiHeadAttention(nn.Module):
    """Multi-head causal attention with one projection per Q, K, V, split into heads.

    Attributes: W_query, W_key, W_value (nn.Linear d_in -> d_out, created in that order),
    out_proj (nn.Linear d_out -> d_out, with bias), dropout, and the buffer ``mask``.
    head_dim = d_out // num_heads, and scores are divided by sqrt(head_dim). A d_out that
    num_heads does not divide must raise an error that says so.

    Shapes: forward x (b, num_tokens, d_in) -> (b, num_tokens, d_out)

    Example: torch.manual_seed(123); MultiHeadAttention(3, 2, 6, 0.0, num_heads=2)(batch)
        -> row 1 of each batch item [0.3190, 0.4858]
    """

    def __init__(
        self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int, qkv_bias: bool = False
    ):
        super().__init__()
        # YOUR CODE HERE
        raise NotImplementedError('MultiHeadAttention.__init__ is not implemented yet: write it here, then run `make grade` (guide: docs/stage5.md)')

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # YOUR CODE HERE
        raise NotImplementedError('MultiHeadAttention.forward is not implemented yet: write it here, then run `make grade` (guide: docs/stage5.md)')
