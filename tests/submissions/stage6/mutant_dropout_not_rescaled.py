"""Stage 6: scaled dot-product attention from primitives, with the semantics of torch's own
F.scaled_dot_product_attention.

Guide: docs/stage6.md
"""

import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    L, S = query.size(-2), key.size(-2)
    scale_factor = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    if enable_gqa:
        n_rep = query.size(-3) // key.size(-3)
        key = key.repeat_interleave(n_rep, dim=-3)
        value = value.repeat_interleave(n_rep, dim=-3)

    scores = torch.matmul(query, key.transpose(-2, -1)) * scale_factor
    allowed = torch.ones(L, S, dtype=torch.bool, device=query.device)
    if is_causal:
        allowed = torch.tril(allowed)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            allowed = allowed & attn_mask
        else:
            scores = scores + attn_mask
    scores = scores.masked_fill(~allowed, float("-inf"))

    weights = torch.softmax(scores, dim=-1)
    weights = torch.nan_to_num(weights, nan=0.0)
    if dropout_p > 0:
        # drop each weight with probability dropout_p
        drop = torch.rand_like(weights) < dropout_p
        weights = weights.masked_fill(drop, 0.0)
    return torch.matmul(weights, value)
