"""Stage 7 (bonus): multi-head attention with a KV cache, for generating one token after another.

Guide: docs/stage7.md

My projections are called W_q, W_k, W_v and `out`, so this class does not reuse stage 5's
__init__; it is a standalone nn.Module with the same creation order.
"""

import torch
import torch.nn as nn


class MultiHeadAttentionKV(nn.Module):
    """Multi-head causal attention that can keep the keys and values of the tokens it has seen."""

    def __init__(
        self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int, qkv_bias: bool = False
    ):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError(f"d_out ({d_out}) must be divisible by num_heads ({num_heads})")
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads

        self.W_q = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_k = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_v = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

        self.cache_k = None
        self.cache_v = None

    def reset_cache(self) -> None:
        """Empty the cache: the next forward with use_cache=True starts a new sequence."""
        self.cache_k = None
        self.cache_v = None

    def _split(self, t: torch.Tensor) -> torch.Tensor:
        b, n, _ = t.shape
        return t.view(b, n, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor, use_cache: bool = False) -> torch.Tensor:
        b, n, _ = x.shape
        q = self._split(self.W_q(x))
        k_new = self._split(self.W_k(x))
        v_new = self._split(self.W_v(x))

        if use_cache:
            start = 0 if self.cache_k is None else self.cache_k.shape[2]
            if start + n > self.mask.shape[0]:
                raise ValueError(
                    f"KV cache overflow: {start} tokens are cached, {n} more would exceed "
                    f"context_length {self.mask.shape[0]}"
                )
            if self.cache_k is None:
                k, v = k_new, v_new
            else:
                k = torch.cat([self.cache_k, k_new], dim=2)
                v = torch.cat([self.cache_v, v_new], dim=2)
            self.cache_k, self.cache_v = k, v
        else:
            start = 0
            k, v = k_new, v_new

        scores = q @ k.transpose(2, 3)  # (b, heads, n, start + n)
        mask_bool = self.mask.bool()[start:start + n, :start + n]
        scores = scores.masked_fill(mask_bool, -torch.inf)
        weights = torch.softmax(scores / self.head_dim**0.5, dim=-1)
        weights = self.dropout(weights)

        ctx = (weights @ v).transpose(1, 2).contiguous().view(b, n, self.d_out)
        return self.out(ctx)
