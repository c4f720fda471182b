"""Stage 4: causal attention: hide future tokens, then drop out attention weights.

Guide: docs/stage4.md
"""

import torch
import torch.nn as nn


def mask_and_renormalize(attn_weights: torch.Tensor) -> torch.Tensor:
    """Zero the weights above the diagonal (torch.tril), then divide each row by its sum.

    Shapes: attn_weights (num_tokens, num_tokens) -> same shape, as in the book.
    Advice, shown as notes (0 points unless your instructor prices them): work on a batch
    (..., num_tokens, num_tokens) too, and make the mask on attn_weights' device.

    Example: row 2 of the book's weights [0.2041, 0.1659, 0.1662, ...] -> [0.5517, 0.4483, 0, 0, 0, 0]
    """
    ### BEGIN SOLUTION
    num_tokens = attn_weights.shape[-1]
    mask = torch.tril(torch.ones(num_tokens, num_tokens, device=attn_weights.device))
    masked = attn_weights * mask
    return masked / masked.sum(dim=-1, keepdim=True)
    ### END SOLUTION


def causal_softmax(attn_scores: torch.Tensor, d_k: int) -> torch.Tensor:
    """Causal attention weights with the -inf trick: masked_fill above the diagonal, then softmax.

    The scores are divided by sqrt(d_k) before the softmax, along the last dim.

    Shapes: attn_scores (num_tokens, num_tokens) -> same shape, as in the book (advice, as
    for mask_and_renormalize: a batch (..., num_tokens, num_tokens) too, the mask on its device)

    Example: gives the same weights as mask_and_renormalize on the softmax of the same scores.
    """
    ### BEGIN SOLUTION
    num_tokens = attn_scores.shape[-1]
    mask = torch.triu(torch.ones(num_tokens, num_tokens, device=attn_scores.device), diagonal=1)
    masked = attn_scores.masked_fill(mask.bool(), -torch.inf)
    return torch.softmax(masked / d_k**0.5, dim=-1)
    ### END SOLUTION


class CausalAttention(nn.Module):
    """Single-head causal self-attention with dropout on the attention weights, for batches.

    Attributes: W_query, W_key, W_value (nn.Linear, created in that order), dropout
    (nn.Dropout), and a buffer named ``mask``: torch.triu(ones(context_length,
    context_length), diagonal=1), so that it moves with .to(device) and is saved in
    state_dict. Inputs may be shorter than context_length.

    Shapes: forward x (b, num_tokens, d_in) -> (b, num_tokens, d_out)

    Example: torch.manual_seed(123); CausalAttention(3, 2, 6, 0.0)(batch) -> each batch item
        row 1 [-0.4519, 0.2216], row 6 [-0.5299, -0.1081]
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, qkv_bias: bool = False):
        super().__init__()
        ### BEGIN SOLUTION
        self.d_out = d_out
        self.W_k = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_v = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_q = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        b, num_tokens, d_in = x.shape
        keys = self.W_k(x)  # (b, num_tokens, d_out)
        queries = self.W_q(x)
        values = self.W_v(x)
        attn_scores = queries @ keys.transpose(1, 2)  # (b, num_tokens, num_tokens)
        # Truncate the mask: a batch may hold fewer tokens than context_length.
        attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        return attn_weights @ values  # (b, num_tokens, d_out)
        ### END SOLUTION
