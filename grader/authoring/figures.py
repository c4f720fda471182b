"""make figures: heat maps of attention weights for the docs, computed with solutions/.

    python -m grader.authoring.figures            # docs/figures/*.png and attention_weights.json

Every figure shows the documents' sentence "Your journey starts with one step" (stage 1's
`inputs`), with the documents' seeds. The numbers behind the pictures are written to
attention_weights.json, which a test recomputes: a stale figure fails `make test` without
comparing PNG bytes (which depend on the matplotlib version).
"""

import json
import sys
from pathlib import Path

import torch

from grader.runner.document_examples import journey
from grader.runner.seeding import manual_seed
from solutions import stage1_softmax, stage2_self_attention, stage4_causal_attention, stage5_multihead_attention, stage6_sdpa

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
        "sdpa_causal": ("Stage 6: is_causal, 3 queries and 6 keys",
                        _sdpa_weights(queries=3, is_causal=True), TOKENS[:3]),
        "sdpa_mask": ("Stage 6: a bool mask hides 'step', and every key from 'one'", _sdpa_weights(attn_mask=hidden),
                      TOKENS),
    }


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
        **_stage6_figures(),
    }
    return {name: _entry(*figure) for name, figure in figures.items()}


def _entry(title: str, weights: torch.Tensor, queries: list[str] = TOKENS) -> dict:
    entry = {"title": title, "weights": [[round(float(v), DECIMALS) for v in row] for row in weights]}
    return entry if queries == TOKENS else {**entry, "queries": queries}


def render(data: dict[str, dict], folder: Path) -> list[Path]:
    """One PNG heat map per figure."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    written = []
    for name, figure in data.items():
        weights, queries = figure["weights"], figure.get("queries", TOKENS)
        fig, axes = pyplot.subplots(figsize=(4.6, 4.0), dpi=100)
        image = axes.imshow(weights, cmap="viridis", vmin=0.0, vmax=max(1.0, max(map(max, weights))))
        axes.set_xticks(range(len(TOKENS)), TOKENS, rotation=45, ha="right")
        axes.set_yticks(range(len(queries)), queries)
        axes.set_xlabel("key (attended to)")
        axes.set_ylabel("query")
        axes.set_title(figure["title"], fontsize=9)
        for row, values in enumerate(weights):
            for column, value in enumerate(values):
                axes.text(column, row, f"{value:.2f}", ha="center", va="center", fontsize=7,
                          color="black" if value > 0.55 else "white")
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
