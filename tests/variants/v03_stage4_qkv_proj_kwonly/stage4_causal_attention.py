"""Stage 4: causal attention: hide future tokens, then drop out attention weights."""

import torch
import torch.nn as nn


def mask_and_renormalize(attn_weights: torch.Tensor) -> torch.Tensor:
    """Zero the weights above the diagonal (torch.tril), then divide each row by its sum."""
    num_tokens = attn_weights.shape[-1]
    mask_simple = torch.tril(torch.ones(num_tokens, num_tokens, device=attn_weights.device))
    masked_simple = attn_weights * mask_simple
    row_sums = masked_simple.sum(dim=-1, keepdim=True)
    return masked_simple / row_sums


def causal_softmax(attn_scores: torch.Tensor, d_k: int) -> torch.Tensor:
    """Causal attention weights with the -inf trick: masked_fill above the diagonal, then softmax."""
    num_tokens = attn_scores.shape[-1]
    mask = torch.triu(torch.ones(num_tokens, num_tokens, device=attn_scores.device), diagonal=1)
    masked = attn_scores.masked_fill(mask.bool(), -torch.inf)
    return torch.softmax(masked / d_k**0.5, dim=-1)


class CausalAttention(nn.Module):
    """Single-head causal self-attention with dropout on the attention weights, for batches."""

    def __init__(self, d_in: int, d_out: int, context_length: int, *, dropout: float = 0.0, qkv_bias: bool = False):
        super().__init__()
        self.d_out = d_out
        self.q_proj = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.k_proj = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.v_proj = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, num_tokens, _ = x.shape
        q = self.q_proj(x)
        k = self.k_proj(x)
        v = self.v_proj(x)
        scores = q @ k.transpose(1, 2)
        scores = scores.masked_fill(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        weights = torch.softmax(scores / k.shape[-1] ** 0.5, dim=-1)
        weights = self.dropout(weights)
        return weights @ v
