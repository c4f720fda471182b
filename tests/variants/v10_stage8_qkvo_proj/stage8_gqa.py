"""Stage 8 (bonus): grouped-query attention, fewer key/value heads shared by the query heads.

Guide: docs/stage8.md
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

        self.q_proj = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.k_proj = nn.Linear(d_in, num_kv_groups * self.head_dim, bias=qkv_bias)
        self.v_proj = nn.Linear(d_in, num_kv_groups * self.head_dim, bias=qkv_bias)
        self.o_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        q = self.q_proj(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, n, self.num_kv_groups, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, n, self.num_kv_groups, self.head_dim).transpose(1, 2)

        # (b, num_kv_groups, n, head_dim) -> (b, num_heads, n, head_dim); heads 0..g-1 share group 0, ...
        k = k.repeat_interleave(self.group_size, dim=1)
        v = v.repeat_interleave(self.group_size, dim=1)

        scores = q @ k.transpose(2, 3)
        scores = scores.masked_fill(self.mask.bool()[:n, :n], -torch.inf)
        weights = torch.softmax(scores / self.head_dim**0.5, dim=-1)
        weights = self.dropout(weights)

        out = (weights @ v).transpose(1, 2).contiguous().view(b, n, self.d_out)
        return self.o_proj(out)
