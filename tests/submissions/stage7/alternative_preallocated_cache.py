"""Stage 7: stage 5's MultiHeadAttention with a KV cache.

Guide: docs/stage7.md
"""

import torch
import torch.nn as nn


class MultiHeadAttentionKV(nn.Module):
    """Keys and values go into tensors of context_length slots allocated once; a counter says how many are filled."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError(f"d_out={d_out} is not divisible by num_heads={num_heads}")
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
        self._k_slots = None
        self._v_slots = None
        self._filled = 0

    @property
    def cache_k(self):
        return None if self._filled == 0 else self._k_slots[:, :, :self._filled]

    @property
    def cache_v(self):
        return None if self._filled == 0 else self._v_slots[:, :, :self._filled]

    def reset_cache(self):
        self._k_slots = None
        self._v_slots = None
        self._filled = 0

    def forward(self, x, use_cache=False):
        b, n, _ = x.shape
        q = self.W_query(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.W_key(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.W_value(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)

        offset = 0
        if use_cache:
            offset = self._filled
            if offset + n > self.context_length:
                raise ValueError("KV cache full: context_length exceeded")
            if self._k_slots is None:
                slots = (b, self.num_heads, self.context_length, self.head_dim)
                self._k_slots = k.new_zeros(slots)
                self._v_slots = v.new_zeros(slots)
            self._k_slots[:, :, offset:offset + n] = k
            self._v_slots[:, :, offset:offset + n] = v
            self._filled = offset + n
            k = self._k_slots[:, :, :self._filled]
            v = self._v_slots[:, :, :self._filled]

        scores = q @ k.transpose(2, 3)
        scores = scores.masked_fill(self.mask[offset:offset + n, :offset + n].bool(), float("-inf"))
        weights = self.dropout(torch.softmax(scores / self.head_dim ** 0.5, dim=-1))
        out = (weights @ v).transpose(1, 2).reshape(b, n, self.d_out)
        return self.out_proj(out)
