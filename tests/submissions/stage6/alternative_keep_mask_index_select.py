"""Stage 6: scaled dot-product attention from primitives, with the semantics of torch's own
F.scaled_dot_product_attention.

Guide: docs/stage6.md
"""

import torch
import torch.nn as nn


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    num_queries, num_keys = query.size(-2), key.size(-2)
    factor = scale if scale is not None else query.size(-1) ** -0.5

    if enable_gqa:
        group_size = query.size(-3) // key.size(-3)
        kv_head = torch.arange(query.size(-3), device=query.device) // group_size
        key = key.index_select(-3, kv_head)
        value = value.index_select(-3, kv_head)

    scores = torch.matmul(query, key.transpose(-1, -2)) * factor

    # one boolean "may attend" mask; a float mask is added, and its -inf entries count as masked too
    keep = torch.ones(num_queries, num_keys, dtype=torch.bool, device=query.device)
    if is_causal:
        keep = torch.tril(keep)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            keep = keep & attn_mask
        else:
            scores = scores + attn_mask
            keep = keep & (attn_mask != float("-inf"))
    keep = keep.expand_as(scores)

    scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1).masked_fill(~keep, 0.0)

    if dropout_p > 0:
        weights = nn.Dropout(p=dropout_p)(weights)
    return torch.matmul(weights, value)
