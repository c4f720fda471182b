"""Stage 6: scaled dot-product attention from primitives, with the semantics of torch's own
F.scaled_dot_product_attention.

Guide: docs/stage6.md
"""

import math

import torch
import torch.nn.functional as F


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    L, S = query.size(-2), key.size(-2)
    scale_factor = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    if enable_gqa:
        key = key.repeat_interleave(query.size(-3) // key.size(-3), dim=-3)
        value = value.repeat_interleave(query.size(-3) // value.size(-3), dim=-3)

    scores = query @ key.transpose(-2, -1) * scale_factor
    if is_causal:
        scores = scores.masked_fill(torch.ones(L, S, dtype=torch.bool, device=query.device).triu(1), -math.inf)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, -math.inf)
        else:
            scores = scores + attn_mask

    weights = F.softmax(scores, dim=-1).nan_to_num(0.0)
    out = weights @ value
    if dropout_p > 0:
        out = F.dropout(out, p=dropout_p, training=True)
    return out
