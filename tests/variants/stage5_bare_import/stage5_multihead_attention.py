"""Stage 5: multi-head attention, first as a stack of heads, then with one weight split.

Guide: docs/stage5.md
"""

import torch
import torch.nn as nn

import stage4_causal_attention


class MultiHeadAttentionWrapper(nn.Module):
    """num_heads independent CausalAttention heads whose outputs are concatenated."""

    def __init__(
        self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int, qkv_bias: bool = False
    ):
        super().__init__()
        self.heads = nn.ModuleList()
        for _ in range(num_heads):
            self.heads.append(
                stage4_causal_attention.CausalAttention(d_in, d_out, context_length, dropout, qkv_bias=qkv_bias)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outs = [head(x) for head in self.heads]
        return torch.cat(outs, dim=-1)


class MultiHeadAttention(nn.Module):
    """Multi-head causal attention with one projection per Q, K, V, split into heads."""

    def __init__(
        self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int, qkv_bias: bool = False
    ):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError("d_out must be divisible by num_heads")
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def _split(self, t: torch.Tensor, b: int, n: int) -> torch.Tensor:
        return t.view(b, n, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        keys = self._split(self.W_key(x), b, n)
        queries = self._split(self.W_query(x), b, n)
        values = self._split(self.W_value(x), b, n)

        attn_scores = queries @ keys.transpose(-2, -1)
        attn_scores = attn_scores.masked_fill(self.mask.bool()[:n, :n], -torch.inf)
        attn_weights = torch.softmax(attn_scores / self.head_dim ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        context = (attn_weights @ values).transpose(1, 2).contiguous().view(b, n, self.d_out)
        return self.out_proj(context)
