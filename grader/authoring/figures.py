"""make figures: heat maps of attention weights for the docs, computed with solutions/.

    python -m grader.authoring.figures            # docs/figures/*.png and attention_weights.json

Every attention map shows the documents' sentence "Your journey starts with one step" (stage 1's
`inputs`), with the documents' seeds; stage 8's figure shows which key/value group each query head
reads instead. The numbers behind the pictures are written to
attention_weights.json, which a test recomputes: a stale figure fails `make test` without
comparing PNG bytes (which depend on the matplotlib version).
"""

import json
import sys
from pathlib import Path

import torch

from grader.runner.document_examples import journey
from grader.runner.seeding import manual_seed
from solutions import (
    stage1_softmax,
    stage2_self_attention,
    stage4_causal_attention,
    stage5_multihead_attention,
    stage6_sdpa,
    stage7_kv_cache,
    stage8_gqa,
)

REPO = Path(__file__).resolve().parents[2]
FIGURES = REPO / "docs" / "figures"
DATA = FIGURES / "attention_weights.json"
INPUTS = journey(torch.device("cpu"))  # (6, 3): "Your journey starts with one step"
TOKENS = ["Your", "journey", "starts", "with", "one", "step"]
DECIMALS = 4


def _plain() -> torch.Tensor:
    """Stage 1: a softmax over raw dot products, one row per query token."""
    return torch.stack([stage1_softmax.softmax_naive(stage1_softmax.attention_scores(INPUTS, q)) for q in INPUTS])


def _scaled_scores() -> tuple[torch.Tensor, int]:
    """Stage 2's SelfAttention_v2(3, 2) under seed 789: its scores and key size."""
    manual_seed(789)
    module = stage2_self_attention.SelfAttention_v2(3, 2)
    with torch.no_grad():
        keys = module.W_key(INPUTS)
        return module.W_query(INPUTS) @ keys.T, keys.shape[-1]


def _heads() -> list[torch.Tensor]:
    """Stage 5's MultiHeadAttention(3, 2, 6, 0.0, num_heads=2) under seed 123: each head's weights."""
    manual_seed(123)
    module = stage5_multihead_attention.MultiHeadAttention(3, 2, 6, 0.0, num_heads=2)
    with torch.no_grad():
        split = lambda t: t.view(len(TOKENS), module.num_heads, module.head_dim).transpose(0, 1)  # noqa: E731
        scores = split(module.W_query(INPUTS)) @ split(module.W_key(INPUTS)).transpose(1, 2)
    return list(stage4_causal_attention.causal_softmax(scores, module.head_dim))


def _sdpa_weights(**options) -> torch.Tensor:
    """Stage 6's function on SelfAttention_v2's queries and keys (seed 789), with value = I: its weights.

    ``queries``: how many of the sentence's tokens ask (the first ones); the rest are passed on.
    """
    queries = options.pop("queries", len(TOKENS))
    manual_seed(789)
    module = stage2_self_attention.SelfAttention_v2(3, 2)
    with torch.no_grad():
        q, k = module.W_query(INPUTS[:queries]), module.W_key(INPUTS)
        return stage6_sdpa.scaled_dot_product_attention(q, k, torch.eye(len(TOKENS)), **options)


def _stage6_figures() -> dict[str, tuple]:
    """(title, weights, query labels) of stage 6's pictures."""
    hidden = torch.ones(len(TOKENS), len(TOKENS), dtype=torch.bool)
    hidden[:, TOKENS.index("step")] = False  # a key no query may see, as padding is
    hidden[TOKENS.index("one")] = False  # a query that may see no key at all
    return {
        "sdpa_causal": (
            "Stage 6: is_causal, 3 queries and 6 keys",
            _sdpa_weights(queries=3, is_causal=True),
            TOKENS[:3],
        ),
        "sdpa_mask": (
            "Stage 6: a bool mask hides 'step', and every key from 'one'",
            _sdpa_weights(attn_mask=hidden),
            TOKENS,
        ),
    }


def _cached_chunk() -> torch.Tensor:
    """Stage 7's MultiHeadAttentionKV(3, 2, 6, 0.0, num_heads=2) under seed 123, fed "Your journey starts"
    then "with one step" with use_cache=True: head 1's weights of the second chunk, (3 queries, 6 keys)."""
    manual_seed(123)
    module = stage7_kv_cache.MultiHeadAttentionKV(3, 2, 6, 0.0, num_heads=2)
    first, chunk = INPUTS[None, :3], INPUTS[None, 3:]
    with torch.no_grad():
        module(first, use_cache=True)
        module(chunk, use_cache=True)  # the cache now holds the keys of all 6 tokens
        queries = module.W_query(chunk).view(1, 3, module.num_heads, module.head_dim).transpose(1, 2)
        scores = queries @ module.cache_k.transpose(2, 3)  # (1, heads, 3, 6)
        scores = scores.masked_fill(module.mask.bool()[3:6, :6], -torch.inf)  # the chunk's rows of the mask
    return torch.softmax(scores / module.head_dim**0.5, dim=-1)[0, 0]


