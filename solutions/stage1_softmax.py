"""Stage 1: simple self-attention without trainable weights.

Guide: docs/stage1.md
"""

import torch


def attention_scores(inputs: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
    """Attention scores of one query: its dot product with every input row.

    Shapes: inputs (num_tokens, d_in), query (d_in,) -> (num_tokens,)

    Example ("Your journey starts with one step", query = inputs[1]):
        attention_scores(inputs, inputs[1])
        -> tensor([0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865])
    """
    ### BEGIN SOLUTION
    return inputs @ query  # (num_tokens, d_in) @ (d_in,) -> (num_tokens,)
    ### END SOLUTION


def softmax_naive(x: torch.Tensor) -> torch.Tensor:
    """Softmax written out by hand: exp(x) divided by the sum of exp(x) along dim 0.

    Do not call torch.softmax or F.softmax here: this function is what they do.

    Shapes: x (n,) -> (n,)

    Example:
        softmax_naive(tensor([0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865]))
        -> tensor([0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581])
    """
    ### BEGIN SOLUTION
    exp_x = torch.exp(x)
    return exp_x / exp_x.sum(dim=0)
    ### END SOLUTION


def context_vector(inputs: torch.Tensor, attn_weights: torch.Tensor) -> torch.Tensor:
    """Context vector of one query: the input rows summed, each times its attention weight.

    Shapes: inputs (num_tokens, d_in), attn_weights (num_tokens,) -> (d_in,)

    Example (the weights of query x^(2) from softmax_naive):
        context_vector(inputs, tensor([0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581]))
        -> tensor([0.4419, 0.6515, 0.5683])
    """
    ### BEGIN SOLUTION
    return attn_weights @ inputs  # (num_tokens,) @ (num_tokens, d_in) -> (d_in,)
    ### END SOLUTION


def simple_self_attention(inputs: torch.Tensor) -> torch.Tensor:
    """All context vectors at once: softmax(inputs @ inputs.T, last dim) @ inputs.

    Shapes: inputs (num_tokens, d_in) -> (num_tokens, d_in)

    Example: row 2 of the result is the context vector above, [0.4419, 0.6515, 0.5683];
    row 1 is [0.4421, 0.5931, 0.5790].
    """
    ### BEGIN SOLUTION
    attn_scores = inputs @ inputs.T  # (num_tokens, num_tokens)
    attn_weights = torch.softmax(attn_scores, dim=-1)  # each row sums to 1
    return attn_weights @ inputs  # (num_tokens, d_in)
    ### END SOLUTION
