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
        key = key.repeat_interleave(query.size(-3) // key.size(-3), dim=-3)
        value = value.repeat_interleave(query.size(-3) // value.size(-3), dim=-3)

    scores = query @ key.transpose(-2, -1)
    keep = torch.ones(L, S, dtype=torch.bool, device=query.device)
    if is_causal:
        keep = keep.tril()
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            keep = keep & attn_mask
        else:
            scores = scores + attn_mask
    scores = scores.masked_fill(~keep, float("-inf"))

    attn = torch.softmax(scores, dim=-1) * scale_factor
    attn = torch.nan_to_num(attn, nan=0.0)
    if dropout_p > 0:
        attn = torch.dropout(attn, dropout_p, train=True)
    return attn @ value
