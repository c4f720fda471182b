"""One example use of every public name of the stages, for any implementation."""

import torch
import torch.nn as nn

from grader.runner.implementation import Implementation

CONSTRUCTOR_ARGS = {
    "SelfAttention_v1": (3, 2),
    "SelfAttention_v2": (3, 2),
    "CausalAttention": (3, 2, 6, 0.0),
    "MultiHeadAttentionWrapper": (3, 2, 6, 0.0, 2),
    "MultiHeadAttention": (3, 2, 6, 0.0, 2),
    "MultiHeadAttentionKV": (3, 2, 6, 0.0, 2),
    "GroupedQueryAttention": (3, 8, 6, 0.0, 4, 2),
}
FORWARD_INPUT_SHAPE = {
    "SelfAttention_v1": (6, 3),
    "SelfAttention_v2": (6, 3),
    "CausalAttention": (2, 6, 3),
    "MultiHeadAttentionWrapper": (2, 6, 3),
    "MultiHeadAttention": (2, 6, 3),
    "MultiHeadAttentionKV": (2, 6, 3),
    "GroupedQueryAttention": (2, 6, 3),
}


def call_function(impl: Implementation, name: str, reference: Implementation) -> torch.Tensor | nn.Module:
    """Call the function ``name``; modules it needs as arguments come from ``reference``."""
    x = torch.rand(6, 3)
    calls = {
        "attention_scores": lambda: impl.attention_scores(x, x[1]),
        "softmax_naive": lambda: impl.softmax_naive(torch.rand(6)),
        "context_vector": lambda: impl.context_vector(x, torch.rand(6)),
        "simple_self_attention": lambda: impl.simple_self_attention(x),
        "transfer_weights_v2_to_v1": lambda: impl.transfer_weights_v2_to_v1(
            reference.SelfAttention_v2(3, 2), reference.SelfAttention_v1(3, 2)
        ),
        "mask_and_renormalize": lambda: impl.mask_and_renormalize(torch.rand(6, 6)),
        "causal_softmax": lambda: impl.causal_softmax(torch.rand(6, 6), 2),
        "scaled_dot_product_attention": lambda: impl.scaled_dot_product_attention(x, x, x, is_causal=True),
    }
    return calls[name]()


FUNCTIONS = [
    "attention_scores", "softmax_naive", "context_vector", "simple_self_attention",
    "transfer_weights_v2_to_v1", "mask_and_renormalize", "causal_softmax", "scaled_dot_product_attention",
]  # fmt: skip
CLASSES = list(CONSTRUCTOR_ARGS)
