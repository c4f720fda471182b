"""Outputs of the usual mistakes in stage 6's scaled_dot_product_attention: what a learner's result is matched
against to name a mistake (grader.judge.verdict.proven_mistake)."""

from typing import cast

import torch
import torch.nn.functional as F

# The largest score whose exp() float32 holds (exp(88.72) overflows): beyond it a softmax must shift its scores.
OVERFLOW = 88.0


def sdpa_variants(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> dict[str, torch.Tensor]:
    """Outputs of the usual mistakes in stage 6's scaled_dot_product_attention, in float64.

    Most are torch's own F.scaled_dot_product_attention on what the mistake changes (the mask, the
    scale, the key and value heads); only a softmax over the queries and a float mask multiplied
    in are computed by hand. A mistake that leaves a query no key to attend to is listed twice:
    with that row as torch gives it (zeros), and as NaN, the softmax of a row of -inf.
    """
    q, k, v = (t.detach().to(torch.float64) for t in (query, key, value))
    float_mask = attn_mask is not None and attn_mask.dtype != torch.bool
    mask = cast(torch.Tensor, attn_mask).to(torch.float64) if float_mask else attn_mask
    L, S, E, Ev = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    factor = 1 / E**0.5 if scale is None else scale
    lower = torch.ones(L, S, dtype=torch.bool).tril()  # top-left causal: query i sees keys 0..i
    right_mask = lower if is_causal else mask

    def run(mask=right_mask, scale=factor, q=q, k=k, v=v, gqa=enable_gqa) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=gqa)

    def with_blind_rows(name: str, mask: torch.Tensor, **options) -> dict[str, torch.Tensor]:
        """The mistake's output under ``mask``; also with NaN in the rows it leaves no key."""
        output, blind = run(mask=mask, **options), _blind_rows(mask)
        if not blind.any():
            return {name: output}
        return {
            name: output,
            f"{name}:the queries left without a key come out NaN": output.masked_fill(blind, torch.nan),
        }

    def mask_mistakes(f: float) -> dict[str, torch.Tensor]:
        """The mask's mistakes, each with its scores scaled by ``f``."""
        found: dict[str, torch.Tensor] = {}
        if is_causal:
            found["mask-not-causal"] = run(mask=None, scale=f)
            found.update(
                with_blind_rows("mask-includes-diagonal", torch.ones(L, S, dtype=torch.bool).tril(-1), scale=f)
            )
            found.update(with_blind_rows("mask-wrong-triangle", torch.ones(L, S, dtype=torch.bool).triu(), scale=f))
            if L != S:
                below = torch.ones(L, S, dtype=torch.bool).tril(diagonal=S - L)
                found.update(with_blind_rows("causal-bottom-right", below, scale=f))
        if mask is not None and not float_mask:
            found.update(with_blind_rows("bool-mask-inverted", ~mask, scale=f))
        if float_mask:
            assert isinstance(mask, torch.Tensor)  # a float mask was given
            found["float-mask-multiplied"] = _mask_multiplied(q, k, v, mask, f, enable_gqa)
            found["mask-before-scaling"] = run(mask=mask * f, scale=f)
            if not (mask.isneginf() | (mask == 0)).all():  # finite values to add: used only to hide the -inf keys
                found.update(with_blind_rows("float-mask-not-added", mask.isneginf().logical_not(), scale=f))
            # cast with .bool(), as a bool mask: a 0 (no change) hides its key, -inf and any other value keep theirs
            cast_to_bool = "the float mask is cast to bool, so a 0 (add nothing) hides its key and -inf keeps it"
            found.update(with_blind_rows(f"float-mask-not-added:{cast_to_bool}", mask != 0, scale=f))
        return found

    variants: dict[str, torch.Tensor] = {}
    if scale is None:
        variants["missing-scaling"] = run(scale=1.0)
        variants[f"wrong-scaling:the scores are divided by E = {E} itself"] = run(scale=1.0 / E)
        # the default read from another size than the queries' and keys' E: each where it differs from E
        others = {f"Ev = {Ev}, the values' width": Ev, f"S = {S}, the keys' number": S, f"L = {L}, the queries'": L}
        for label, size in others.items():
            if size != E:
                variants[f"wrong-scaling:the scores are divided by sqrt({label}), not sqrt(E) = sqrt({E})"] = run(
                    scale=1.0 / size**0.5
                )
    elif scale == 0:  # `scale or default`: 0.0 taken for no scale
        variants["scale-zero-dropped"] = run(scale=None)
    else:
        variants["scale-ignored"] = run(scale=None)
        if scale != 0:  # dividing by a zero scale is no mistake anyone's code could make and still run
            variants[f"scale-as-divisor:the scores are divided by scale = {scale:g}"] = run(scale=1.0 / scale)
    variants["scaling-after-softmax"] = run(scale=1.0) * factor
    variants["softmax-wrong-dim"] = _softmax_over_queries(q, k, v, right_mask, factor, enable_gqa)
    if q.shape == k.shape:
        variants["weights-swapped"] = run(q=k, k=q)
    variants.update(mask_mistakes(factor))
    if scale:  # a mask mistake beside a given scale ignored: named by the mask, its detail saying both
        ignored = f"the scale = {scale:g} given is ignored too"
        for name, output in mask_mistakes(1 / E**0.5).items():
            hint, _, detail = name.partition(":")
            variants.setdefault(f"{hint}:{f'{detail}; ' if detail else ''}{ignored}", output)
    if enable_gqa and q.shape[-3] != k.shape[-3]:
        group = q.shape[-3] // k.shape[-3]
        tile = [1] * (k.dim() - 3) + [group, 1, 1]
        variants["gqa-tiled"] = run(k=k.repeat(*tile), v=v.repeat(*tile), gqa=False)
    if (q @ _shared_heads(q, k, enable_gqa).transpose(-2, -1) * factor).amax() > OVERFLOW:
        variants["softmax-overflow"] = _unshifted_softmax(query, key, value, right_mask, factor, enable_gqa)
    if right_mask is not None:
        blind = _blind_rows(right_mask)
        if blind.any():
            right = run()
            variants["masked-row-nan"] = right.masked_fill(blind, torch.nan)
            if right_mask.dtype == torch.bool:  # hidden with a finite fill (-1e9): an even spread over every key
                evenly = _shared_heads(q, v, enable_gqa).mean(dim=-2, keepdim=True)
                variants["mask-fill-finite"] = torch.where(blind, evenly, right)
    return variants


