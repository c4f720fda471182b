"""Stage 6: scaled dot-product attention from primitives, with the semantics of torch's own
F.scaled_dot_product_attention.

Guide: docs/stage6.md
"""

import math

import torch
import torch.nn.functional as F


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    d_k = query.shape[-1]
    scale_factor = scale if scale is not None else 1 / math.sqrt(d_k)
    if enable_gqa:
        groups = query.shape[-3] // key.shape[-3]
        key = torch.repeat_interleave(key, groups, dim=-3)
        value = torch.repeat_interleave(value, groups, dim=-3)

    scores = torch.einsum("...qd,...kd->...qk", query, key) * scale_factor
    keep = torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device)
    if is_causal:
        keep = torch.tril(keep)
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        keep = keep & attn_mask
    scores = torch.where(keep, scores, float("-inf"))

    weights = F.softmax(scores, dim=-1)
    weights = torch.where(keep.any(dim=-1, keepdim=True), weights, 0.0)
    if dropout_p > 0:
        weights = F.dropout(weights, dropout_p)
    return torch.einsum("...qk,...kd->...qd", weights, value)
