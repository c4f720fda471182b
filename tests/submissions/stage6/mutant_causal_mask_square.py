"""Stage 6: scaled dot-product attention from primitives, with the semantics of torch's own
F.scaled_dot_product_attention.

Guide: docs/stage6.md
"""

import torch
import torch.nn.functional as F


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    if scale is None:
        scale = 1.0 / query.shape[-1] ** 0.5
    if enable_gqa:
        n_rep = query.shape[-3] // key.shape[-3]
        key = key.repeat_interleave(n_rep, dim=-3)
        value = value.repeat_interleave(n_rep, dim=-3)

    scores = torch.matmul(query, key.transpose(-2, -1)) * scale
    num_tokens = query.shape[-2]
    if is_causal:
        mask = torch.triu(torch.ones(num_tokens, num_tokens, device=query.device), diagonal=1).bool()
        scores = scores.masked_fill(mask, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask

    weights = torch.softmax(scores, dim=-1)
    weights = torch.nan_to_num(weights, nan=0.0)
    if dropout_p > 0:
        weights = F.dropout(weights, p=dropout_p, training=True)
    return torch.matmul(weights, value)
