"""Proves the held-out submissions of the bonus stages are what manifest.toml says they are.

Every alternative must pass every check below; every mutant must fail at least one (the script prints which
inputs expose it). Stage 6 is compared with torch's own F.scaled_dot_product_attention (called here only);
stages 7 and 8 with references/ written from the brief, which are themselves checked first (stage 5's against
the guide's worked example, stage 6's against torch, stage 8's against torch's SDPA with enable_gqa and against
stage 5).

Run from the worktree: python -m tests.submissions.verify
"""

import ast
import importlib
import shutil
import sys
import tempfile
import tomllib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch
import torch.nn.functional as F

from grader.runner.implementation import SUBMISSION_PACKAGE, register_package

SUBMISSIONS = Path(__file__).resolve().parent
REFERENCES = SUBMISSIONS / "references"
STAGE_FILES = {6: "stage6_sdpa", 7: "stage7_kv_cache", 8: "stage8_gqa"}
# The neighbours a stage file may import as exercises.<module>: correct ones of our own.
NEIGHBOURS = ("stage5_multihead_attention", "stage6_sdpa")

Check = Callable[[ModuleType], None]


# ---------------------------------------------------------------- loading a stage file as the grader does

class SubmissionLoader:
    """Imports a stage file as ``exercises.<module>``, in a folder beside correct neighbouring stages."""

    def __init__(self, root: Path):
        self.root = root
        self.count = 0

    def load(self, stage_file: Path, module_name: str) -> ModuleType:
        self.count += 1
        folder = self.root / str(self.count)
        folder.mkdir()
        for neighbour in NEIGHBOURS:
            shutil.copy(REFERENCES / f"{neighbour}.py", folder / f"{neighbour}.py")
        shutil.copy(stage_file, folder / f"{module_name}.py")
        # the previous submission's modules must not stand in for this one's
        for name in [name for name in sys.modules if name.startswith(f"{SUBMISSION_PACKAGE}.")]:
            del sys.modules[name]
        register_package(folder)
        return importlib.import_module(f"{SUBMISSION_PACKAGE}.{module_name}")


def banned_calls(source: str) -> list[str]:
    """Where a file reaches torch's fused attention or nn.MultiheadAttention (the uses that earn nothing)."""
    def banned(name: str) -> bool:
        return name in ("scaled_dot_product_attention", "MultiheadAttention") or name.startswith(
            "_scaled_dot_product")

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and banned(node.attr):
            found.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torch"):
            found += [f"line {node.lineno}: import {alias.name}" for alias in node.names if banned(alias.name)]
    return found


def no_banned_api(source: str) -> Check:
    def check(_: ModuleType) -> None:
        found = banned_calls(source)
        assert not found, f"banned API used: {', '.join(found)}"
    return check


def raises_value_error(call: Callable[[], object]) -> None:
    try:
        call()
    except ValueError:
        return
    except Exception as error:  # the learner's code raised, but not the documented ValueError
        raise AssertionError(f"raised {type(error).__name__} instead of ValueError") from None
    raise AssertionError("no error raised")


def close(got: torch.Tensor, expected: torch.Tensor, what: str = "output") -> None:
    assert isinstance(got, torch.Tensor), f"{what} is {type(got).__name__}, not a tensor"
    assert got.shape == expected.shape, f"{what} has shape {tuple(got.shape)}, expected {tuple(expected.shape)}"
    assert got.dtype == expected.dtype, f"{what} has dtype {got.dtype}, expected {expected.dtype}"
    tolerance = {torch.bfloat16: 3e-2}.get(expected.dtype, 1e-5)
    torch.testing.assert_close(got, expected, atol=tolerance, rtol=tolerance, msg=lambda m: f"{what}: {m}")


# ---------------------------------------------------------------- stage 6: against F.scaled_dot_product_attention

def sdpa_case(shapes: tuple[tuple, tuple, tuple], dtype: torch.dtype = torch.float32,
              attn_mask: torch.Tensor | None = None, **options) -> Check:
    """Check the learner's function against torch's on seeded random query, key and value of ``shapes``."""
    if attn_mask is not None:
        options["attn_mask"] = attn_mask.to(dtype) if attn_mask.is_floating_point() else attn_mask

    def check(module: ModuleType) -> None:
        generator = torch.Generator().manual_seed(len(shapes[0]) * 100 + shapes[0][-2])
        q, k, v = (torch.randn(*shape, generator=generator).to(dtype) for shape in shapes)
        expected = F.scaled_dot_product_attention(q, k, v, **options)
        close(module.scaled_dot_product_attention(q, k, v, **options), expected)
    return check


