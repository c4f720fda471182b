"""Stage 6: scaled dot-product attention from primitives, with the semantics of torch's own
F.scaled_dot_product_attention.

Guide: docs/stage6.md
"""

import torch
import torch.nn.functional as F


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    if scale is None:
        scale = query.size(-1) ** -0.5
    if enable_gqa:
        n_rep = query.size(-3) // key.size(-3)
        key = key.repeat_interleave(n_rep, dim=-3)
        value = value.repeat_interleave(n_rep, dim=-3)

    attn = torch.matmul(query, key.transpose(-2, -1)) * scale
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        attn = attn + attn_mask
    keep = torch.ones(attn.shape[-2:], dtype=torch.bool, device=attn.device)
    if is_causal:
        keep = keep.tril()
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        keep = keep & attn_mask
    # a large negative number instead of -inf, so that softmax never sees a row of -inf
    attn = attn.masked_fill(~keep, -1e9)
    attn = F.softmax(attn, dim=-1)
    if dropout_p > 0:
        attn = F.dropout(attn, dropout_p, training=True)
    return torch.matmul(attn, value)
