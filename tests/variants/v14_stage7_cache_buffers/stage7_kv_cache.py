"""Stage 7 (bonus): multi-head attention with a KV cache, for generating one token after another.

Guide: docs/stage7.md

The cache lives in non-persistent buffers (as in the book's bonus KV-cache code), so it follows
.to(device) but is not saved in state_dict.
"""

import torch

from exercises.stage5_multihead_attention import MultiHeadAttention


class MultiHeadAttentionKV(MultiHeadAttention):
    """Stage 5's MultiHeadAttention that can keep the keys and values of the tokens it has seen."""

    def __init__(
        self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int, qkv_bias: bool = False
    ):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        self.register_buffer("cache_k", None, persistent=False)
        self.register_buffer("cache_v", None, persistent=False)

    def reset_cache(self) -> None:
        """Empty the cache: the next forward with use_cache=True starts a new sequence."""
        self.cache_k, self.cache_v = None, None

    def forward(self, x: torch.Tensor, use_cache: bool = False) -> torch.Tensor:
        b, num_tokens, d_in = x.shape
        keys_new = self.W_key(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        values_new = self.W_value(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)

        if use_cache:
            num_cached = 0 if self.cache_k is None else self.cache_k.size(2)
            if num_cached + num_tokens > self.mask.size(0):
                raise ValueError(
                    f"{num_cached} tokens are cached; adding {num_tokens} exceeds context_length {self.mask.size(0)}"
                )
            if self.cache_k is None:
                self.cache_k, self.cache_v = keys_new, values_new
            else:
                self.cache_k = torch.cat([self.cache_k, keys_new], dim=2)
                self.cache_v = torch.cat([self.cache_v, values_new], dim=2)
            keys, values = self.cache_k, self.cache_v
        else:
            num_cached = 0
            keys, values = keys_new, values_new

        attn_scores = queries @ keys.transpose(2, 3)
        mask_bool = self.mask.bool()[num_cached:num_cached + num_tokens, :num_cached + num_tokens]
        attn_scores.masked_fill_(mask_bool, -torch.inf)
        attn_weights = torch.softmax(attn_scores / self.head_dim**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        context_vec = (attn_weights @ values).transpose(1, 2).contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)
