# Stage 6: log-sum-exp softmax, GQA with expand + flatten, dropout drawn with bernoulli.
import math

import torch


def _repeat_kv(t: torch.Tensor, group: int) -> torch.Tensor:
    """(..., H_kv, S, D) -> (..., H_kv * group, S, D), each head's copies side by side."""
    if group == 1:
        return t
    t = t.unsqueeze(-3)  # (..., H_kv, 1, S, D)
    shape = list(t.shape)
    shape[-3] = group
    return t.expand(shape).flatten(-4, -3)


def _causal_hidden(L: int, S: int, device) -> torch.Tensor:
    rows = torch.arange(L, device=device)[:, None]
    cols = torch.arange(S, device=device)[None, :]
    return cols > rows  # True above the top-left diagonal


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    if enable_gqa:
        hq, hkv = query.shape[-3], key.shape[-3]
        if hq % hkv:
            raise ValueError(f"{hq} query heads cannot be shared evenly by {hkv} key/value heads")
        key, value = _repeat_kv(key, hq // hkv), _repeat_kv(value, hq // hkv)

    # log-sum-exp needs more than bfloat16's 8 bits of mantissa: work in float32 at least
    acc = torch.promote_types(query.dtype, torch.float32)
    scores = torch.matmul(query.to(acc), key.to(acc).transpose(-2, -1)) * scale
    if is_causal:
        scores = scores.masked_fill(_causal_hidden(query.shape[-2], key.shape[-2], query.device), -math.inf)
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, -math.inf) if attn_mask.dtype is torch.bool else scores + attn_mask

    lse = torch.logsumexp(scores, dim=-1, keepdim=True)
    empty = torch.isneginf(lse)  # every key hidden
    weights = torch.exp(scores - lse.masked_fill(empty, 0.0))  # exp(-inf - 0) = 0 in those rows

    if dropout_p > 0:
        if dropout_p >= 1:
            weights = torch.zeros_like(weights)
        else:
            keep = torch.bernoulli(torch.full_like(weights, 1.0 - dropout_p))
            weights = weights * keep / (1.0 - dropout_p)
    return (weights @ value.to(acc)).to(query.dtype)