def _kv_groups(heads: int = 12, groups: int = 4) -> torch.Tensor:
    """Stage 8's GroupedQueryAttention with 12 query heads and 4 key/value groups (GPT-2 small's heads):
    which group each head reads, measured. One token, head_dim 1, all scores equal; group g's value
    is feature g of a one-hot input and out_proj passes each head through, so head h's output is 1
    exactly where the input lights its group. Rows: query heads; columns: groups."""
    module = stage8_gqa.GroupedQueryAttention(groups, heads, 1, 0.0, num_heads=heads, num_kv_groups=groups).eval()
    with torch.no_grad():
        module.W_query.weight.zero_()
        module.W_key.weight.zero_()
        module.W_value.weight.copy_(torch.eye(groups))
        module.out_proj.weight.copy_(torch.eye(heads))
        module.out_proj.bias.zero_()
        return torch.stack([module(torch.eye(groups)[g].view(1, 1, groups))[0, 0] for g in range(groups)], dim=1)


def figure_data() -> dict[str, dict]:
    """Figure name -> its title, weights (rows: queries, columns: keys), rounded as written, and the
    query tokens where they are not the whole sentence."""
    scores, d_k = _scaled_scores()
    scaled = torch.softmax(scores / d_k**0.5, dim=-1)
    causal = stage4_causal_attention.causal_softmax(scores, d_k)
    manual_seed(123)
    dropped = torch.nn.Dropout(0.5)(causal)
    heads = _heads()
    figures = {
        "plain": ("Stage 1: softmax of dot products", _plain()),
        "scaled": ("Stage 2: scaled by sqrt(d_k), SelfAttention_v2 (seed 789)", scaled),
        "causal": ("Stage 4: causal mask", causal),
        "dropout": ("Stage 4: causal, then dropout 0.5 (seed 123)", dropped),
        **{f"head{i + 1}": (f"Stage 5: head {i + 1} of 2 (seed 123)", w) for i, w in enumerate(heads)},
        "cached_chunk": ("Stage 7: head 1, a chunk after 3 cached tokens", _cached_chunk(), TOKENS[3:]),
        **_stage6_figures(),
    }
    data = {name: _entry(*figure) for name, figure in figures.items()}
    groups = _kv_groups()
    data["kv_groups"] = {
        **_entry(
            "Stage 8: 12 query heads read 4 key/value groups", groups, [f"head {h + 1}" for h in range(groups.shape[0])]
        ),
        "columns": [f"group {g + 1}" for g in range(groups.shape[1])],
        "xlabel": "key/value group",
        "ylabel": "query head",
    }
    return data


def _entry(title: str, weights: torch.Tensor, queries: list[str] = TOKENS) -> dict:
    entry = {"title": title, "weights": [[round(float(v), DECIMALS) for v in row] for row in weights]}
    return entry if queries == TOKENS else {**entry, "queries": queries}


def render(data: dict[str, dict], folder: Path) -> list[Path]:
    """One PNG heat map per figure; a figure of fewer rows than tokens shows the last tokens' queries."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    written = []
    for name, figure in data.items():
        weights, queries = figure["weights"], figure.get("queries", TOKENS)
        fig, axes = pyplot.subplots(figsize=(4.6, 4.0), dpi=100)
        image = axes.imshow(
            weights,
            cmap="viridis",
            vmin=0.0,
            vmax=max(1.0, max(map(max, weights))),
            aspect="equal" if len(weights) == len(weights[0]) else "auto",
        )
        columns = figure.get("columns", TOKENS)  # attention maps: the sentence's tokens
        axes.set_xticks(range(len(columns)), columns, rotation=45, ha="right")
        axes.set_yticks(range(len(queries)), queries)
        axes.set_xlabel(figure.get("xlabel", "key (attended to)"))
        axes.set_ylabel(figure.get("ylabel", "query"))
        axes.set_title(figure["title"], fontsize=9)
        for row, values in enumerate(weights):
            for column, value in enumerate(values):
                axes.text(
                    column,
                    row,
                    f"{value:.2f}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="black" if value > 0.55 else "white",
                )
        fig.colorbar(image, ax=axes, fraction=0.046)
        fig.tight_layout()
        path = folder / f"{name}.png"
        fig.savefig(path, metadata={"Software": None})
        pyplot.close(fig)
        written.append(path)
    return written


def main() -> int:
    FIGURES.mkdir(parents=True, exist_ok=True)
    data = figure_data()
    DATA.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    written = render(data, FIGURES)
    print(f"docs/figures: {len(written)} heat maps and {DATA.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
