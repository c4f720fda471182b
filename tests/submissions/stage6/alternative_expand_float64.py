"""Stage 6: scaled dot-product attention from primitives, with the semantics of torch's own
F.scaled_dot_product_attention.

Guide: docs/stage6.md
"""

import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    out_dtype = query.dtype
    # work in float64 and round once at the end
    q, k, v = query.double(), key.double(), value.double()
    if enable_gqa:
        n_rep = q.shape[-3] // k.shape[-3]
        k = k.unsqueeze(-3).expand(*k.shape[:-2], n_rep, *k.shape[-2:]).flatten(-4, -3)
        v = v.unsqueeze(-3).expand(*v.shape[:-2], n_rep, *v.shape[-2:]).flatten(-4, -3)

    s = q @ k.mT
    s = s * (scale if scale is not None else 1 / math.sqrt(q.shape[-1]))
    if is_causal:
        future = torch.triu(torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool, device=s.device), diagonal=1)
        s = s.masked_fill(future, -math.inf)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            s = s.masked_fill(attn_mask.logical_not(), -math.inf)
        else:
            s = s + attn_mask.double()

    p = torch.softmax(s, dim=-1)
    p = torch.where(torch.isnan(p), torch.zeros_like(p), p)
    if dropout_p > 0.0:
        p = torch.dropout(p, dropout_p, True)
    return (p @ v).to(out_dtype)
