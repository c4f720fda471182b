# Stage 2 exercise: replace each `raise NotImplementedError(...)` with your code.
"""Stage 2: self-attention with trainable weights (scaled dot-product attention).

Guide: docs/stage2.md
"""

import torch
import torch.nn as nn


class SelfAttention_v1(nn.Module):
    """Self-attention whose weights are plain matrices: nn.Parameter(torch.rand(d_in, d_out)).

    Example: torch.manual_seed(123); SelfAttention_v1(3, 2)(inputs)
        -> row 1 [0.2996, 0.8053], row 2 [0.3061, 0.8210]
    """

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.Wq = nn.Parameter(torch.rand(d_in, d_out))
        self.Wk = nn.Parameter(torch.rand(d_in, d_out))
        self.Wv = nn.Parameter(torch.rand(d_in, d_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = x @ self.Wq
        k = x @ self.Wk
        v = x @ self.Wv
        scores = q @ k.T
        weights = torch.softmax(scores / k.shape[-1] ** 0.5, dim=-1)
        return weights @ v


class SelfAttention_v2(nn.Module):
    """Self-attention whose weights are nn.Linear layers (optionally with bias).

    Example: torch.manual_seed(789); SelfAttention_v2(3, 2)(inputs)
        -> row 1 [-0.0739, 0.0713], row 2 [-0.0748, 0.0703]
    """

    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.T
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        return attn_weights @ values
