"""Stage 7 (bonus): multi-head attention with a KV cache, for generating one token after another.

Guide: docs/stage7.md
"""

import torch

from exercises.stage5_multihead_attention import MultiHeadAttention


class MultiHeadAttentionKV(MultiHeadAttention):
    """Stage 5's MultiHeadAttention that can keep the keys and values of the tokens it has seen.

    Constructor order here: (d_in, d_out, context_length, num_heads, dropout, qkv_bias=False).
    """

    def __init__(
        self, d_in: int, d_out: int, context_length: int, num_heads: int, dropout: float, qkv_bias: bool = False
    ):
        # stage 5 takes (d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        self.cache_k = None
        self.cache_v = None

    def reset_cache(self) -> None:
        """Empty the cache: the next forward with use_cache=True starts a new sequence."""
        self.cache_k = None
        self.cache_v = None

    def forward(self, x: torch.Tensor, use_cache: bool = False) -> torch.Tensor:
        b, num_tokens, d_in = x.shape

        keys_new = self.W_key(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        values_new = self.W_value(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)

        start = 0
        if use_cache:
            if self.cache_k is not None:
                start = self.cache_k.shape[2]
            context_length = self.mask.shape[0]
            if start + num_tokens > context_length:
                raise ValueError(
                    f"{start} tokens are cached and {num_tokens} new ones would exceed context_length {context_length}"
                )
            if self.cache_k is None:
                self.cache_k, self.cache_v = keys_new, values_new
            else:
                self.cache_k = torch.cat([self.cache_k, keys_new], dim=2)
                self.cache_v = torch.cat([self.cache_v, values_new], dim=2)
            keys, values = self.cache_k, self.cache_v
        else:
            keys, values = keys_new, values_new

        attn_scores = queries @ keys.transpose(2, 3)
        mask_bool = self.mask.bool()[start:start + num_tokens, :start + num_tokens]
        attn_scores = attn_scores.masked_fill(mask_bool, -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        context_vec = (attn_weights @ values).transpose(1, 2).contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)
