"""Stand-ins for the stages a worker does not grade, so a mistake costs points only where it is made.

A worker grading stage N imports the learner's stage N, while `exercises.<other stage>` resolves
to a module built here. Stand-in classes carry only the documented attributes, created in the
documented order (so seeded weights are the documents'); their forward is a plain projection,
x -> W_value(x), which lets a check see what the learner's code does with a head's output
without running any attention code of ours.
"""

import sys
import types

import torch
import torch.nn as nn

from grader.runner.implementation import STAGE_MODULES, SUBMISSION_PACKAGE
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


def seeded_transfer_pair(d_in: int, d_out: int, seed: int,
                         qkv_bias: bool = False) -> tuple[StandInSelfAttention_v1, StandInSelfAttention_v2]:
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


def _unavailable(name: str, stage: int):
    def stand_in(*args, **kwargs):
        raise NotImplementedError(f"{name} (stage {stage}) is not available while another stage is graded")

    stand_in.__name__ = name
    return stand_in


STAND_INS: dict[int, dict[str, object]] = {
    1: {n: _unavailable(n, 1) for n in ["attention_scores", "softmax_naive", "context_vector", "simple_self_attention"]},
    2: {"SelfAttention_v1": StandInSelfAttention_v1, "SelfAttention_v2": StandInSelfAttention_v2},
    3: {"transfer_weights_v2_to_v1": _unavailable("transfer_weights_v2_to_v1", 3)},
    4: {
        "mask_and_renormalize": _unavailable("mask_and_renormalize", 4),
        "causal_softmax": _unavailable("causal_softmax", 4),
        "CausalAttention": StandInCausalAttention,
    },
    5: {n: _unavailable(n, 5) for n in ["MultiHeadAttentionWrapper", "MultiHeadAttention"]},
}


def install_stand_ins(graded_stage: int) -> None:
    """Make every stage but ``graded_stage`` importable as stand-ins under the submission package."""
    for stage, module_name in STAGE_MODULES.items():
        if stage == graded_stage:
            continue
        module = types.ModuleType(f"{SUBMISSION_PACKAGE}.{module_name}", f"stand-in for stage {stage}")
        module.__dict__.update(STAND_INS[stage])
        sys.modules[module.__name__] = module
