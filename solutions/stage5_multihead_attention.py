"""Stage 5: multi-head attention, first as a stack of heads, then with one weight split.

Guide: docs/stage5.md
"""

import torch
import torch.nn as nn

from solutions.stage4_causal_attention import CausalAttention


class MultiHeadAttentionWrapper(nn.Module):
    """num_heads independent CausalAttention heads whose outputs are concatenated.

    ``heads`` is an nn.ModuleList; every head has output size d_out, so the result has
    num_heads * d_out features (as in the book).

    Shapes: forward x (b, num_tokens, d_in) -> (b, num_tokens, num_heads * d_out)

    Example: torch.manual_seed(123); MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2)(batch)
        -> row 1 of each batch item [-0.4519, 0.2216, 0.4772, 0.1063]
    """

    def __init__(
        self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int, qkv_bias: bool = False
    ):
        super().__init__()
        ### BEGIN SOLUTION
        self.heads = nn.ModuleList(
            [CausalAttention(d_in, d_out, context_length, dropout, qkv_bias) for _ in range(num_heads)]
        )
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        return torch.cat([head(x) for head in self.heads], dim=-1)  # concatenate features
        ### END SOLUTION


class MultiHeadAttention(nn.Module):
    """Multi-head causal attention with one projection per Q, K, V, split into heads.

    Attributes: W_query, W_key, W_value (nn.Linear d_in -> d_out, created in that order),
    out_proj (nn.Linear d_out -> d_out, with bias), dropout, and the buffer ``mask``.
    head_dim = d_out // num_heads, and scores are divided by sqrt(head_dim). A d_out that
    num_heads does not divide must raise an error that says so.

    Shapes: forward x (b, num_tokens, d_in) -> (b, num_tokens, d_out)

    Example: torch.manual_seed(123); MultiHeadAttention(3, 2, 6, 0.0, num_heads=2)(batch)
        -> row 1 of each batch item [0.3190, 0.4858]
    """

    def __init__(
        self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int, qkv_bias: bool = False
    ):
        super().__init__()
        ### BEGIN SOLUTION
        if d_out % num_heads != 0:
            raise ValueError(f"d_out must be divisible by num_heads (got d_out={d_out}, num_heads={num_heads})")
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)  # mixes the heads' outputs
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        b, num_tokens, d_in = x.shape
        # (b, num_tokens, d_out) -> (b, num_tokens, num_heads, head_dim) -> (b, num_heads, num_tokens, head_dim)
        keys = self.W_key(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        values = self.W_value(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)

        attn_scores = queries @ keys.transpose(2, 3)  # (b, num_heads, num_tokens, num_tokens)
        attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / self.head_dim**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        context = (attn_weights @ values).transpose(1, 2)  # (b, num_tokens, num_heads, head_dim)
        context = context.contiguous().view(b, num_tokens, self.d_out)  # heads side by side
        return self.out_proj(context)  # (b, num_tokens, d_out)
        ### END SOLUTION
