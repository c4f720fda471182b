"""Stage 6: scaled dot-product attention from primitives, with the semantics of torch's own
F.scaled_dot_product_attention.

Guide: docs/stage6.md
"""

import torch
import torch.nn.functional as F


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    temperature = query.size(-1) ** 0.5 if scale is None else 1 / scale
    if enable_gqa:
        n_rep = query.size(-3) // key.size(-3)
        key = key.repeat_interleave(n_rep, dim=-3)
        value = value.repeat_interleave(n_rep, dim=-3)

    attn = torch.matmul(query / temperature, key.transpose(-2, -1))
    if is_causal:
        causal = torch.ones(attn.size(-2), attn.size(-1), device=attn.device).tril()
        attn = attn.masked_fill(causal == 0, float("-inf"))
    if attn_mask is not None:
        attn = attn.masked_fill(attn_mask == 0, float("-inf"))
    attn = F.softmax(attn, dim=-1)
    attn = attn.nan_to_num(0.0)
    if dropout_p > 0:
        attn = F.dropout(attn, dropout_p, training=True)
    return torch.matmul(attn, value)
