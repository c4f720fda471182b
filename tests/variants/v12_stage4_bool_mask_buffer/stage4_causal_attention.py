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
    """Single-head causal self-attention with dropout on the attention weights, for batches.

    The mask buffer is stored as booleans (True above the diagonal) so forward can use it as is.
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, qkv_bias: bool = False):
        super().__init__()
        self.d_out = d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer(
            "mask", torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), diagonal=1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)
        attn_scores = attn_scores.masked_fill(self.mask[:num_tokens, :num_tokens], float("-inf"))
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        return attn_weights @ values
