# Stage 1, matrix-vector products and a softmax by hand with keepdim.
import torch

inputs_example = torch.tensor(
    [
        [0.43, 0.15, 0.89],  # Your
        [0.55, 0.87, 0.66],  # journey
        [0.57, 0.85, 0.64],  # starts
        [0.22, 0.58, 0.33],  # with
        [0.77, 0.25, 0.10],  # one
        [0.05, 0.80, 0.55],  # step
    ]
)
print("example inputs:", tuple(inputs_example.shape))


def attention_scores(inputs: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
    return torch.mv(inputs, query)


def softmax_naive(x: torch.Tensor) -> torch.Tensor:
    e = x.exp()
    return e / e.sum(0, keepdim=True)


def context_vector(inputs: torch.Tensor, attn_weights: torch.Tensor) -> torch.Tensor:
    # inputs^T (d_in, num_tokens) times the weights (num_tokens,)
    return torch.mv(inputs.mT, attn_weights)


def _row_softmax(scores: torch.Tensor) -> torch.Tensor:
    z = scores - scores.amax(dim=-1, keepdim=True)
    z = z.exp()
    return z / z.sum(dim=-1, keepdim=True)


def simple_self_attention(inputs: torch.Tensor) -> torch.Tensor:
    return torch.mm(_row_softmax(torch.mm(inputs, inputs.mT)), inputs)


assert torch.allclose(
    simple_self_attention(inputs_example)[0], torch.tensor([0.4421, 0.5931, 0.5790]), atol=1e-4
)
