"""make bench-kv-cache: greedy decoding of 256 tokens with stage 7's KV cache, against recomputing every step.

A tiny random model (an embedding, the reference MultiHeadAttentionKV, a linear head) decodes greedily
from a short prompt, twice a round: without the cache, each step runs the whole sequence so far
(use_cache=False); with it, the prompt runs once and then each new token alone. Both must choose the
same tokens. The rounds interleave the two so that machine noise hits both alike; prints the medians
and their ratio, measured in this one run.
"""

import statistics
import time

import torch
import torch.nn as nn

from solutions.stage7_kv_cache import MultiHeadAttentionKV

VOCABULARY, D_MODEL, NUM_HEADS = 1000, 256, 8
PROMPT_TOKENS, NEW_TOKENS = 8, 256
ROUNDS = 7


class TinyModel(nn.Module):
    """Token ids (b, n) -> next-token logits (b, n, vocabulary): one attention layer between an embedding
    and a linear head, with random weights."""

    def __init__(self, vocabulary: int, d_model: int, num_heads: int, context_length: int):
        super().__init__()
        self.embedding = nn.Embedding(vocabulary, d_model)
        self.attention = MultiHeadAttentionKV(d_model, d_model, context_length, 0.0, num_heads)
        self.head = nn.Linear(d_model, vocabulary)

    def forward(self, tokens: torch.Tensor, use_cache: bool = False) -> torch.Tensor:
        return self.head(self.attention(self.embedding(tokens), use_cache=use_cache))


@torch.no_grad()
def greedy_decode(model: TinyModel, prompt: torch.Tensor, new_tokens: int, use_cache: bool) -> torch.Tensor:
    """``prompt`` (b, n) followed by ``new_tokens`` tokens, each the most likely after those before it."""
    model.attention.reset_cache()
    tokens, fed = prompt, prompt
    for _ in range(new_tokens):
        logits = model(fed if use_cache else tokens, use_cache=use_cache)  # with the cache: the new tokens only
        next_token = logits[:, -1].argmax(dim=-1, keepdim=True)  # (b, 1)
        tokens, fed = torch.cat([tokens, next_token], dim=1), next_token
    return tokens


def timed(model: TinyModel, prompt: torch.Tensor, use_cache: bool) -> tuple[float, torch.Tensor]:
    started = time.perf_counter()
    tokens = greedy_decode(model, prompt, NEW_TOKENS, use_cache)
    return time.perf_counter() - started, tokens


def main() -> None:
    torch.manual_seed(0)
    model = TinyModel(VOCABULARY, D_MODEL, NUM_HEADS, PROMPT_TOKENS + NEW_TOKENS).eval()
    prompt = torch.randint(VOCABULARY, (1, PROMPT_TOKENS))
    timed(model, prompt, use_cache=True)  # warm the allocator and torch's kernels
    cached, uncached = [], []
    for _ in range(ROUNDS):
        seconds, with_cache = timed(model, prompt, use_cache=True)
        cached.append(seconds)
        seconds, without_cache = timed(model, prompt, use_cache=False)
        uncached.append(seconds)
        assert torch.equal(with_cache, without_cache), "the cache changed the tokens greedy decoding chose"
    with_cache, without_cache = statistics.median(cached), statistics.median(uncached)
    print(
        f"greedy decoding of {NEW_TOKENS} tokens after {PROMPT_TOKENS}, d_model {D_MODEL}, {NUM_HEADS} heads, "
        f"vocabulary {VOCABULARY}, {torch.get_num_threads()} threads"
    )
    print(f"without the cache: median {without_cache:.3f} s (min {min(uncached):.3f}, max {max(uncached):.3f})")
    print(f"with the cache:    median {with_cache:.3f} s (min {min(cached):.3f}, max {max(cached):.3f})")
    print(f"ratio: {without_cache / with_cache:.1f} times faster with the cache, {ROUNDS} rounds")


if __name__ == "__main__":
    main()
