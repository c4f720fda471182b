"""Stage 7 (bonus): multi-head attention with a KV cache, for generating one token after another.

Guide: docs/stage7.md
"""

import torch

from solutions.stage5_multihead_attention import MultiHeadAttention


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
        ### BEGIN SOLUTION
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        self.reset_cache()
        ### END SOLUTION

    def reset_cache(self) -> None:
        """Empty the cache: the next forward with use_cache=True starts a new sequence."""
        ### BEGIN SOLUTION
        self.cache_k = None
        self.cache_v = None
        ### END SOLUTION

    def forward(self, x: torch.Tensor, use_cache: bool = False) -> torch.Tensor:
        ### BEGIN SOLUTION
        b, num_tokens, d_in = x.shape
        # (b, num_tokens, d_out) -> (b, num_tokens, num_heads, head_dim) -> (b, num_heads, num_tokens, head_dim)
        keys = self.W_key(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        values = self.W_value(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)

        start = 0  # how many tokens come before this chunk: its first row of the causal mask
        if use_cache:
            if self.cache_k is not None:
                start = self.cache_k.shape[2]
            if start + num_tokens > self.mask.shape[0]:
                raise ValueError(f"the KV cache holds {start} tokens: {num_tokens} more would pass "
                                 f"context_length = {self.mask.shape[0]} (call reset_cache() to start again)")
            if self.cache_k is not None:
                keys = torch.cat([self.cache_k, keys], dim=2)  # (b, num_heads, start + num_tokens, head_dim)
                values = torch.cat([self.cache_v, values], dim=2)
            self.cache_k, self.cache_v = keys, values

        attn_scores = queries @ keys.transpose(2, 3)  # (b, num_heads, num_tokens, start + num_tokens)
        # The chunk's queries are tokens start..start + num_tokens - 1 of the sequence: their rows of the mask.
        attn_scores.masked_fill_(self.mask.bool()[start:start + num_tokens, :start + num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / self.head_dim**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        context = (attn_weights @ values).transpose(1, 2)  # (b, num_tokens, num_heads, head_dim)
        context = context.contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context)  # (b, num_tokens, d_out)
        ### END SOLUTION
