"""Stand-ins for the stages a worker does not grade, so a mistake costs points only where it is made.

A worker grading stage N imports the learner's stage N, while `exercises.<other stage>` resolves
to a module built here. Stand-in classes carry only the documented attributes, created in the
documented order (so seeded weights are the documents'); their forward is a plain projection,
x -> W_value(x), which lets a check see what the learner's code does with a head's output
without running any attention code of ours. Stage 5's MultiHeadAttention is there to be
subclassed (stage 7): its forward refuses to run, since a projection would pass for a wrong
stage 5 and attention would be the answer to it.

A stage's function that a later stage may call stands in as PyTorch's own function of the same
semantics: stage 6's scaled_dot_product_attention is torch's F.scaled_dot_product_attention, so a
later stage that calls it gets the right attention whatever stage 6 holds, and no stage's answer
is written here.
"""

import sys
import types

import torch
import torch.nn as nn
import torch.nn.functional as F

from grader.runner.implementation import SUBMISSION_PACKAGE
from grader.runner.route_names import STAND_IN_KERNEL
from grader.runner.seeding import manual_seed


class StandInSelfAttention_v1(nn.Module):
    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.W_value


class StandInSelfAttention_v2(nn.Module):
    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.W_value(x)


def seeded_transfer_pair(
    d_in: int, d_out: int, seed: int, qkv_bias: bool = False
) -> tuple[StandInSelfAttention_v1, StandInSelfAttention_v2]:
    """The two modules of a weight transfer under ``seed``, v1 first as in exercise 3.1.

    The worker hands them to the learner; the judge builds them again to know what v2 held, since
    learner code can rewrite anything the worker records beside it.
    """
    manual_seed(seed)
    return StandInSelfAttention_v1(d_in, d_out), StandInSelfAttention_v2(d_in, d_out, qkv_bias=qkv_bias)


class StandInCausalAttention(nn.Module):
    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, qkv_bias: bool = False):
        super().__init__()
        self.d_out = d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.W_value(x)


class StandInMultiHeadAttention(nn.Module):
    def __init__(
        self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int, qkv_bias: bool = False
    ):
        super().__init__()
        if d_out % num_heads:  # the documented refusal: a class built on this one may leave it to super()
            raise ValueError(f"d_out must be divisible by num_heads (got d_out={d_out}, num_heads={num_heads})")
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError(
            "MultiHeadAttention.forward (stage 5) is not run while another stage is graded: a class "
            "built on it computes its attention in a forward of its own (docs/stage7.md, "
            "'Building on stage 5')"
        )


_attention_off = False  # set once, before learner code loads (install_stand_ins)


def stand_in_scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    """Stage 6's scaled_dot_product_attention while another stage is graded: torch's own, which it reproduces.

    Where torch's attention is switched off (grader.runner.routes), the kernel torch's own computes with,
    which is left on for this stand-in to call.
    """
    if _attention_off:
        if attn_mask is not None and attn_mask.dtype == torch.bool:  # as torch's own makes it a bias first
            attn_mask = torch.zeros_like(attn_mask, dtype=query.dtype).masked_fill(~attn_mask, -torch.inf)
        output, _ = getattr(torch.ops.aten, STAND_IN_KERNEL)(
            query, key, value, attn_mask, dropout_p, is_causal, None, scale=scale, enable_gqa=enable_gqa
        )
        return output
    return F.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=attn_mask,
        dropout_p=dropout_p,
        is_causal=is_causal,
        scale=scale,
        enable_gqa=enable_gqa,
    )


def _unavailable(name: str, stage: int):
    def stand_in(*args, **kwargs):
        raise NotImplementedError(f"{name} (stage {stage}) is not available while another stage is graded")

    stand_in.__name__ = name
    return stand_in


def stand_in_names(number: int, stage: dict) -> dict[str, object]:
    """What stage ``number``'s public names are while another stage is graded: the class of this module
    the registry names for it in ``stage["stand_ins"]``, else a function that says it is unavailable."""
    return {
        name: globals()[stage["stand_ins"][name]] if name in stage["stand_ins"] else _unavailable(name, number)
        for name in stage["names"]
    }


def install_stand_ins(graded_stage: int, stages: dict[int, dict], attention_off: bool = False) -> None:
    """Make every stage but ``graded_stage`` importable as stand-ins under the submission package.
    ``stages``: stage -> {"module", "names", "stand_ins"}, as the judge sends them
    (grader.core.stages.runner_stages); ``attention_off``: torch's attention is switched off in this worker."""
    global _attention_off
    _attention_off = attention_off
    for number, stage in stages.items():
        if number == graded_stage:
            continue
        module = types.ModuleType(f"{SUBMISSION_PACKAGE}.{stage['module']}", f"stand-in for stage {number}")
        module.__dict__.update(stand_in_names(number, stage))
        sys.modules[module.__name__] = module
