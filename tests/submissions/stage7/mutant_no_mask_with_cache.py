"""Stage 7: stage 5's MultiHeadAttention with a KV cache.

Guide: docs/stage7.md
"""

import torch
import torch.nn as nn


class MultiHeadAttentionKV(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads:
            raise ValueError(f"num_heads={num_heads} does not divide d_out={d_out}")
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.context_length = context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))
        self.cache_k = None
        self.cache_v = None

    def reset_cache(self):
        self.cache_k = None
        self.cache_v = None

    def forward(self, x, use_cache=False):
        b, n, _ = x.shape
        q = self.W_query(x).unflatten(-1, (self.num_heads, self.head_dim)).transpose(1, 2)
        k = self.W_key(x).unflatten(-1, (self.num_heads, self.head_dim)).transpose(1, 2)
        v = self.W_value(x).unflatten(-1, (self.num_heads, self.head_dim)).transpose(1, 2)

        start = 0
        if use_cache:
            if self.cache_k is not None:
                start = self.cache_k.shape[2]
                k = torch.cat([self.cache_k, k], dim=2)
                v = torch.cat([self.cache_v, v], dim=2)
            if k.shape[2] > self.context_length:
                raise ValueError(f"{k.shape[2]} tokens do not fit in context_length={self.context_length}")
            self.cache_k, self.cache_v = k, v

        q_pos = torch.arange(start, start + n, device=x.device).unsqueeze(1)
        k_pos = torch.arange(k.shape[2], device=x.device).unsqueeze(0)
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) * self.head_dim ** -0.5
        if not use_cache:
            scores = torch.where(k_pos > q_pos, float("-inf"), scores)
        weights = self.dropout(torch.softmax(scores, dim=-1))
        out = torch.einsum("bhqk,bhkd->bqhd", weights, v).reshape(b, n, self.d_out)
        return self.out_proj(out)
