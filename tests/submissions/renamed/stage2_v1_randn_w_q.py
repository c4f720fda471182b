"""Stage 2: self-attention with trainable weights (scaled dot-product attention).

Guide: docs/stage2.md
"""

import torch
import torch.nn as nn


class SelfAttention_v1(nn.Module):
    """Self-attention whose weights are plain matrices: nn.Parameter(torch.rand(d_in, d_out)).

    Create W_query, W_key, W_value in that order: with torch.manual_seed(123) the
    documents' numbers depend on it.

    Shapes: forward x (num_tokens, d_in) -> (num_tokens, d_out)

    Example: torch.manual_seed(123); SelfAttention_v1(3, 2)(inputs)
        -> row 1 [0.2996, 0.8053], row 2 [0.3061, 0.8210]
    """

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        ### BEGIN SOLUTION
        self.W_q = nn.Parameter(torch.randn(d_in, d_out))
        self.W_k = nn.Parameter(torch.randn(d_in, d_out))
        self.W_v = nn.Parameter(torch.randn(d_in, d_out))
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        keys = x @ self.W_k  # (num_tokens, d_out)
        queries = x @ self.W_q
        values = x @ self.W_v
        attn_scores = queries @ keys.T  # (num_tokens, num_tokens)
        # Dividing by sqrt(d_k) keeps the scores' spread independent of d_out.
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        return attn_weights @ values  # (num_tokens, d_out)
        ### END SOLUTION


class SelfAttention_v2(nn.Module):
    """Self-attention whose weights are nn.Linear layers (optionally with bias).

    Create W_query, W_key, W_value in that order, as for SelfAttention_v1.

    Shapes: forward x (num_tokens, d_in) -> (num_tokens, d_out)

    Example: torch.manual_seed(789); SelfAttention_v2(3, 2)(inputs)
        -> row 1 [-0.0739, 0.0713], row 2 [-0.0748, 0.0703]
    """

    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False):
        super().__init__()
        ### BEGIN SOLUTION
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        keys = self.W_key(x)  # (num_tokens, d_out)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.T  # (num_tokens, num_tokens)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        return attn_weights @ values  # (num_tokens, d_out)
        ### END SOLUTION
