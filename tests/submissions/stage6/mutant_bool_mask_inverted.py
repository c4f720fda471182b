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
    attn_bias = torch.zeros(L, S, dtype=query.dtype, device=query.device)
    if is_causal:
        upper = torch.ones(L, S, dtype=torch.bool, device=query.device).triu(diagonal=1)
        attn_bias = attn_bias.masked_fill(upper, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            # True marks the positions to hide, as in the causal mask above
            attn_bias = attn_bias.masked_fill(attn_mask, float("-inf"))
        else:
            attn_bias = attn_bias + attn_mask
    if enable_gqa:
        key = key.repeat_interleave(query.size(-3) // key.size(-3), dim=-3)
        value = value.repeat_interleave(query.size(-3) // value.size(-3), dim=-3)
    attn_weight = query @ key.transpose(-2, -1) * scale_factor
    attn_weight = torch.softmax(attn_weight + attn_bias, dim=-1)
    attn_weight = torch.nan_to_num(attn_weight)
    if dropout_p > 0:
        attn_weight = torch.dropout(attn_weight, dropout_p, train=True)
    return attn_weight @ value
