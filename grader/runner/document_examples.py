"""The documents' worked examples as recipes: each rebuilds one printed value from an implementation.

A recipe takes an Implementation (solutions or a submission) and a device, repeats the
document's seed and call order, and returns the printed tensor on the CPU. Modules are built
on the CPU, where the seeds were printed, then moved to the device.
"""

from collections.abc import Callable

import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode

from grader.runner.book_calls import in_book_layout, projection
from grader.runner.implementation import Implementation
from grader.runner.seeding import manual_seed

Recipe = Callable[[Implementation, torch.device], torch.Tensor]
RECIPES: dict[str, Recipe] = {}

# "Your journey starts with one step": one 3-d embedding per token.
JOURNEY = [
    [0.43, 0.15, 0.89],  # Your     (x^1)
    [0.55, 0.87, 0.66],  # journey  (x^2)
    [0.57, 0.85, 0.64],  # starts   (x^3)
    [0.22, 0.58, 0.33],  # with     (x^4)
    [0.77, 0.25, 0.10],  # one      (x^5)
    [0.05, 0.80, 0.55],  # step     (x^6)
]


def recipe(function: Recipe) -> Recipe:
    RECIPES[function.__name__] = function
    return function


def run_recipe(name: str, implementation: Implementation, device: torch.device | str = "cpu") -> torch.Tensor:
    with torch.no_grad():
        result = RECIPES[name](implementation, torch.device(device))
    return result.detach().cpu() if isinstance(result, torch.Tensor) else result


def journey(device: torch.device) -> torch.Tensor:
    return torch.tensor(JOURNEY, device=device)  # (6, 3)


def journey_batch(device: torch.device) -> torch.Tensor:
    inputs = journey(device)
    return torch.stack((inputs, inputs), dim=0)  # (2, 6, 3)


def once_upon_embeddings(device: torch.device) -> torch.Tensor:
    """002's "Once upon a time there": nn.Embedding(5, 4) rows after torch.manual_seed(123)."""
    manual_seed(123)
    embedding = nn.Embedding(num_embeddings=5, embedding_dim=4)
    return embedding(torch.arange(5)).to(device)  # (5, 4)


class _NoRandomFills(TorchFunctionMode):
    """Leaves weights as allocated where nn.init would fill them with random numbers.

    For a module whose values nobody reads: drawing GPT-2's 2.4 million initial weights took
    about half of what a stage-5 worker spends. The meta device would skip them too, but its
    first use imports torch._dynamo, which takes longer.
    """

    FILLS = {
        "uniform_",
        "normal_",
        "trunc_normal_",
        "kaiming_uniform_",
        "kaiming_normal_",
        "xavier_uniform_",
        "xavier_normal_",
        "orthogonal_",
    }

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", None) in self.FILLS:
            return (args or tuple((kwargs or {}).values()))[0]  # the tensor to fill, first wherever it is
        return func(*args, **(kwargs or {}))


def seeded(seed: int, build: Callable[[], nn.Module], device: torch.device) -> nn.Module:
    manual_seed(seed)
    return build().to(device)


# Stage 1 ----------------------------------------------------------------------------------


@recipe
def attn_scores_2(impl: Implementation, device: torch.device) -> torch.Tensor:
    inputs = journey(device)
    return impl.attention_scores(inputs, inputs[1])


@recipe
def attn_weights_2_tmp(impl: Implementation, device: torch.device) -> torch.Tensor:
    scores = attn_scores_2(impl, device)
    return scores / scores.sum()


@recipe
def attn_weights_2_naive(impl: Implementation, device: torch.device) -> torch.Tensor:
    return impl.softmax_naive(attn_scores_2(impl, device))


@recipe
def attn_weights_2_naive_sum(impl: Implementation, device: torch.device) -> torch.Tensor:
    return attn_weights_2_naive(impl, device).sum()


@recipe
def context_vec_2(impl: Implementation, device: torch.device) -> torch.Tensor:
    return impl.context_vector(journey(device), attn_weights_2_naive(impl, device))


@recipe
def attn_scores(impl: Implementation, device: torch.device) -> torch.Tensor:
    inputs = journey(device)
    return torch.stack([impl.attention_scores(inputs, query) for query in inputs])


@recipe
def attn_weights(impl: Implementation, device: torch.device) -> torch.Tensor:
    return torch.stack([impl.softmax_naive(row) for row in attn_scores(impl, device)])


@recipe
def all_context_vecs(impl: Implementation, device: torch.device) -> torch.Tensor:
    return impl.simple_self_attention(journey(device))


# Stage 2: the book's W_query, W_key, W_value after seed 123 are those of SelfAttention_v1(3, 2).


def book_sa_v1(impl: Implementation, device: torch.device) -> nn.Module:
    return in_book_layout(seeded(123, lambda: impl.SelfAttention_v1(3, 2), device), 3, 2)


@recipe
def query_2(impl: Implementation, device: torch.device) -> torch.Tensor:
    return journey(device)[1] @ projection(book_sa_v1(impl, device), "W_query")


