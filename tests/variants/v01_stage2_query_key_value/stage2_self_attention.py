"""Stage 2: self-attention with trainable weights (scaled dot-product attention).

Guide: docs/stage2.md
"""

import torch
import torch.nn as nn


class SelfAttention_v1(nn.Module):
    """Self-attention whose weights are plain matrices: nn.Parameter(torch.rand(d_in, d_out))."""

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        # query first, then key, then value (the seed depends on the order)
        self.query = nn.Parameter(torch.rand(d_in, d_out))
        self.key = nn.Parameter(torch.rand(d_in, d_out))
        self.value = nn.Parameter(torch.rand(d_in, d_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        keys = x @ self.key
        queries = x @ self.query
        values = x @ self.value
        attn_scores = queries @ keys.T
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        return attn_weights @ values


class SelfAttention_v2(nn.Module):
    """Self-attention whose weights are nn.Linear layers (optionally with bias)."""

    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False):
        super().__init__()
        self.query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        keys = self.key(x)
        queries = self.query(x)
        values = self.value(x)
        attn_scores = queries @ keys.T
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        return attn_weights @ values