def _unshifted_softmax(query, key, value, mask, factor: float, enable_gqa: bool) -> torch.Tensor:
    """exp(scores) / sum, without the largest score subtracted first, in the inputs' own dtype: where a score's
    exp() overflows to inf, its row comes out NaN."""
    scores = query @ _shared_heads(query, key, enable_gqa).transpose(-2, -1) * factor
    if mask is not None:
        mask = mask.to(scores.dtype) if mask.dtype != torch.bool else mask
        scores = scores.masked_fill(~mask, -torch.inf) if mask.dtype == torch.bool else scores + mask
    exp = scores.exp()
    return (exp / exp.sum(dim=-1, keepdim=True) @ _shared_heads(query, value, enable_gqa)).to(torch.float64)


def _blind_rows(mask: torch.Tensor) -> torch.Tensor:
    """(..., L, 1): the queries that ``mask`` (bool: True takes part; float: added) leaves no key."""
    hidden = ~mask if mask.dtype == torch.bool else mask.isneginf()
    return hidden.all(dim=-1, keepdim=True)


def _shared_heads(query: torch.Tensor, t: torch.Tensor, enable_gqa: bool) -> torch.Tensor:
    """Keys or values with each head repeated for its group of consecutive query heads, as GQA reads them."""
    group = query.shape[-3] // t.shape[-3] if enable_gqa else 1
    return t.repeat_interleave(group, dim=-3) if group > 1 else t


def _softmax_over_queries(q, k, v, mask, factor: float, enable_gqa: bool) -> torch.Tensor:
    scores = q @ _shared_heads(q, k, enable_gqa).transpose(-2, -1) * factor
    if mask is not None:
        scores = scores.masked_fill(~mask, -torch.inf) if mask.dtype == torch.bool else scores + mask
    return torch.softmax(scores, dim=-2) @ _shared_heads(q, v, enable_gqa)


def _mask_multiplied(q, k, v, mask: torch.Tensor, factor: float, enable_gqa: bool) -> torch.Tensor:
    scores = q @ _shared_heads(q, k, enable_gqa).transpose(-2, -1) * factor
    return torch.softmax(scores * mask, dim=-1) @ _shared_heads(q, v, enable_gqa)