def random_keep(*shape: int, fully_masked_row: int | None = None) -> torch.Tensor:
    """A boolean mask (True = take part) with about 40% False and key 0 kept, except in ``fully_masked_row``."""
    keep = torch.rand(*shape, generator=torch.Generator().manual_seed(7)) > 0.4
    keep[..., 0] = True
    if fully_masked_row is not None:
        keep[..., fully_masked_row, :] = False
    return keep


def random_bias(*shape: int, minus_inf: float = 0.0, fully_masked_row: int | None = None) -> torch.Tensor:
    """A float mask added to the scores: normal noise, a share ``minus_inf`` of -inf, maybe a row of -inf."""
    generator = torch.Generator().manual_seed(11)
    bias = torch.randn(*shape, generator=generator)
    bias = bias.masked_fill(torch.rand(*shape, generator=generator) < minus_inf, float("-inf"))
    bias[..., 0] = bias[..., 0].clamp_min(-1.0)
    if fully_masked_row is not None:
        bias[..., fully_masked_row, :] = float("-inf")
    return bias


def dropout_acts_on_weights(module: ModuleType) -> None:
    """With value = [identity | ones], the output shows the dropped weights and their row sums."""
    p, (b, h, n, e) = 0.3, (8, 4, 16, 8)
    generator = torch.Generator().manual_seed(5)
    q, k = torch.randn(b, h, n, e, generator=generator), torch.randn(b, h, n, e, generator=generator)
    value = torch.cat([torch.eye(n), torch.ones(n, 1)], dim=-1).expand(b, h, n, n + 1).contiguous()
    weights = F.scaled_dot_product_attention(q, k, value[..., :n], is_causal=True)
    torch.manual_seed(0)
    out = module.scaled_dot_product_attention(q, k, value, dropout_p=p, is_causal=True)
    assert out.shape == value.shape, f"output has shape {tuple(out.shape)}"
    dropped = out[..., :n]
    kept = dropped != 0
    live = weights > 0
    rate = 1 - kept[live].float().mean().item()
    assert abs(rate - p) < 0.03, f"dropout_p={p} zeroed {rate:.1%} of the attention weights"
    torch.testing.assert_close(dropped[kept], (weights / (1 - p))[kept], atol=1e-5, rtol=1e-4,
                               msg=lambda m: f"kept weights are not weight / (1 - p): {m}")
    torch.testing.assert_close(out[..., n], dropped.sum(-1), atol=1e-5, rtol=1e-4,
                               msg=lambda m: f"output is not (dropped weights) @ value: {m}")


