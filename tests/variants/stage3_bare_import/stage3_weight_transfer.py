"""Stage 3: move the weights of a SelfAttention_v2 into a SelfAttention_v1 (book exercise 3.1).

Guide: docs/stage3.md
"""

import torch

from stage2_self_attention import SelfAttention_v1, SelfAttention_v2


def transfer_weights_v2_to_v1(sa_v2: SelfAttention_v2, sa_v1: SelfAttention_v1) -> SelfAttention_v1:
    """Copy the query, key and value weights of sa_v2 into sa_v1, in place, and return sa_v1."""
    pairs = [
        (sa_v1.W_query, sa_v2.W_query),
        (sa_v1.W_key, sa_v2.W_key),
        (sa_v1.W_value, sa_v2.W_value),
    ]
    for _, linear in pairs:
        if linear.bias is not None:
            raise ValueError(
                "sa_v2 was built with qkv_bias=True: SelfAttention_v1 has no bias, "
                "so its weights cannot reproduce sa_v2 exactly"
            )
    with torch.no_grad():
        for param, linear in pairs:
            # nn.Linear keeps (d_out, d_in); v1 wants (d_in, d_out)
            param.copy_(linear.weight.T)
    return sa_v1
