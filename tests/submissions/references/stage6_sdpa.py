"""Stage 6 written from the brief with primitives: the neighbour stage 8 submissions import (verify.py checks it
against torch's own F.scaled_dot_product_attention first)."""

import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False) -> torch.Tensor:
    num_queries, num_keys = query.size(-2), key.size(-2)
    scale_factor = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    allowed = torch.ones(num_queries, num_keys, dtype=torch.bool, device=query.device)
    bias = torch.zeros(num_queries, num_keys, dtype=query.dtype, device=query.device)
    if is_causal:
        allowed = allowed.tril()
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            allowed = allowed & attn_mask
        else:
            bias = bias + attn_mask
    if enable_gqa:
        key = key.repeat_interleave(query.size(-3) // key.size(-3), dim=-3)
        value = value.repeat_interleave(query.size(-3) // value.size(-3), dim=-3)
    scores = (query @ key.transpose(-2, -1) * scale_factor + bias).masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    # torch 2.13 gives zeros, not NaN, where every key of a row is masked
    weights = weights.masked_fill(scores.isneginf().all(dim=-1, keepdim=True), 0.0)
    if dropout_p > 0:
        weights = torch.dropout(weights, dropout_p, train=True)
    return weights @ value