@recipe
def key_2(impl: Implementation, device: torch.device) -> torch.Tensor:
    return journey(device)[1] @ projection(book_sa_v1(impl, device), "W_key")


@recipe
def value_2(impl: Implementation, device: torch.device) -> torch.Tensor:
    return journey(device)[1] @ projection(book_sa_v1(impl, device), "W_value")


@recipe
def attn_scores_22(impl: Implementation, device: torch.device) -> torch.Tensor:
    keys = journey(device) @ projection(book_sa_v1(impl, device), "W_key")
    return query_2(impl, device).dot(keys[1])


@recipe
def attn_scores_2_trainable(impl: Implementation, device: torch.device) -> torch.Tensor:
    keys = journey(device) @ projection(book_sa_v1(impl, device), "W_key")
    return query_2(impl, device) @ keys.T


@recipe
def attn_weights_2_trainable(impl: Implementation, device: torch.device) -> torch.Tensor:
    d_k = projection(book_sa_v1(impl, device), "W_key").shape[1]
    return torch.softmax(attn_scores_2_trainable(impl, device) / d_k**0.5, dim=-1)


@recipe
def context_vec_2_trainable(impl: Implementation, device: torch.device) -> torch.Tensor:
    values = journey(device) @ projection(book_sa_v1(impl, device), "W_value")
    return attn_weights_2_trainable(impl, device) @ values


@recipe
def sa_v1_output(impl: Implementation, device: torch.device) -> torch.Tensor:
    return book_sa_v1(impl, device)(journey(device))


def book_sa_v2(impl: Implementation, device: torch.device) -> nn.Module:
    return seeded(789, lambda: impl.SelfAttention_v2(3, 2), device)


@recipe
def sa_v2_output(impl: Implementation, device: torch.device) -> torch.Tensor:
    return book_sa_v2(impl, device)(journey(device))


# 002 draws W_Q, W_K, W_V with torch.rand(4, 4) after seed 123: a SelfAttention_v1(4, 4).


def once_upon_sa_v1(impl: Implementation, device: torch.device) -> nn.Module:
    return seeded(123, lambda: impl.SelfAttention_v1(4, 4), device)


@recipe
def once_upon_W_query(impl: Implementation, device: torch.device) -> torch.Tensor:
    return projection(once_upon_sa_v1(impl, device), "W_query")


@recipe
def once_upon_queries(impl: Implementation, device: torch.device) -> torch.Tensor:
    x = once_upon_embeddings(device)
    return x @ projection(once_upon_sa_v1(impl, device), "W_query")


@recipe
def once_upon_scores(impl: Implementation, device: torch.device) -> torch.Tensor:
    x = once_upon_embeddings(device)
    sa = once_upon_sa_v1(impl, device)
    return (x @ projection(sa, "W_query")) @ (x @ projection(sa, "W_key")).T


@recipe
def once_upon_scaled_scores(impl: Implementation, device: torch.device) -> torch.Tensor:
    return once_upon_scores(impl, device) / 4**0.5


@recipe
def once_upon_attention_weights(impl: Implementation, device: torch.device) -> torch.Tensor:
    return torch.softmax(once_upon_scaled_scores(impl, device), dim=-1)


@recipe
def once_upon_sa_v1_output(impl: Implementation, device: torch.device) -> torch.Tensor:
    x = once_upon_embeddings(device)
    return once_upon_sa_v1(impl, device)(x)


@recipe
def once_upon_sa_v2_output(impl: Implementation, device: torch.device) -> torch.Tensor:
    x = once_upon_embeddings(device)
    return seeded(123, lambda: impl.SelfAttention_v2(4, 4), device)(x)


# Stage 3: book exercise 3.1.


def exercise_3_1(impl: Implementation, device: torch.device) -> tuple[nn.Module, nn.Module, torch.Tensor]:
    manual_seed(123)
    sa_v1 = impl.SelfAttention_v1(3, 2).to(device)
    sa_v2 = impl.SelfAttention_v2(3, 2).to(device)
    x = torch.rand(2, 3).to(device)
    return sa_v1, sa_v2, x


@recipe
def exercise_3_1_v1_before(impl: Implementation, device: torch.device) -> torch.Tensor:
    sa_v1, _, x = exercise_3_1(impl, device)
    return sa_v1(x)


@recipe
def exercise_3_1_v2(impl: Implementation, device: torch.device) -> torch.Tensor:
    _, sa_v2, x = exercise_3_1(impl, device)
    return sa_v2(x)


@recipe
def exercise_3_1_v1_after(impl: Implementation, device: torch.device) -> torch.Tensor:
    sa_v1, sa_v2, x = exercise_3_1(impl, device)
    return impl.transfer_weights_v2_to_v1(sa_v2, sa_v1)(x)


# Stage 4: the book reuses the query and key weights of sa_v2 (seed 789).


def sa_v2_scores(impl: Implementation, device: torch.device) -> torch.Tensor:
    sa_v2 = book_sa_v2(impl, device)
    inputs = journey(device)
    return projection(sa_v2, "W_query")(inputs) @ projection(sa_v2, "W_key")(inputs).T  # (6, 6)


