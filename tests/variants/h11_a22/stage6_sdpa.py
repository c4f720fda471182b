"""Stage 6: SDPA with the softmax written out (max subtraction), computed in at least float32."""

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class _Shape:
    L: int
    S: int
    E: int

    @classmethod
    def of(cls, query: torch.Tensor, key: torch.Tensor) -> "_Shape":
        return cls(L=query.shape[-2], S=key.shape[-2], E=query.shape[-1])


def _masked_softmax(scores: torch.Tensor) -> torch.Tensor:
    row_max = scores.amax(dim=-1, keepdim=True)
    dead = torch.isneginf(row_max)  # a row whose every key is masked
    e = torch.exp(scores - row_max.masked_fill(dead, 0.0))
    denom = e.sum(dim=-1, keepdim=True).masked_fill(dead, 1.0)  # 0 / 1 = 0 for dead rows
    return e / denom


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
    shp = _Shape.of(query, key)
    factor = (1.0 / math.sqrt(shp.E)) if scale is None else float(scale)
    work = torch.promote_types(query.dtype, torch.float32)  # bfloat16 -> float32, float64 stays

    q, k, v = query.to(work), key.to(work), value.to(work)
    if enable_gqa:
        rep = q.shape[-3] // k.shape[-3]
        k = k.repeat_interleave(rep, dim=-3)
        v = v.repeat_interleave(rep, dim=-3)

    scores = torch.matmul(q, k.transpose(-1, -2)).mul(factor)
    if is_causal:
        allowed = torch.ones(shp.L, shp.S, dtype=torch.bool, device=scores.device).tril()
        scores = scores.masked_fill(~allowed, -torch.inf)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(attn_mask.logical_not(), -torch.inf)
        else:
            scores = scores + attn_mask.to(work)

    weights = _masked_softmax(scores)
    if dropout_p > 0.0:
        weights = torch.dropout(weights, dropout_p, True)
    return torch.matmul(weights, v).to(query.dtype)


if __name__ == "__main__":
    eye = torch.eye(2)
    for kw in ({}, {"is_causal": True}, {"attn_mask": torch.tensor([[True, False], [False, False]])}):
        print(kw, scaled_dot_product_attention(eye, eye, eye, **kw))
