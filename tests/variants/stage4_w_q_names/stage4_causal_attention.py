# Stage 4 exercise: replace each `raise NotImplementedError(...)` with your code.
"""Stage 4: causal attention: hide future tokens, then drop out attention weights.

Guide: docs/stage4.md
"""

import torch
import torch.nn as nn


def mask_and_renormalize(attn_weights: torch.Tensor) -> torch.Tensor:
    """Zero the weights above the diagonal (torch.tril), then divide each row by its sum."""
    n = attn_weights.shape[-1]
    keep = torch.tril(torch.ones(n, n, device=attn_weights.device, dtype=attn_weights.dtype))
    masked = attn_weights * keep
    return masked / masked.sum(dim=-1, keepdim=True)


def causal_softmax(attn_scores: torch.Tensor, d_k: int) -> torch.Tensor:
    """Causal attention weights with the -inf trick: masked_fill above the diagonal, then softmax."""
    n = attn_scores.shape[-1]
    future = torch.triu(torch.ones(n, n, device=attn_scores.device), diagonal=1).bool()
    masked = attn_scores.masked_fill(future, -torch.inf)
    return torch.softmax(masked / d_k ** 0.5, dim=-1)


class CausalAttention(nn.Module):
    """Single-head causal self-attention with dropout on the attention weights."""

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, qkv_bias: bool = False):
        super().__init__()
        self.W_q = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_k = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_v = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[1]
        q = self.W_q(x)
        k = self.W_k(x)
        v = self.W_v(x)
        scores = q @ k.transpose(1, 2)
        scores = scores.masked_fill(self.mask[:n, :n].bool(), float("-inf"))
        w = torch.softmax(scores / k.shape[-1] ** 0.5, dim=-1)
        w = self.dropout(w)
        return w @ v
