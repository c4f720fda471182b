"""Stage 6: scaled dot-product attention from primitives, with the semantics of torch's own
F.scaled_dot_product_attention.

Guide: docs/stage6.md
"""

import math

import torch
import torch.nn.functional as F


def _softmax_rows(scores):
    """Softmax over the last dim in float32; a row with no finite score gives zeros, not NaN."""
    scores = scores.float()
    row_max = scores.max(dim=-1, keepdim=True).values
    row_max = torch.where(torch.isinf(row_max), torch.zeros_like(row_max), row_max)
    e = torch.exp(scores - row_max)
    total = e.sum(dim=-1, keepdim=True)
    return e / total.clamp_min(1e-30)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    E = query.shape[-1]
    L, S, Ev = query.shape[-2], key.shape[-2], value.shape[-1]
    if scale is None:
        scale = 1.0 / math.sqrt(E)

    if enable_gqa:
        repeats = query.shape[-3] // key.shape[-3]
        key = torch.repeat_interleave(key, repeats, dim=-3)
        value = torch.repeat_interleave(value, repeats, dim=-3)

    batch_shape = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    q = query.expand(*batch_shape, L, E).reshape(-1, L, E)
    k = key.expand(*batch_shape, S, E).reshape(-1, S, E)
    v = value.expand(*batch_shape, S, Ev).reshape(-1, S, Ev)

    bias = torch.zeros(L, S, dtype=torch.float32, device=query.device)
    if is_causal:
        bias = bias.masked_fill(torch.ones(L, S, dtype=torch.bool, device=query.device).triu(1), -math.inf)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            bias = bias.masked_fill(~attn_mask, -math.inf)
        else:
            bias = bias + attn_mask.float()
    bias = bias.expand(*batch_shape, L, S).reshape(-1, L, S)

    outputs = []
    for i in range(q.shape[0]):
        scores = (q[i] @ k[i].T) * scale + bias[i]
        weights = _softmax_rows(scores).to(query.dtype)
        if dropout_p > 0:
            weights = F.dropout(weights, p=dropout_p, training=True)
        outputs.append(weights @ v[i])
    return torch.stack(outputs).reshape(*batch_shape, L, Ev)