def stage6_checks() -> dict[str, Check]:
    b, h, g = 2, 6, 2
    bf16 = torch.bfloat16
    return {
        "2-D, L=S=4": sdpa_case(((4, 8), (4, 8), (4, 8))),
        "3-D, L=5 S=7 E=8 Ev=6": sdpa_case(((b, 5, 8), (b, 7, 8), (b, 7, 6))),
        "4-D, L=5 S=7 E=8 Ev=4": sdpa_case(((b, 3, 5, 8), (b, 3, 7, 8), (b, 3, 7, 4))),
        "5-D, L=S=6": sdpa_case(((2, 2, 3, 6, 8), (2, 2, 3, 6, 8), (2, 2, 3, 6, 8))),
        "is_causal, L=S=6": sdpa_case(((b, 3, 6, 8), (b, 3, 6, 8), (b, 3, 6, 8)), is_causal=True),
        "is_causal, L=3 < S=7": sdpa_case(((b, 3, 3, 8), (b, 3, 7, 8), (b, 3, 7, 8)), is_causal=True),
        "is_causal, L=7 > S=3": sdpa_case(((b, 3, 7, 8), (b, 3, 3, 8), (b, 3, 3, 8)), is_causal=True),
        "is_causal, 3-D, L=4 S=6": sdpa_case(((b, 4, 8), (b, 6, 8), (b, 6, 8)), is_causal=True),
        "bool mask (L, S)": sdpa_case(((b, 3, 5, 8), (b, 3, 7, 8), (b, 3, 7, 8)), attn_mask=random_keep(5, 7)),
        "bool mask (B, 1, L, S)": sdpa_case(((b, 3, 5, 8), (b, 3, 6, 8), (b, 3, 6, 8)),
                                            attn_mask=random_keep(b, 1, 5, 6)),
        "bool mask, row 2 fully masked": sdpa_case(((b, 3, 5, 8), (b, 3, 6, 8), (b, 3, 6, 8)),
                                                   attn_mask=random_keep(5, 6, fully_masked_row=2)),
        "float mask (L, S)": sdpa_case(((b, 3, 5, 8), (b, 3, 7, 8), (b, 3, 7, 8)), attn_mask=random_bias(5, 7)),
        "float mask with -inf, (1, H, L, S)": sdpa_case(((b, 3, 5, 8), (b, 3, 6, 8), (b, 3, 6, 8)),
                                                        attn_mask=random_bias(1, 3, 5, 6, minus_inf=0.3)),
        "float mask, row 1 all -inf": sdpa_case(((b, 3, 5, 8), (b, 3, 6, 8), (b, 3, 6, 8)),
                                                attn_mask=random_bias(5, 6, fully_masked_row=1)),
        "scale=0.3": sdpa_case(((b, 3, 5, 8), (b, 3, 7, 8), (b, 3, 7, 8)), scale=0.3),
        "scale=2.0, is_causal, L=4 S=6": sdpa_case(((b, 3, 4, 8), (b, 3, 6, 8), (b, 3, 6, 8)), scale=2.0,
                                                  is_causal=True),
        "enable_gqa, 6 query heads / 2": sdpa_case(((b, h, 4, 8), (b, g, 5, 8), (b, g, 5, 8)), enable_gqa=True),
        "enable_gqa, 6 / 3, is_causal, E != Ev": sdpa_case(((b, h, 5, 8), (b, 3, 6, 8), (b, 3, 6, 4)),
                                                          enable_gqa=True, is_causal=True),
        "enable_gqa, 3-D (H, L, E)": sdpa_case(((h, 4, 8), (g, 4, 8), (g, 4, 8)), enable_gqa=True),
        "enable_gqa, bool mask (B, 1, L, S)": sdpa_case(((b, h, 4, 8), (b, g, 5, 8), (b, g, 5, 8)),
                                                        enable_gqa=True, attn_mask=random_keep(b, 1, 4, 5)),
        "bfloat16, 4-D": sdpa_case(((b, 3, 5, 8), (b, 3, 7, 8), (b, 3, 7, 8)), dtype=bf16),
        "bfloat16, is_causal, L=3 < S=7": sdpa_case(((b, 3, 3, 8), (b, 3, 7, 8), (b, 3, 7, 8)), dtype=bf16,
                                                   is_causal=True),
        "bfloat16, bool mask, row 2 fully masked": sdpa_case(((b, 3, 5, 8), (b, 3, 6, 8), (b, 3, 6, 8)),
                                                             dtype=bf16, attn_mask=random_keep(5, 6, fully_masked_row=2)),
        "bfloat16, float mask": sdpa_case(((b, 3, 5, 8), (b, 3, 7, 8), (b, 3, 7, 8)), dtype=bf16,
                                          attn_mask=random_bias(5, 7)),
        "bfloat16, enable_gqa, is_causal": sdpa_case(((b, h, 5, 8), (b, g, 5, 8), (b, g, 5, 8)), dtype=bf16,
                                                     enable_gqa=True, is_causal=True),
        "dropout_p=0.3 on the weights, rescaled": dropout_acts_on_weights,
    }


# ---------------------------------------------------------------- stages 7 and 8: against references/

def reference(module_name: str) -> ModuleType:
    return importlib.import_module(f"tests.submissions.references.{module_name}")


def built(factory: Callable[[], torch.nn.Module], seed: int = 123) -> torch.nn.Module:
    torch.manual_seed(seed)
    return factory().eval()


def same_parameters(got: torch.nn.Module, expected: torch.nn.Module) -> None:
    got_shapes = {name: tuple(p.shape) for name, p in got.named_parameters()}
    expected_shapes = {name: tuple(p.shape) for name, p in expected.named_parameters()}
    assert got_shapes == expected_shapes, f"parameters {got_shapes}, expected {expected_shapes}"
    for name, parameter in expected.named_parameters():
        assert torch.equal(dict(got.named_parameters())[name], parameter), \
            f"{name} differs from the reference built from the same seed (creation order?)"


def inputs(seed: int, num_tokens: int, d_in: int) -> torch.Tensor:
    return torch.randn(2, num_tokens, d_in, generator=torch.Generator().manual_seed(seed))


