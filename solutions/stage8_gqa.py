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
        ### BEGIN SOLUTION
        if d_out % num_heads != 0:
            raise ValueError(f"d_out must be divisible by num_heads (got d_out={d_out}, num_heads={num_heads})")
        if num_heads % num_kv_groups != 0:
            raise ValueError(f"num_heads must be divisible by num_kv_groups (got num_heads={num_heads}, "
                             f"num_kv_groups={num_kv_groups})")
        self.d_out = d_out
        self.num_heads = num_heads
        self.num_kv_groups = num_kv_groups
        self.head_dim = d_out // num_heads
        self.group_size = num_heads // num_kv_groups  # query heads per key/value group
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, num_kv_groups * self.head_dim, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, num_kv_groups * self.head_dim, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        b, num_tokens, d_in = x.shape
        # (b, num_tokens, d_out) -> (b, num_tokens, num_heads, head_dim) -> (b, num_heads, num_tokens, head_dim)
        queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        # (b, num_tokens, num_kv_groups * head_dim) -> (b, num_kv_groups, num_tokens, head_dim)
        keys = self.W_key(x).view(b, num_tokens, self.num_kv_groups, self.head_dim).transpose(1, 2)
        values = self.W_value(x).view(b, num_tokens, self.num_kv_groups, self.head_dim).transpose(1, 2)
        # Each group serves group_size consecutive query heads: group g -> heads g*group_size ... (g+1)*group_size - 1.
        keys = keys.repeat_interleave(self.group_size, dim=1)  # (b, num_heads, num_tokens, head_dim)
        values = values.repeat_interleave(self.group_size, dim=1)

        attn_scores = queries @ keys.transpose(2, 3)  # (b, num_heads, num_tokens, num_tokens)
        attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / self.head_dim**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        context = (attn_weights @ values).transpose(1, 2)  # (b, num_tokens, num_heads, head_dim)
        context = context.contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context)  # (b, num_tokens, d_out)
        ### END SOLUTION
