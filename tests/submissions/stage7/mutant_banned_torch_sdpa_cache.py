"""Stage 7: stage 5's MultiHeadAttention with a KV cache.

Guide: docs/stage7.md
"""

import torch
import torch.nn.functional as F

from exercises.stage5_multihead_attention import MultiHeadAttention


class MultiHeadAttentionKV(MultiHeadAttention):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias=qkv_bias)
        self.num_heads = num_heads
        self.d_out = d_out
        self.context_length = context_length
        self.reset_cache()

    def reset_cache(self):
        self.cache_k = None
        self.cache_v = None

    def split(self, t):
        b, n, _ = t.shape
        return t.view(b, n, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x, use_cache=False):
        b, n, _ = x.shape
        q = self.split(self.W_query(x))
        k = self.split(self.W_key(x))
        v = self.split(self.W_value(x))

        past = 0
        if use_cache:
            past = 0 if self.cache_k is None else self.cache_k.size(2)
            if past + n > self.context_length:
                raise ValueError("the KV cache is full (context_length reached)")
            if past:
                k = torch.cat((self.cache_k, k), dim=2)
                v = torch.cat((self.cache_v, v), dim=2)
            self.cache_k, self.cache_v = k, v

        allowed = ~self.mask[past:past + n, :past + n].bool()
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed,
                                             dropout_p=self.dropout.p if self.training else 0.0)
        out = out.transpose(1, 2).contiguous().view(b, n, self.d_out)
        return self.out_proj(out)
