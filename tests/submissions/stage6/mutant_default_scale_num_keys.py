"""Stage 6: scaled dot-product attention from primitives, with the semantics of torch's own
F.scaled_dot_product_attention.

Guide: docs/stage6.md
"""

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    if enable_gqa:
        n_rep = query.shape[-3] // key.shape[-3]
        key = key.repeat_interleave(n_rep, dim=-3)
        value = value.repeat_interleave(n_rep, dim=-3)

    d_k = key.shape[-2]
    if scale is None:
        scale = d_k ** -0.5
    scores = query @ key.transpose(-2, -1) * scale

    num_q, num_k = scores.shape[-2], scores.shape[-1]
    if is_causal:
        causal = torch.tril(torch.ones(num_q, num_k, dtype=torch.bool, device=scores.device))
        scores = torch.where(causal, scores, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = torch.where(attn_mask, scores, float("-inf"))
        else:
            scores = scores + attn_mask

    weights = torch.softmax(scores, dim=-1)
    weights = torch.where(torch.isnan(weights), 0.0, weights)
    if dropout_p > 0:
        weights = torch.dropout(weights, dropout_p, train=True)
    return weights @ value