STAGE5_BATCH = torch.tensor([[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64],
                             [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]]).expand(2, 6, 3)


def stage5_reference_matches_the_guide() -> None:
    """docs/stage5.md's worked example: row 1 of MultiHeadAttention(3, 2, 6, 0.0, num_heads=2) with seed 123."""
    mha = built(lambda: reference("stage5_multihead_attention").MultiHeadAttention(3, 2, 6, 0.0, num_heads=2))
    with torch.no_grad():
        row = mha(STAGE5_BATCH)[:, 0]
    torch.testing.assert_close(row, torch.tensor([[0.3190, 0.4858]] * 2), atol=1e-4, rtol=0)


class KVCacheChecks:
    """MultiHeadAttentionKV(8, 12, 10, 0.0, num_heads=3) against stage 5's full causal forward."""

    D_IN, D_OUT, HEADS, CONTEXT = 8, 12, 3, 10

    def __init__(self, module: ModuleType):
        self.module = module
        self.stage5 = reference("stage5_multihead_attention").MultiHeadAttention

    def pair(self, qkv_bias: bool = False) -> tuple[torch.nn.Module, torch.nn.Module]:
        arguments = (self.D_IN, self.D_OUT, self.CONTEXT, 0.0, self.HEADS)
        return (built(lambda: self.module.MultiHeadAttentionKV(*arguments, qkv_bias=qkv_bias)),
                built(lambda: self.stage5(*arguments, qkv_bias=qkv_bias)))

    def decode(self, attention: torch.nn.Module, x: torch.Tensor, chunks: list[int]) -> torch.Tensor:
        outputs, start = [], 0
        for size in chunks:
            outputs.append(attention(x[:, start:start + size], use_cache=True))
            start += size
        return torch.cat(outputs, dim=1)


def stage7_checks() -> dict[str, Check]:
    def same_weights(qkv_bias: bool) -> Check:
        def check(module: ModuleType) -> None:
            same_parameters(*KVCacheChecks(module).pair(qkv_bias))
        return check

    def uncached_forward(module: ModuleType) -> None:
        attention, stage5 = KVCacheChecks(module).pair()
        x = inputs(1, 7, KVCacheChecks.D_IN)
        close(attention(x), stage5(x))

    def empty_when_new(module: ModuleType) -> None:
        attention, _ = KVCacheChecks(module).pair()
        assert attention.cache_k is None and attention.cache_v is None, "cache_k / cache_v not None when new"

    def chunked(chunks: list[int]) -> Check:
        def check(module: ModuleType) -> None:
            checks = KVCacheChecks(module)
            attention, stage5 = checks.pair()
            x = inputs(2, sum(chunks), checks.D_IN)
            close(checks.decode(attention, x, chunks), stage5(x))
        return check

    def cache_contents(module: ModuleType) -> None:
        checks = KVCacheChecks(module)
        attention, stage5 = checks.pair()
        x = inputs(3, 6, checks.D_IN)
        for t in range(6):
            attention(x[:, t:t + 1], use_cache=True)
            for name, projection in (("cache_k", stage5.W_key), ("cache_v", stage5.W_value)):
                expected = stage5.split_heads(projection(x[:, :t + 1]))
                close(getattr(attention, name), expected, f"{name} after {t + 1} tokens")

    def reset_then_new_sequence(module: ModuleType) -> None:
        checks = KVCacheChecks(module)
        attention, stage5 = checks.pair()
        checks.decode(attention, inputs(4, 10, checks.D_IN), [6, 4])
        attention.reset_cache()
        assert attention.cache_k is None, "cache_k is not None after reset_cache()"
        assert attention.cache_v is None, "cache_v is not None after reset_cache()"
        x = inputs(5, 8, checks.D_IN)
        close(checks.decode(attention, x, [2, 5, 1]), stage5(x))

    def uncached_ignores_cache(module: ModuleType) -> None:
        checks = KVCacheChecks(module)
        attention, stage5 = checks.pair()
        checks.decode(attention, inputs(6, 5, checks.D_IN), [3, 2])
        x = inputs(7, 4, checks.D_IN)
        close(attention(x), stage5(x))

    def refuses_past_context(chunks: list[int]) -> Check:
        def check(module: ModuleType) -> None:
            checks = KVCacheChecks(module)
            attention, _ = checks.pair()
            x = inputs(8, sum(chunks), checks.D_IN)
            if chunks[:-1]:
                checks.decode(attention, x, chunks[:-1])
            raises_value_error(lambda: attention(x[:, sum(chunks[:-1]):], use_cache=True))
        return check

    return {
        "parameters equal stage 5's (same seed)": same_weights(False),
        "parameters equal stage 5's (same seed, qkv_bias=True)": same_weights(True),
        "uncached forward equals stage 5": uncached_forward,
        "cache_k / cache_v are None when new": empty_when_new,
        "one token at a time (7 tokens)": chunked([1] * 7),
        "chunks 3, 1, 4, 2 (fills context_length exactly)": chunked([3, 1, 4, 2]),
        "prefill 5, then 1, 1": chunked([5, 1, 1]),
        "cache_k / cache_v hold (b, heads, tokens, head_dim) keys/values": cache_contents,
        "reset_cache() empties; a new sequence decodes right": reset_then_new_sequence,
        "use_cache=False ignores a filled cache": uncached_ignores_cache,
        "ValueError: 10 cached, 1 more": refuses_past_context([6, 4, 1]),
        "ValueError: 8 cached, chunk of 3": refuses_past_context([8, 3]),
        "ValueError: first chunk of 11": refuses_past_context([11]),
    }