@recipe
def sa_v2_attn_weights(impl: Implementation, device: torch.device) -> torch.Tensor:
    return torch.softmax(sa_v2_scores(impl, device) / 2**0.5, dim=-1)


@recipe
def masked_renormalized_weights(impl: Implementation, device: torch.device) -> torch.Tensor:
    return impl.mask_and_renormalize(sa_v2_attn_weights(impl, device))


@recipe
def masked_scores(impl: Implementation, device: torch.device) -> torch.Tensor:
    scores = sa_v2_scores(impl, device)
    above_diagonal = torch.triu(torch.ones(6, 6, device=device), diagonal=1).bool()
    return scores.masked_fill(above_diagonal, -torch.inf)


@recipe
def causal_softmax_weights(impl: Implementation, device: torch.device) -> torch.Tensor:
    return impl.causal_softmax(sa_v2_scores(impl, device), 2)


@recipe
def masked_context_vecs(impl: Implementation, device: torch.device) -> torch.Tensor:
    values = projection(book_sa_v2(impl, device), "W_value")(journey(device))
    return causal_softmax_weights(impl, device) @ values


def seeded_dropout(p: float, weights: torch.Tensor) -> torch.Tensor:
    """Both documents seed 123 right before applying dropout, so the mask depends only on p."""
    manual_seed(123)
    return nn.Dropout(p)(weights)


@recipe
def dropout_of_ones(impl: Implementation, device: torch.device) -> torch.Tensor:
    return seeded_dropout(0.5, torch.ones(6, 6, device=device))


@recipe
def dropout_of_causal_weights(impl: Implementation, device: torch.device) -> torch.Tensor:
    return seeded_dropout(0.5, causal_softmax_weights(impl, device))


@recipe
def causal_attention_output(impl: Implementation, device: torch.device) -> torch.Tensor:
    return seeded(123, lambda: impl.CausalAttention(3, 2, 6, 0.0), device)(journey_batch(device))


@recipe
def once_upon_causal_weights(impl: Implementation, device: torch.device) -> torch.Tensor:
    return impl.causal_softmax(once_upon_scores(impl, device), 4)


@recipe
def once_upon_dropout_of_ones(impl: Implementation, device: torch.device) -> torch.Tensor:
    return seeded_dropout(0.2, torch.ones(5, 5, device=device))


@recipe
def once_upon_dropout_of_causal_weights(impl: Implementation, device: torch.device) -> torch.Tensor:
    return seeded_dropout(0.2, once_upon_causal_weights(impl, device))


def seeded_batch_then_module(
    shape: tuple[int, int, int], build: Callable[[], nn.Module], device: torch.device
) -> torch.Tensor:
    manual_seed(123)
    batch = torch.randn(*shape)
    module = build()
    return module.to(device)(batch.to(device))


@recipe
def once_upon_causal_attention_output(impl: Implementation, device: torch.device) -> torch.Tensor:
    return seeded_batch_then_module((2, 5, 4), lambda: impl.CausalAttention(4, 4, 5, 0.0), device)


# Stage 5 ----------------------------------------------------------------------------------


@recipe
def wrapper_output(impl: Implementation, device: torch.device) -> torch.Tensor:
    build = lambda: impl.MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2)  # noqa: E731
    return seeded(123, build, device)(journey_batch(device))


@recipe
def multihead_output(impl: Implementation, device: torch.device) -> torch.Tensor:
    build = lambda: impl.MultiHeadAttention(3, 2, 6, 0.0, num_heads=2)  # noqa: E731
    return seeded(123, build, device)(journey_batch(device))


@recipe
def exercise_3_2_shape(impl: Implementation, device: torch.device) -> torch.Tensor:
    build = lambda: impl.MultiHeadAttentionWrapper(3, 1, 6, 0.0, num_heads=2)  # noqa: E731
    output = seeded(123, build, device)(journey_batch(device))
    return torch.tensor(list(output.shape))


@recipe
def exercise_3_3_parameter_count(impl: Implementation, device: torch.device) -> torch.Tensor:
    with _NoRandomFills():  # only the count is printed
        gpt2_small = impl.MultiHeadAttention(768, 768, 1024, 0.0, num_heads=12)
    return torch.tensor(sum(p.numel() for p in gpt2_small.parameters()))


@recipe
def once_upon_wrapper_output(impl: Implementation, device: torch.device) -> torch.Tensor:
    build = lambda: impl.MultiHeadAttentionWrapper(6, 3, 5, 0.0, num_heads=2)  # noqa: E731
    return seeded_batch_then_module((2, 5, 6), build, device)


@recipe
def once_upon_multihead_output(impl: Implementation, device: torch.device) -> torch.Tensor:
    build = lambda: impl.MultiHeadAttention(6, 6, 5, 0.0, num_heads=2)  # noqa: E731
    return seeded_batch_then_module((2, 5, 6), build, device)
