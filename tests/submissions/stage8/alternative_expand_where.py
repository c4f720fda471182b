"""Stage 8: grouped-query attention: fewer key/value heads, each shared by consecutive query heads.

Guide: docs/stage8.md
"""

import math

import torch
from torch import nn


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 num_kv_groups: int, qkv_bias: bool = False):
        super().__init__()
        if d_out % num_heads:
            raise ValueError("d_out must be divisible by num_heads")
        if num_heads % num_kv_groups:
            raise ValueError("num_kv_groups must divide num_heads")
        self.num_heads = num_heads
        self.num_kv_groups = num_kv_groups
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, self.num_kv_groups * self.head_dim, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, self.num_kv_groups * self.head_dim, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def _expand_groups(self, t: torch.Tensor) -> torch.Tensor:
        """(b, groups, n, d) -> (b, num_heads, n, d), each group repeated for its consecutive heads (a view)."""
        b, g, n, d = t.shape
        per_group = self.num_heads // g
        return t[:, :, None].expand(b, g, per_group, n, d).reshape(b, self.num_heads, n, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d_out = x.shape[0], x.shape[1], self.out_proj.in_features
        q = self.W_query(x).reshape(b, n, self.num_heads, self.head_dim).permute(0, 2, 1, 3)
        k = self.W_key(x).reshape(b, n, self.num_kv_groups, self.head_dim).permute(0, 2, 1, 3)
        v = self.W_value(x).reshape(b, n, self.num_kv_groups, self.head_dim).permute(0, 2, 1, 3)
        k, v = self._expand_groups(k), self._expand_groups(v)

        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        allowed = self.mask[:n, :n] == 0
        scores = torch.where(allowed, scores, torch.full_like(scores, float("-inf")))
        weights = self.dropout(torch.softmax(scores, dim=-1))
        context = torch.matmul(weights, v).permute(0, 2, 1, 3).reshape(b, n, d_out)
        return self.out_proj(context)