class GQAChecks:
    """GroupedQueryAttention(8, 24, 10, dropout, num_heads=6, num_kv_groups) against references/stage8_gqa.py."""

    D_IN, D_OUT, HEADS, CONTEXT = 8, 24, 6, 10

    @classmethod
    def arguments(cls, groups: int, dropout: float = 0.0) -> tuple:
        return cls.D_IN, cls.D_OUT, cls.CONTEXT, dropout, cls.HEADS, groups


def stage8_checks() -> dict[str, Check]:
    yardstick = reference("stage8_gqa").GroupedQueryAttention

    def same_weights(groups: int, qkv_bias: bool = False) -> Check:
        def check(module: ModuleType) -> None:
            arguments = GQAChecks.arguments(groups)
            same_parameters(built(lambda: module.GroupedQueryAttention(*arguments, qkv_bias=qkv_bias)),
                            built(lambda: yardstick(*arguments, qkv_bias=qkv_bias)))
        return check

    def forward(groups: int, dropout: float = 0.0) -> Check:
        def check(module: ModuleType) -> None:
            arguments = GQAChecks.arguments(groups, dropout)
            x = inputs(groups, 7, GQAChecks.D_IN)
            close(built(lambda: module.GroupedQueryAttention(*arguments))(x), built(lambda: yardstick(*arguments))(x))
        return check

    def equals_stage5_with_a_group_per_head(module: ModuleType) -> None:
        d_in, d_out, context, _, heads, _ = GQAChecks.arguments(GQAChecks.HEADS)
        stage5 = reference("stage5_multihead_attention").MultiHeadAttention
        x = inputs(9, 7, d_in)
        close(built(lambda: module.GroupedQueryAttention(d_in, d_out, context, 0.0, heads, heads))(x),
              built(lambda: stage5(d_in, d_out, context, 0.0, heads))(x))

    def equals_torch_sdpa_on_its_projections(module: ModuleType) -> None:
        gqa = built(lambda: module.GroupedQueryAttention(*GQAChecks.arguments(3)))
        x = inputs(10, 7, GQAChecks.D_IN)
        head_dim = GQAChecks.D_OUT // GQAChecks.HEADS
        q, k, v = (projection(x).unflatten(-1, (-1, head_dim)).transpose(1, 2)
                   for projection in (gqa.W_query, gqa.W_key, gqa.W_value))
        context = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        close(gqa(x), gqa.out_proj(context.transpose(1, 2).flatten(2)))

    def gpt2_small_parameter_count(module: ModuleType) -> None:
        gqa = module.GroupedQueryAttention(768, 768, 1024, 0.0, num_heads=12, num_kv_groups=4)
        count = sum(p.numel() for p in gqa.parameters())
        assert count == 1_573_632, f"{count:,} parameters, expected 1,573,632"

    def refuses_heads_not_divisible(module: ModuleType) -> None:
        try:
            module.GroupedQueryAttention(8, 24, 10, 0.0, num_heads=6, num_kv_groups=4)
        except Exception:  # the brief asks for an error; a ValueError is best but any refusal counts here
            return
        raise AssertionError("num_heads=6, num_kv_groups=4 was accepted")

    return {
        "parameters equal the reference's (same seed, 2 groups)": same_weights(2),
        "parameters equal the reference's (same seed, qkv_bias=True)": same_weights(3, qkv_bias=True),
        "forward, 6 heads / 2 groups": forward(2),
        "forward, 6 heads / 3 groups": forward(3),
        "forward, 6 heads / 1 group": forward(1),
        "eval() with dropout=0.5, 2 groups": forward(2, dropout=0.5),
        "num_kv_groups == num_heads equals stage 5": equals_stage5_with_a_group_per_head,
        "equals torch SDPA (enable_gqa) on its own projections": equals_torch_sdpa_on_its_projections,
        "GPT-2 small, 4 groups: 1,573,632 parameters": gpt2_small_parameter_count,
        "num_heads=6, num_kv_groups=4 refused": refuses_heads_not_divisible,
    }


