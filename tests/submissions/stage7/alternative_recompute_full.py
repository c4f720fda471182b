"""Stage 7: stage 5's MultiHeadAttention with a KV cache.

Guide: docs/stage7.md
"""

import torch
import torch.nn as nn


class MultiHeadAttentionKV(nn.Module):
    """Keeps the inputs seen so far; each cached call runs the full causal attention and returns the new rows.

    Slower than a real cache, but simple: cache_k and cache_v are the keys and values of every kept token.
    """

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads:
            raise ValueError("d_out must be divisible by num_heads")
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
        self.seen = None
        self.cache_k = None
        self.cache_v = None

    def reset_cache(self):
        self.seen = None
        self.cache_k = None
        self.cache_v = None

    def split_heads(self, x):
        b, n, _ = x.shape
        return x.view(b, n, self.num_heads, self.head_dim).transpose(1, 2)

    def attend(self, x):
        b, n, _ = x.shape
        queries = self.split_heads(self.W_query(x))
        keys = self.split_heads(self.W_key(x))
        values = self.split_heads(self.W_value(x))
        scores = queries @ keys.transpose(2, 3)
        scores.masked_fill_(self.mask.bool()[:n, :n], -torch.inf)
        weights = self.dropout(torch.softmax(scores / self.head_dim**0.5, dim=-1))
        context = (weights @ values).transpose(1, 2).contiguous().view(b, n, self.d_out)
        return self.out_proj(context), keys, values

    def forward(self, x, use_cache=False):
        if not use_cache:
            return self.attend(x)[0]
        seen = x if self.seen is None else torch.cat([self.seen, x], dim=1)
        if seen.shape[1] > self.context_length:
            raise ValueError(f"{seen.shape[1]} tokens do not fit in context_length={self.context_length}")
        out, keys, values = self.attend(seen)
        self.seen, self.cache_k, self.cache_v = seen, keys, values
        return out[:, -x.shape[1]:]
