"""Stage 6: scaled dot-product attention from primitives, with the semantics of torch's own
F.scaled_dot_product_attention.

Guide: docs/stage6.md
"""

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    if scale is None:
        scale = query.shape[-1] ** -0.5
    num_q_heads = query.shape[-3] if query.dim() >= 3 else 1
    num_kv_heads = key.shape[-3] if key.dim() >= 3 else 1
    grouped = enable_gqa and num_q_heads != num_kv_heads

    if grouped:
        # (..., Hq, L, E) -> (..., Hkv, Hq/Hkv, L, E): consecutive query heads share one key head
        q = query.unflatten(-3, (num_kv_heads, num_q_heads // num_kv_heads))
        scores = torch.einsum("...grle,...gse->...grls", q, key) * scale
        scores = scores.flatten(-4, -3)
    else:
        scores = torch.einsum("...le,...se->...ls", query, key) * scale

    n_q, n_k = scores.shape[-2], scores.shape[-1]
    if is_causal:
        q_pos = torch.arange(n_q, device=query.device).unsqueeze(-1)
        k_pos = torch.arange(n_k, device=query.device).unsqueeze(0)
        scores = torch.where(k_pos <= q_pos, scores, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = torch.where(attn_mask, scores, float("-inf"))
        else:
            scores = scores + attn_mask

    weights = torch.softmax(scores, dim=-1)
    has_a_key = (scores != float("-inf")).any(dim=-1, keepdim=True)
    weights = torch.where(has_a_key, weights, 0.0)

    if dropout_p > 0:
        keep = torch.rand_like(weights) >= dropout_p
        weights = weights * keep / (1 - dropout_p)

    if grouped:
        weights = weights.unflatten(-3, (num_kv_heads, num_q_heads // num_kv_heads))
        out = torch.einsum("...grls,...gsv->...grlv", weights, value)
        return out.flatten(-4, -3)
    return torch.einsum("...ls,...sv->...lv", weights, value)