CHECKS = {6: stage6_checks, 7: stage7_checks, 8: stage8_checks}


# ---------------------------------------------------------------- running

def failures(module: ModuleType, checks: dict[str, Check]) -> dict[str, str]:
    """The checks ``module`` fails, each with the first line of why."""
    failed = {}
    for name, check in checks.items():
        try:
            with torch.no_grad():
                check(module)
        except Exception as error:  # any failure of the learner's code is a difference we report
            reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
            failed[name] = f"{type(error).__name__}: {reason}"[:160]
    return failed


def verify_references(loader: SubmissionLoader) -> None:
    stage5_reference_matches_the_guide()
    for stage in (6, 8):
        module = loader.load(REFERENCES / f"{STAGE_FILES[stage]}.py", STAGE_FILES[stage])
        failed = failures(module, CHECKS[stage]())
        assert not failed, f"references/{STAGE_FILES[stage]}.py fails: {failed}"
    print("references: stage 5 matches docs/stage5.md; stages 6 and 8 pass every check")


def verify_manifest(entries: list[dict]) -> None:
    listed = {entry["file"] for entry in entries}
    on_disk = {str(path.relative_to(SUBMISSIONS)) for stage in CHECKS for path in (SUBMISSIONS / f"stage{stage}")
               .glob("*.py")}
    assert listed == on_disk, f"manifest only: {listed - on_disk}; files only: {on_disk - listed}"
    for entry in entries:
        path = Path(entry["file"])
        assert path.parent.name == f"stage{entry['stage']}", entry
        assert path.name.startswith(f"{entry['kind']}_"), entry
        assert entry["mistake"].strip() and entry["symptom"].strip(), entry


def verify_stage(stage: int, entries: list[dict], loader: SubmissionLoader) -> tuple[int, int]:
    base_checks = CHECKS[stage]()
    counts = {"alternative": 0, "mutant": 0}
    print(f"\nstage {stage}: {len(base_checks) + 1} checks")
    for entry in sorted(entries, key=lambda e: (e["kind"], e["file"])):
        path = SUBMISSIONS / entry["file"]
        source = path.read_text()
        checks = {**base_checks, "no banned API": no_banned_api(source)}
        failed = failures(loader.load(path, STAGE_FILES[stage]), checks)
        if entry["kind"] == "alternative":
            assert not failed, f"{entry['file']} should be correct but fails {failed}"
            print(f"  ok  {path.name}: passes all {len(checks)}")
        else:
            assert failed, f"{entry['file']} should differ but passes every check"
            banned = path.name.startswith("mutant_banned_")
            assert banned == ("no banned API" in failed), f"{entry['file']}: the ban check disagrees with its name"
            first, why = next(iter(failed.items()))
            more = f" (+{len(failed) - 1} more)" if len(failed) > 1 else ""
            print(f"  ok  {path.name}: differs on [{first}] {why}{more}")
        counts[entry["kind"]] += 1
    return counts["alternative"], counts["mutant"]


def main() -> int:
    if not __debug__:
        sys.exit("verify.py states its checks with assert: run it without -O")
    entries = tomllib.loads((SUBMISSIONS / "manifest.toml").read_text())["submission"]
    verify_manifest(entries)
    with tempfile.TemporaryDirectory() as root:
        loader = SubmissionLoader(Path(root))
        verify_references(loader)
        totals = {stage: verify_stage(stage, [e for e in entries if e["stage"] == stage], loader)
                  for stage in CHECKS}
    print()
    for stage, (alternatives, mutants) in totals.items():
        print(f"stage {stage}: {alternatives} alternatives match, {mutants} mutants differ")
    return 0


if __name__ == "__main__":
    sys.exit(main())
