"""What the visible checks judge with: the documented structure of each module, and torch's attention.

Visible checks ship to students (make release) without solutions/, so they never call reference
code. A seeded module must hold the documents' weights: the classes here create exactly the
documented attributes, in the documented order (the stand-ins the workers use, and the
wrapper), and their forward is not the documented one. MultiHeadAttentionKV (stage 7) holds
stage 5's parameters. Outputs are computed with torch's own
scaled_dot_product_attention, which learners may not use and the grader may.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from grader.runner.standins import StandInCausalAttention as CausalAttention
from grader.runner.standins import StandInMultiHeadAttention as MultiHeadAttention
from grader.runner.standins import StandInSelfAttention_v1 as SelfAttention_v1
from grader.runner.standins import StandInSelfAttention_v2 as SelfAttention_v2


class MultiHeadAttentionWrapper(nn.Module):
    def __init__(
        self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int, qkv_bias: bool = False
    ):
        super().__init__()
        self.heads = nn.ModuleList(
            [CausalAttention(d_in, d_out, context_length, dropout, qkv_bias) for _ in range(num_heads)]
        )


DOCUMENTED = {
    "SelfAttention_v1": SelfAttention_v1,
    "SelfAttention_v2": SelfAttention_v2,
    "CausalAttention": CausalAttention,
    "MultiHeadAttentionWrapper": MultiHeadAttentionWrapper,
    "MultiHeadAttention": MultiHeadAttention,
    "MultiHeadAttentionKV": MultiHeadAttention,
}


def mask_and_renormalize(attn_weights: torch.Tensor) -> torch.Tensor:
    """Stage 4's documented function, on (..., n, n) weights: zero above the diagonal, each row renormalised."""
    n = attn_weights.shape[-1]
    kept = attn_weights * torch.tril(torch.ones(n, n, dtype=attn_weights.dtype))
    return kept / kept.sum(dim=-1, keepdim=True)


def causal_softmax(attn_scores: torch.Tensor, d_k: int) -> torch.Tensor:
    """Stage 4's documented function, on (..., n, n) scores: -inf above the diagonal, then the scaled softmax."""
    n = attn_scores.shape[-1]
    future = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
    return torch.softmax(attn_scores.masked_fill(future, -torch.inf) / d_k**0.5, dim=-1)


def attention(
    x: torch.Tensor, weights: dict[str, torch.Tensor], prefix: str = "", causal: bool = False, transposed: bool = False
) -> torch.Tensor:
    """Scaled dot-product attention of x with the projections W_query, W_key, W_value in ``weights``.

    ``transposed``: nn.Linear's (d_out, d_in) weights, with optional biases; else (d_in, d_out) matrices.
    """

    def project(name: str) -> torch.Tensor:
        if transposed:
            return x @ weights[f"{prefix}{name}.weight"].T + weights.get(f"{prefix}{name}.bias", 0)
        return x @ weights[f"{prefix}{name}"]

    return F.scaled_dot_product_attention(project("W_query"), project("W_key"), project("W_value"), is_causal=causal)


def output(cls: str, args: list, state: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """What the documented ``cls(*args)`` holding ``state`` returns for ``x`` in evaluation mode."""
    if cls == "SelfAttention_v1":
        return attention(x, state)
    if cls in ("SelfAttention_v2", "CausalAttention"):
        return attention(x, state, causal=cls == "CausalAttention", transposed=True)
    if cls != "MultiHeadAttention":
        raise ValueError(f"no documented forward for {cls}")
    b, n, _ = x.shape
    num_heads = args[4]

    def heads(name: str) -> torch.Tensor:  # (b, n, d_out) -> (b, heads, n, head_dim)
        projected = x @ state[f"{name}.weight"].T + state.get(f"{name}.bias", 0)
        return projected.view(b, n, num_heads, -1).transpose(1, 2)

    context = F.scaled_dot_product_attention(heads("W_query"), heads("W_key"), heads("W_value"), is_causal=True)
    merged = context.transpose(1, 2).reshape(b, n, -1)
    return merged @ state["out_proj.weight"].T + state["out_proj.bias"]
