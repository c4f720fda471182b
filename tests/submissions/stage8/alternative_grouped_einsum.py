"""Stage 8: grouped-query attention: fewer key/value heads, each shared by consecutive query heads.

Guide: docs/stage8.md
"""

import torch
import torch.nn as nn


class GroupedQueryAttention(nn.Module):
    """The query heads are arranged (groups, heads per group), so one key/value head broadcasts over its group."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, num_kv_groups, qkv_bias=False):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError(f"d_out={d_out} is not a multiple of num_heads={num_heads}")
        if num_heads % num_kv_groups != 0:
            raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_groups={num_kv_groups}")
        self.d_out = d_out
        self.num_heads = num_heads
        self.num_kv_groups = num_kv_groups
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, num_kv_groups * self.head_dim, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, num_kv_groups * self.head_dim, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, n, _ = x.shape
        g, r, d = self.num_kv_groups, self.num_heads // self.num_kv_groups, self.head_dim
        # query head h = group * r + i: heads 0..r-1 share group 0, and so on
        q = self.W_query(x).view(b, n, g, r, d)
        k = self.W_key(x).view(b, n, g, d)
        v = self.W_value(x).view(b, n, g, d)

        scores = torch.einsum("bqgrd,bkgd->bgrqk", q, k) / d ** 0.5
        scores = scores.masked_fill(self.mask[:n, :n].bool(), float("-inf"))
        weights = self.dropout(torch.softmax(scores, dim=-1))
        context = torch.einsum("bgrqk,bkgd->bqgrd", weights, v).reshape(b, n, self.d_out)
        return self.out_proj(context)
