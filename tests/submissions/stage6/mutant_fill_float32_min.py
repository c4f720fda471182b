"""Stage 6: scaled dot-product attention from primitives, with the semantics of torch's own
F.scaled_dot_product_attention.

Guide: docs/stage6.md
"""

import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    L, S = query.shape[-2], key.shape[-2]
    scale_factor = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    if enable_gqa:
        key = key.repeat_interleave(query.shape[-3] // key.shape[-3], dim=-3)
        value = value.repeat_interleave(query.shape[-3] // value.shape[-3], dim=-3)

    scores = query @ key.transpose(-2, -1) * scale_factor
    keep = torch.ones(L, S, dtype=torch.bool, device=query.device)
    if is_causal:
        keep = keep.tril()
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            keep = keep & attn_mask
        else:
            scores = scores + attn_mask
            keep = keep & ~torch.isneginf(attn_mask)
    keep = keep.expand_as(scores)

    # the most negative float instead of -inf keeps softmax free of NaN
    scores = scores.masked_fill(~keep, torch.finfo(torch.float32).min)
    weights = torch.softmax(scores, dim=-1) * keep
    if dropout_p > 0:
        weights = torch.dropout(weights, dropout_p, train=True)
    return weights @ value
