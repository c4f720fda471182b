"""A transfer that moves nothing."""

from exercises.stage2_self_attention import SelfAttention_v1, SelfAttention_v2


def transfer_weights_v2_to_v1(sa_v2: SelfAttention_v2, sa_v1: SelfAttention_v1) -> SelfAttention_v1:
    return sa_v1
