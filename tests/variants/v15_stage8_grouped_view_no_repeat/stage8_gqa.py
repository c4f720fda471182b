"""Stage 8 (bonus): grouped-query attention, fewer key/value heads shared by the query heads.

Guide: docs/stage8.md

Instead of copying keys/values with repeat_interleave, the queries are viewed as
(b, num_kv_groups, group_size, num_tokens, head_dim) and the keys/values broadcast over group_size.
"""

import torch
import torch.nn as nn


class GroupedQueryAttention(nn.Module):
    """Causal multi-head attention whose num_heads query heads share num_kv_groups key/value heads."""

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
        if d_out % num_heads != 0:
            raise ValueError(f"d_out ({d_out}) must be divisible by num_heads ({num_heads})")
        if num_heads % num_kv_groups != 0:
            raise ValueError(f"num_heads ({num_heads}) must be divisible by num_kv_groups ({num_kv_groups})")
        self.d_out = d_out
        self.num_heads = num_heads
        self.num_kv_groups = num_kv_groups
        self.head_dim = d_out // num_heads
        self.group_size = num_heads // num_kv_groups

        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, num_kv_groups * self.head_dim, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, num_kv_groups * self.head_dim, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        g, s, hd = self.num_kv_groups, self.group_size, self.head_dim
        # query head h = group * s + j  ->  (b, g, s, n, hd)
        queries = self.W_query(x).view(b, n, g, s, hd).permute(0, 2, 3, 1, 4)
        # keys/values: (b, g, 1, n, hd), broadcast over the s query heads of the group
        keys = self.W_key(x).view(b, n, g, hd).transpose(1, 2).unsqueeze(2)
        values = self.W_value(x).view(b, n, g, hd).transpose(1, 2).unsqueeze(2)

        attn_scores = queries @ keys.transpose(-2, -1)  # (b, g, s, n, n)
        attn_scores = attn_scores.masked_fill(self.mask.bool()[:n, :n], -torch.inf)
        attn_weights = torch.softmax(attn_scores / hd**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        context = attn_weights @ values  # (b, g, s, n, hd)
        context = context.permute(0, 3, 1, 2, 4).contiguous().view(b, n, self.d_out)
        return self.out_proj(context)
