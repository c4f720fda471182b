"""Stage 8: grouped-query attention: fewer key/value heads, each shared by consecutive query heads.

Guide: docs/stage8.md
"""

import math

import torch
import torch.nn as nn


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, num_kv_groups, qkv_bias=False):
        super().__init__()
        if d_out % num_heads or num_heads % num_kv_groups:
            raise ValueError(f"need num_heads | d_out and num_kv_groups | num_heads, got d_out={d_out}, "
                             f"num_heads={num_heads}, num_kv_groups={num_kv_groups}")
        self.num_heads = num_heads
        self.num_kv_groups = num_kv_groups
        self.head_dim = d_out // num_heads
        self.heads_per_group = num_heads // num_kv_groups
        kv_dim = num_kv_groups * self.head_dim
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, kv_dim, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, kv_dim, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        n = x.shape[1]
        hd = self.head_dim
        q = self.W_query(x)
        k = self.W_key(x)
        v = self.W_value(x)
        future = self.mask[:n, :n].bool()

        head_outputs = []
        for h in range(self.num_heads):
            g = h // self.heads_per_group
            q_h = q[:, :, h * hd:(h + 1) * hd]
            k_g = k[:, :, g * hd:(g + 1) * hd]
            v_g = v[:, :, g * hd:(g + 1) * hd]
            scores = q_h @ k_g.transpose(1, 2) / math.sqrt(q.shape[-1])
            scores = torch.where(future, float("-inf"), scores)
            weights = self.dropout(torch.softmax(scores, dim=-1))
            head_outputs.append(weights @ v_g)
        return self.out_proj(torch.cat(head_outputs, dim=-1))
