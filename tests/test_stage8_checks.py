"""Stage 8's checks: right answers written otherwise score full marks, the guide's numbers are the
reference's, stage 6 stands in as torch's own function, and only the learner's own stage 6 may
compute the attention."""

import inspect
import re
import tomllib

import pytest
import torch
import torch.nn.functional as F

from grader.core.stages import registry
from grader.judge.checks.delegation import DELEGATED, own_spellings
from grader.judge.source_scan import SourceScan
from grader.runner.document_examples import journey_batch
from grader.runner.seeding import manual_seed
from grader.runner.standins import stand_in_scaled_dot_product_attention
from solutions.stage5_multihead_attention import MultiHeadAttention
from solutions.stage8_gqa import GroupedQueryAttention
from tests.conftest import REPO
from tests.grading import grade, learner_copy

GUIDE = (REPO / "docs" / "stage8.md").read_text(encoding="utf-8")
ALTERNATIVES = [
    a for a in tomllib.loads((REPO / "tests" / "alternatives.toml").read_text())["alternative"] if a["stage"] == 8
]
SOLUTION_ATTENTION = """        keys = keys.repeat_interleave(self.group_size, dim=1)  # (b, num_heads, num_tokens, head_dim)
        values = values.repeat_interleave(self.group_size, dim=1)

        attn_scores = queries @ keys.transpose(2, 3)  # (b, num_heads, num_tokens, num_tokens)
        attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / self.head_dim**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        context = (attn_weights @ values).transpose(1, 2)"""
STAGE6_UNDONE = """def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    raise NotImplementedError("stage 6 is not done yet")
"""


def test_the_guides_worked_examples_are_the_reference(tmp_path):
    manual_seed(123)
    module = GroupedQueryAttention(3, 8, 6, 0.0, num_heads=4, num_kv_groups=2).eval()
    with torch.no_grad():
        row = module(journey_batch(torch.device("cpu")))[0, 0]
    printed = re.search(r"num_kv_groups=2\)\(batch\)` \| `\[([^\]]+)\]`", GUIDE)
    assert printed, "the guide's worked example row is missing"
    assert [float(v) for v in printed[1].split(",")] == pytest.approx(row.tolist(), abs=1e-4)

    def count(module: torch.nn.Module) -> int:
        return sum(p.numel() for p in module.parameters())

    gqa, mha = GroupedQueryAttention(768, 768, 1024, 0.0, 12, 4), MultiHeadAttention(768, 768, 1024, 0.0, 12)
    assert (count(gqa), count(mha)) == (1_573_632, 2_360_064)
    assert f"**{count(mha):,}**" in GUIDE and f"**{count(gqa):,}**" in GUIDE
    assert gqa.W_key.out_features + gqa.W_value.out_features == 512 and "2 × 4 × 64 = 512" in GUIDE
    mib = {width: 1024 * 12 * width * 4 // 2**20 for width in (1536, 512, 128)}
    assert mib == {1536: 72, 512: 24, 128: 6} and all(f"{v} MiB" in GUIDE for v in mib.values())


def test_with_as_many_groups_as_heads_it_is_multihead_attention():
    x = torch.rand(2, 5, 4)
    manual_seed(7)
    grouped = GroupedQueryAttention(4, 12, 6, 0.0, 3, 3).eval()
    manual_seed(7)
    multihead = MultiHeadAttention(4, 12, 6, 0.0, 3).eval()
    with torch.no_grad():
        assert torch.equal(grouped(x), multihead(x))


def test_stage6_stands_in_as_torchs_own_function_with_its_signature():
    assert list(inspect.signature(stand_in_scaled_dot_product_attention).parameters) == [
        "query",
        "key",
        "value",
        "attn_mask",
        "dropout_p",
        "is_causal",
        "scale",
        "enable_gqa",
    ]
    q, k, v = torch.rand(2, 4, 5, 3), torch.rand(2, 2, 5, 3), torch.rand(2, 2, 5, 3)
    grouped = stand_in_scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    repeated = F.scaled_dot_product_attention(
        q, k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1), is_causal=True
    )
    assert torch.equal(grouped, repeated)


def uses_excused(source: str) -> tuple[bool, bool]:
    """(whether the class reaches the name scaled_dot_product_attention, whether every spelling is the learner's own)."""
    scan = SourceScan(source)
    uses = scan.uses_reached_from("GroupedQueryAttention", DELEGATED)
    own = own_spellings(source)
    return bool(uses), all(own.excuses(use) for use in uses)


def module_with(header: str, call: str) -> str:
    return f"{header}\n\nclass GroupedQueryAttention:\n    def forward(self, q, k, v):\n        return {call}\n"


