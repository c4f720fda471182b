"""Stage 6: scaled dot-product attention from primitives, with the semantics of torch's own
F.scaled_dot_product_attention.

Guide: docs/stage6.md
"""

import math

import torch
import torch.nn.functional as F


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    if scale is None:
        scale = 1 / math.sqrt(query.shape[-1])
    if enable_gqa:
        n_rep = query.shape[-3] // key.shape[-3]
        key = key.repeat_interleave(n_rep, dim=-3)
        value = value.repeat_interleave(n_rep, dim=-3)

    # keys (b, num_tokens, d) -> (b, d, num_tokens), as in stage 4
    scores = query @ key.transpose(1, 2) * scale
    L, S = scores.shape[-2], scores.shape[-1]
    if is_causal:
        scores = scores.masked_fill(torch.ones(L, S, dtype=torch.bool, device=scores.device).triu(1), -math.inf)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, -math.inf)
        else:
            scores = scores + attn_mask
    weights = F.softmax(scores, dim=-1).nan_to_num(0.0)
    if dropout_p > 0:
        weights = F.dropout(weights, dropout_p, training=True)
    return weights @ value
