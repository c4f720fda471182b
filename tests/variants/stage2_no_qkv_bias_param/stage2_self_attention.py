# Stage 2 exercise: replace each `raise NotImplementedError(...)` with your code.
"""Stage 2: self-attention with trainable weights (scaled dot-product attention).

Guide: docs/stage2.md
"""

import math

import torch
import torch.nn as nn


class SelfAttention_v1(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))

    def forward(self, x):
        queries = torch.matmul(x, self.W_query)
        keys = torch.matmul(x, self.W_key)
        values = torch.matmul(x, self.W_value)
        scores = torch.matmul(queries, keys.transpose(0, 1))
        weights = torch.softmax(scores / math.sqrt(keys.size(-1)), dim=-1)
        return torch.matmul(weights, values)


class SelfAttention_v2(nn.Module):
    # the book never uses a bias here, so I just turned it off
    def __init__(self, d_in, d_out):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=False)
        self.W_key = nn.Linear(d_in, d_out, bias=False)
        self.W_value = nn.Linear(d_in, d_out, bias=False)

    def forward(self, x):
        queries = self.W_query(x)
        keys = self.W_key(x)
        values = self.W_value(x)
        scores = torch.matmul(queries, keys.transpose(0, 1))
        weights = torch.softmax(scores / math.sqrt(keys.size(-1)), dim=-1)
        return torch.matmul(weights, values)
