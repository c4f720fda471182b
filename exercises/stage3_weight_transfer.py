# Stage 3 exercise: replace each `raise NotImplementedError(...)` with your code.
"""Stage 3: move the weights of a SelfAttention_v2 into a SelfAttention_v1 (book exercise 3.1).

Guide: docs/stage3.md
"""

import torch

from exercises.stage2_self_attention import SelfAttention_v1, SelfAttention_v2


def transfer_weights_v2_to_v1(sa_v2: SelfAttention_v2, sa_v1: SelfAttention_v1) -> SelfAttention_v1:
    """Put the query, key and value weights of sa_v2 into sa_v1 and return sa_v1.

    Required: afterwards sa_v1(x) equals sa_v2(x) for every x, and sa_v1 still holds its
    weights as nn.Parameter named W_query, W_key, W_value. nn.Linear stores its weight as
    (d_out, d_in) and computes x @ weight.T, while SelfAttention_v1 computes x @ W with
    W of shape (d_in, d_out). The book's answer (nn.Parameter(sa_v2.W_query.weight.T))
    earns full marks.

    Advice, shown as notes (0 points unless your instructor prices them): copy in place
    (copy_ under torch.no_grad()) rather than making new parameters that share v2's memory;
    and since SelfAttention_v1 has no bias, raise a ValueError that says so for a
    SelfAttention_v2 built with qkv_bias=True.

    Example: torch.manual_seed(123); sa_v1 = SelfAttention_v1(3, 2); sa_v2 = SelfAttention_v2(3, 2)
        x = torch.rand(2, 3); after the transfer sa_v1(x) -> [[0.3038, 0.2414], [0.3047, 0.2418]]
    """
    # YOUR CODE HERE
    raise NotImplementedError('transfer_weights_v2_to_v1 is not implemented yet: write it here, then run `make grade` (guide: docs/stage3.md)')
