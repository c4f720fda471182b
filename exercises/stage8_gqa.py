# Stage 8 exercise: replace each `raise NotImplementedError(...)` with your code.
"""Stage 8 (bonus): grouped-query attention, fewer key/value heads shared by the query heads.

Guide: docs/stage8.md
"""

import torch
import torch.nn as nn


class GroupedQueryAttention(nn.Module):
    """Causal multi-head attention whose num_heads query heads share num_kv_groups key/value heads.

    Attributes: W_query (nn.Linear d_in -> d_out), W_key and W_value (nn.Linear d_in ->
    num_kv_groups * head_dim), out_proj (nn.Linear d_out -> d_out, with bias), created in that
    order, then dropout and the buffer ``mask`` (torch.triu of ones, diagonal=1). head_dim =
    d_out // num_heads; query head h reads key/value group h // (num_heads // num_kv_groups), so
    consecutive query heads share a group (as repeat_interleave repeats). Scores are divided by
    sqrt(head_dim). A d_out that num_heads does not divide, or a num_heads that num_kv_groups does
    not divide, must raise an error that says so. With num_kv_groups == num_heads it is stage 5's
    MultiHeadAttention, weights included under the same seed.

    Shapes: forward x (b, num_tokens, d_in) -> (b, num_tokens, d_out)

    Example: GroupedQueryAttention(768, 768, 1024, 0.0, num_heads=12, num_kv_groups=4) has
        1,573,632 parameters (MultiHeadAttention: 2,360,064)
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        num_kv_groups: int,
        qkv_bias: bool = False,
    ):
        super().__init__()
        # YOUR CODE HERE
        raise NotImplementedError('GroupedQueryAttention.__init__ is not implemented yet: write it here, then run `make grade` (guide: docs/stage8.md)')

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # YOUR CODE HERE
        raise NotImplementedError('GroupedQueryAttention.forward is not implemented yet: write it here, then run `make grade` (guide: docs/stage8.md)')
