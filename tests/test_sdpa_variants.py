"""Stage 6's mistakes as outputs (grader.judge.sdpa_variants): a mask mistake beside a given scale ignored is
still named by the mask."""

import torch
import torch.nn.functional as F

from grader.judge.sdpa_variants import sdpa_variants


def hints_matching(output: torch.Tensor, variants: dict[str, torch.Tensor]) -> set[str]:
    return {name.partition(":")[0] for name, value in variants.items() if torch.allclose(value, output.double())}


def test_is_causal_and_a_scale_both_ignored_is_named_by_the_mask():
    rng = torch.Generator().manual_seed(0)
    q, k, v = (torch.rand(2, 4, 6, 8, generator=rng) for _ in range(3))
    neither = F.scaled_dot_product_attention(q, k, v)  # is_causal and scale=0.4 both ignored
    assert hints_matching(neither, sdpa_variants(q, k, v, is_causal=True, scale=0.4)) == {"mask-not-causal"}
    only_scale = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # the scale ignored alone
    assert hints_matching(only_scale, sdpa_variants(q, k, v, is_causal=True, scale=0.4)) == {"scale-ignored"}
    # without a scale given nothing else is ignored: the mask's mistakes alone, once each
    plain = sdpa_variants(q, k, v, is_causal=True)
    assert not any("ignored too" in name for name in plain) and hints_matching(neither, plain) == {"mask-not-causal"}