@pytest.mark.parametrize(
    "header, call",
    [
        ("from exercises.stage6_sdpa import scaled_dot_product_attention", "scaled_dot_product_attention(q, k, v)"),
        ("from exercises.stage6_sdpa import scaled_dot_product_attention as attend", "attend(q, k, v)"),
        ("import exercises.stage6_sdpa as s6", "s6.scaled_dot_product_attention(q, k, v)"),
        ("import exercises.stage6_sdpa", "exercises.stage6_sdpa.scaled_dot_product_attention(q, k, v)"),
        ("from exercises import stage6_sdpa", "stage6_sdpa.scaled_dot_product_attention(q, k, v)"),
        ("from .stage6_sdpa import scaled_dot_product_attention", "scaled_dot_product_attention(q, k, v)"),
        ("from exercises.stage6_sdpa import *", "scaled_dot_product_attention(q, k, v)"),
        (
            "def attend(q, k, v):\n    from exercises.stage6_sdpa import scaled_dot_product_attention\n"
            "    return scaled_dot_product_attention(q, k, v)",
            "attend(q, k, v)",
        ),
    ],
)
def test_the_learners_own_stage6_function_is_theirs(header, call):
    reached, excused = uses_excused(module_with(header, call))
    assert reached and excused


@pytest.mark.parametrize(
    "header, call",
    [
        ("import torch.nn.functional as F", "F.scaled_dot_product_attention(q, k, v)"),
        ("from torch.nn.functional import scaled_dot_product_attention", "scaled_dot_product_attention(q, k, v)"),
        (
            "import torch\nimport exercises.stage6_sdpa as s6\ns6 = torch.nn.functional",
            "s6.scaled_dot_product_attention(q, k, v)",
        ),
        (
            "import torch.nn.functional as F\nfrom exercises.stage6_sdpa import scaled_dot_product_attention",
            "scaled_dot_product_attention(q, k, v) + F.scaled_dot_product_attention(q, k, v)",
        ),
        (
            "from exercises.stage6_sdpa import *\nfrom torch.nn.functional import *",
            "scaled_dot_product_attention(q, k, v)",
        ),
        ("import torch.nn.functional as F", "getattr(F, 'scaled_dot_product_attention')(q, k, v)"),
    ],
)
def test_torchs_function_is_never_taken_for_the_learners(header, call):
    reached, excused = uses_excused(module_with(header, call))
    assert reached and not excused


@pytest.mark.parametrize("alternative", ALTERNATIVES, ids=[a["what"] for a in ALTERNATIVES])
def test_right_answers_written_otherwise_score_full_marks(alternative, tmp_path):
    folder = learner_copy(tmp_path / "submission", alternative, stages=[8])
    _, report = grade(folder, "--stage", "8")
    assert report["score"] == report["max_score"] == 20, [
        c for s in report["stages"] for c in s["checks"] if c["status"] != "passed"
    ]


@pytest.mark.skipif(6 not in registry(), reason="stage 6 joins the registry when the bonus stages are merged")
@pytest.mark.parametrize(
    "header, call, score",
    [
        (
            "from exercises.stage6_sdpa import scaled_dot_product_attention",
            "scaled_dot_product_attention(queries, keys, values, is_causal=True, enable_gqa=True, "
            "dropout_p=self.dropout.p if self.training else 0.0)",
            20,
        ),
        (
            "import exercises.stage6_sdpa as s6",
            "s6.scaled_dot_product_attention(queries, keys, values, attn_mask=~self.mask.bool()[:num_tokens, :num_tokens], "
            "enable_gqa=True, dropout_p=self.dropout.p if self.training else 0.0)",
            20,
        ),
        (
            "import torch.nn.functional as F\nfrom exercises.stage6_sdpa import scaled_dot_product_attention",
            "F.scaled_dot_product_attention(queries, keys, values, is_causal=True, enable_gqa=True, "
            "dropout_p=self.dropout.p if self.training else 0.0)",
            0,
        ),
    ],
)
def test_stage8_may_call_the_learners_stage6_whatever_stage6_holds(header, call, score, tmp_path):
    change = {
        "file": "stage8_gqa.py",
        "find": SOLUTION_ATTENTION,
        "replace": f"        context = ({call}).transpose(1, 2)",
    }
    folder = learner_copy(tmp_path / "submission", change, stages=[6, 8])
    (folder / "stage6_sdpa.py").write_text(STAGE6_UNDONE)
    stage8 = folder / "stage8_gqa.py"
    stage8.write_text(stage8.read_text().replace("import torch.nn as nn\n", f"import torch.nn as nn\n{header}\n", 1))
    _, report = grade(folder, "--stage", "8")
    assert report["score"] == score
