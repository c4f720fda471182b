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
    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, qkv_bias: bool = False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.softmax = nn.Softmax(dim=-1)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)
        attn_scores = attn_scores.masked_fill(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = self.dropout(self.softmax(attn_scores / keys.shape[-1] ** 0.5))
        return attn_weights @ values
