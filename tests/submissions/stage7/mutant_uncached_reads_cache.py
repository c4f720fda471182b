"""Stage 7: stage 5's MultiHeadAttention with a KV cache.

Guide: docs/stage7.md
"""

import torch

from exercises.stage5_multihead_attention import MultiHeadAttention


class MultiHeadAttentionKV(MultiHeadAttention):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias=qkv_bias)
        self.num_heads = num_heads
        self.d_out = d_out
        self.context_length = context_length
        self.reset_cache()

    def reset_cache(self):
        self.cache_k = None
        self.cache_v = None

    def split(self, t):
        b, n, _ = t.shape
        return t.view(b, n, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x, use_cache=False):
        b, n, _ = x.shape
        q = self.split(self.W_query(x))
        k = self.split(self.W_key(x))
        v = self.split(self.W_value(x))

        past = 0 if self.cache_k is None else self.cache_k.size(2)
        if past:
            k = torch.cat((self.cache_k, k), dim=2)
            v = torch.cat((self.cache_v, v), dim=2)
        if use_cache:
            if past + n > self.context_length:
                raise ValueError("the KV cache is full (context_length reached)")
            self.cache_k, self.cache_v = k, v

        scores = q @ k.transpose(-2, -1) / self.head_dim ** 0.5
        future = self.mask[past:past + n, :past + n].bool()
        scores = scores.masked_fill(future, float("-inf"))
        weights = self.dropout(torch.softmax(scores, dim=-1))
        out = (weights @ v).transpose(1, 2).contiguous().view(b, n, self.d_out)
        return self.out_proj(out)
