"""Known-wrong versions of the exercises' maths: a learner's output that matches one names the mistake.

These are deliberately wrong; the correct results always come from solutions/.
"""

import torch


def attend(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    *,
    divisor: float | None,
    causal: bool = False,
    softmax_dim: int = -1,
    exponentiate: bool = True,
    fill: float = float("-inf"),
    first_masked_diagonal: int = 1,
) -> torch.Tensor:
    """Attention with each ingredient switchable, for (..., n, d) queries, keys and values."""
    scores = queries @ keys.transpose(-2, -1)
    if divisor is not None:
        scores = scores / divisor
    if causal:
        n = scores.shape[-1]
        hidden = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=first_masked_diagonal)
        scores = scores.masked_fill(hidden, fill)
    if exponentiate:
        weights = torch.softmax(scores, dim=softmax_dim)
    else:
        weights = scores / scores.sum(dim=softmax_dim, keepdim=True)
    return weights @ values


def single_head_variants(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, causal: bool
) -> dict[str, torch.Tensor]:
    """Outputs of the usual mistakes in one head of (causal) scaled dot-product attention."""
    d_k = keys.shape[-1]
    right = {"divisor": d_k**0.5, "causal": causal}
    variants = {
        "missing-scaling": attend(queries, keys, values, **{**right, "divisor": None}),
        "wrong-scaling": attend(queries, keys, values, **{**right, "divisor": float(d_k)}),
        "softmax-wrong-dim": attend(queries, keys, values, **right, softmax_dim=-2),
        "weights-swapped": attend(keys, queries, values, **right),
    }
    if causal:
        variants["mask-not-causal"] = attend(queries, keys, values, divisor=d_k**0.5)
        variants["mask-zero-instead-of-inf"] = attend(queries, keys, values, **right, fill=0.0)
        variants["mask-includes-diagonal"] = attend(queries, keys, values, **right, first_masked_diagonal=0)
    if d_k > 1:  # with d_k == 1, sqrt(d_k) == d_k: the variant would equal the right answer
        return variants
    return {hint: v for hint, v in variants.items() if hint != "wrong-scaling"}


def linear(x: torch.Tensor, state: dict[str, torch.Tensor], name: str) -> torch.Tensor:
    bias = state.get(f"{name}.bias")
    out = x @ state[f"{name}.weight"].T
    return out if bias is None else out + bias


def multihead_variants(x: torch.Tensor, state: dict[str, torch.Tensor], num_heads: int) -> dict[str, torch.Tensor]:
    """Outputs of the usual mistakes in the weight-split MultiHeadAttention, for x (b, n, d_in)."""
    b, n, _ = x.shape
    q, k, v = (linear(x, state, name) for name in ("W_query", "W_key", "W_value"))
    d_out = q.shape[-1]
    head_dim = d_out // num_heads

    def split(t: torch.Tensor) -> torch.Tensor:
        return t.view(b, n, num_heads, head_dim).transpose(1, 2)  # (b, heads, n, head_dim)

    def merge(t: torch.Tensor) -> torch.Tensor:
        return t.transpose(1, 2).contiguous().view(b, n, d_out)

    def project(t: torch.Tensor) -> torch.Tensor:
        return linear(t, state, "out_proj")

    right = {"divisor": head_dim**0.5, "causal": True}
    variants = {
        "missing-out-proj": merge(attend(split(q), split(k), split(v), **right)),
        "missing-scaling": project(merge(attend(split(q), split(k), split(v), divisor=None, causal=True))),
        "mask-not-causal": project(merge(attend(split(q), split(k), split(v), divisor=head_dim**0.5))),
        "mask-zero-instead-of-inf": project(merge(attend(split(q), split(k), split(v), **right, fill=0.0))),
        "softmax-wrong-dim": project(merge(attend(split(q), split(k), split(v), **right, softmax_dim=-2))),
    }
    if num_heads > 1:
        variants["wrong-scaling"] = project(merge(attend(split(q), split(k), split(v), divisor=d_out**0.5, causal=True)))

        def split_without_transpose(t: torch.Tensor) -> torch.Tensor:
            return t.reshape(b, num_heads, n, head_dim)

        # Heads split with view(b, num_heads, n, head_dim), merged back the book's way.
        flat = attend(split_without_transpose(q), split_without_transpose(k), split_without_transpose(v), **right)
        variants["heads-split-wrong"] = project(merge(flat))
    return variants
