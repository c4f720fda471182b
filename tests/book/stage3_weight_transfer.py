# Exercise 3.1's solution, pasted into the stage's function as a learner would.
import torch
import torch.nn as nn

from exercises.stage2_self_attention import SelfAttention_v1, SelfAttention_v2


def transfer_weights_v2_to_v1(sa_v2, sa_v1):
    # Transfer weights from v2 to v1 (TRANSPOSE is the key!)
    sa_v1.W_query = nn.Parameter(sa_v2.W_query.weight.T)
    sa_v1.W_key = nn.Parameter(sa_v2.W_key.weight.T)
    sa_v1.W_value = nn.Parameter(sa_v2.W_value.weight.T)
    return sa_v1
