"""Stage 7: stage 5's MultiHeadAttention with a KV cache.

Guide: docs/stage7.md
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class MultiHeadAttentionKV(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError("d_out must be a multiple of num_heads")
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
        hd = self.head_dim
        new_k = torch.stack([self.W_key(x)[..., h * hd:(h + 1) * hd] for h in range(self.num_heads)], dim=1)
        new_v = torch.stack([self.W_value(x)[..., h * hd:(h + 1) * hd] for h in range(self.num_heads)], dim=1)

        cached = 0
        if use_cache and self.cache_k is not None:
            cached = self.cache_k.shape[2]
        if use_cache and cached + n > self.context_length:
            raise ValueError("too many tokens for the KV cache (context_length)")
        if use_cache:
            all_k = new_k if cached == 0 else torch.cat([self.cache_k, new_k], dim=2)
            all_v = new_v if cached == 0 else torch.cat([self.cache_v, new_v], dim=2)
            self.cache_k, self.cache_v = all_k, all_v
        else:
            all_k, all_v = new_k, new_v

        q_all = self.W_query(x)
        future = self.mask[cached:cached + n, :cached + n].bool()
        heads = []
        for h in range(self.num_heads):
            q = q_all[..., h * hd:(h + 1) * hd]
            scores = q @ all_k[:, h].transpose(1, 2) / hd ** 0.5
            scores = scores.masked_fill(future, float("-inf"))
            weights = self.dropout(F.softmax(scores, dim=-1))
            heads.append(weights @ all_v[:, h])
        return self.out_proj(torch.cat(heads, dim=-1))
