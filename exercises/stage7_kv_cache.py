# Stage 7 exercise: replace each `raise NotImplementedError(...)` with your code.
"""Stage 7 (bonus): multi-head attention with a KV cache, for generating one token after another.

Guide: docs/stage7.md
"""

import torch

from exercises.stage5_multihead_attention import MultiHeadAttention


class MultiHeadAttentionKV(MultiHeadAttention):
    """Stage 5's MultiHeadAttention that can keep the keys and values of the tokens it has seen.

    The parameters are stage 5's (W_query, W_key, W_value, out_proj, created in that order, so
    one seed gives both classes the same weights), with the buffer ``mask``. ``cache_k`` and
    ``cache_v`` are None while the cache is empty, else (b, num_heads, tokens so far, head_dim):
    the keys and values of every token fed with use_cache=True since the last reset_cache().

    forward(x, use_cache=False) is stage 5's causal forward and leaves the cache alone. With
    use_cache=True, x holds the tokens that follow the cached ones: their keys and values are
    appended to the cache, and their queries attend to every cached token and to the chunk's
    own tokens up to themselves (the chunk's rows of the causal mask start at the number of
    tokens already cached). Feeding a sequence in pieces thus gives the rows of its full causal
    forward. A cache that would grow past context_length raises ValueError.

    Write forward whole, for use_cache=False too: while this stage is graded, stage 5's class is a
    stand-in whose forward does not run (docs/stage7.md, "Building on stage 5").

    Shapes: forward x (b, num_tokens, d_in) -> (b, num_tokens, d_out)

    Example: torch.manual_seed(123); m = MultiHeadAttentionKV(3, 2, 6, 0.0, num_heads=2);
        torch.cat([m(batch[:, i:i + 1], use_cache=True) for i in range(6)], dim=1)
        -> the book's multi-head output: row 1 of each batch item [0.3190, 0.4858]
    """

    def __init__(
        self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int, qkv_bias: bool = False
    ):
        # YOUR CODE HERE
        raise NotImplementedError('MultiHeadAttentionKV.__init__ is not implemented yet: write it here, then run `make grade` (guide: docs/stage7.md)')

    def reset_cache(self) -> None:
        """Empty the cache: the next forward with use_cache=True starts a new sequence."""
        # YOUR CODE HERE
        raise NotImplementedError('MultiHeadAttentionKV.reset_cache is not implemented yet: write it here, then run `make grade` (guide: docs/stage7.md)')

    def forward(self, x: torch.Tensor, use_cache: bool = False) -> torch.Tensor:
        # YOUR CODE HERE
        raise NotImplementedError('MultiHeadAttentionKV.forward is not implemented yet: write it here, then run `make grade` (guide: docs/stage7.md)')
