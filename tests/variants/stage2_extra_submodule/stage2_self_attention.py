# Stage 2 exercise: replace each `raise NotImplementedError(...)` with your code.
"""Stage 2: self-attention with trainable weights (scaled dot-product attention).

Guide: docs/stage2.md
"""

import torch
import torch.nn as nn


class Scale(nn.Module):
    """Divides attention scores by sqrt(d_k) (no parameters)."""

    def __init__(self, d_k: int):
        super().__init__()
        self.d_k = d_k

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        return scores / self.d_k ** 0.5


class SelfAttention_v1(nn.Module):
    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))
        self.scale = Scale(d_out)  # d_k == d_out here

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        keys = x @ self.W_key
        queries = x @ self.W_query
        values = x @ self.W_value
        attn_weights = torch.softmax(self.scale(queries @ keys.T), dim=-1)
        return attn_weights @ values


class SelfAttention_v2(nn.Module):
    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.scale = Scale(d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_weights = torch.softmax(self.scale(queries @ keys.T), dim=-1)
        return attn_weights @ values
