# Stage 2 exercise: replace each `raise NotImplementedError(...)` with your code.
"""Stage 2: self-attention with trainable weights (scaled dot-product attention).

Guide: docs/stage2.md
"""

import torch
import torch.nn as nn


class SelfAttention_v1(nn.Module):
    """Self-attention whose weights are plain matrices: nn.Parameter(torch.rand(d_in, d_out)).

    Create W_query, W_key, W_value in that order: with torch.manual_seed(123) the
    documents' numbers depend on it.

    Shapes: forward x (num_tokens, d_in) -> (num_tokens, d_out)

    Example: torch.manual_seed(123); SelfAttention_v1(3, 2)(inputs)
        -> row 1 [0.2996, 0.8053], row 2 [0.3061, 0.8210]
    """

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        # YOUR CODE HERE
        raise NotImplementedError('SelfAttention_v1.__init__ is not implemented yet: write it here, then run `make grade` (guide: docs/stage2.md)')

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # YOUR CODE HERE
        raise NotImplementedError('SelfAttention_v1.forward is not implemented yet: write it here, then run `make grade` (guide: docs/stage2.md)')


class SelfAttention_v2(nn.Module):
    """Self-attention whose weights are nn.Linear layers (optionally with bias).

    Create W_query, W_key, W_value in that order, as for SelfAttention_v1.

    Shapes: forward x (num_tokens, d_in) -> (num_tokens, d_out)

    Example: torch.manual_seed(789); SelfAttention_v2(3, 2)(inputs)
        -> row 1 [-0.0739, 0.0713], row 2 [-0.0748, 0.0703]
    """

    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False):
        super().__init__()
        # YOUR CODE HERE
        raise NotImplementedError('SelfAttention_v2.__init__ is not implemented yet: write it here, then run `make grade` (guide: docs/stage2.md)')

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # YOUR CODE HERE
        raise NotImplementedError('SelfAttention_v2.forward is not implemented yet: write it here, then run `make grade` (guide: docs/stage2.md)')
