"""The public API is the same in exercises/ and solutions/, and the solutions behave as documented."""

import inspect

import pytest
import torch
import torch.nn as nn
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.example_calls import CLASSES, FUNCTIONS


def _signature(function) -> list[tuple]:
    """Parameters and return type, with annotations by name: each package annotates with its own classes."""
    signature = inspect.signature(function)

    def named(annotation):
        return getattr(annotation, "__qualname__", annotation)

    parameters = [(p.name, p.kind, p.default, named(p.annotation)) for p in signature.parameters.values()]
    return parameters + [named(signature.return_annotation)]


@pytest.mark.parametrize("name", FUNCTIONS + CLASSES)
def test_signatures_match(name, exercises, solutions):
    ours, theirs = exercises.name(name), solutions.name(name)
    methods = ["__init__", "forward"] if inspect.isclass(theirs) else [None]
    for method in methods:
        pick = (lambda obj: getattr(obj, method)) if method else (lambda obj: obj)
        assert _signature(pick(ours)) == _signature(pick(theirs)), method


@pytest.mark.parametrize("name", FUNCTIONS + CLASSES)
def test_each_name_lives_in_the_same_stage(name, exercises, solutions):
    def stage_of(impl):
        return [stage for stage, module in impl.modules.items() if name in vars(module)][0]

    assert stage_of(exercises) == stage_of(solutions)


# Stage 1 ---------------------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(num_tokens=st.integers(1, 12), d_in=st.integers(1, 8), seed=st.integers(0, 2**31 - 1))
def test_simple_attention_agrees_with_its_parts(num_tokens, d_in, seed, solutions):
    torch.manual_seed(seed)
    inputs = torch.rand(num_tokens, d_in)
    every = solutions.simple_self_attention(inputs)
    for i in range(num_tokens):
        weights = solutions.softmax_naive(solutions.attention_scores(inputs, inputs[i]))
        assert weights.sum().item() == pytest.approx(1.0, abs=1e-5)
        torch.testing.assert_close(solutions.context_vector(inputs, weights), every[i])


# Stages 2 and 3 --------------------------------------------------------------------------


def test_self_attention_parameters_are_what_the_book_defines(solutions):
    v1, v2 = solutions.SelfAttention_v1(3, 5), solutions.SelfAttention_v2(3, 5, qkv_bias=True)
    assert [n for n, _ in v1.named_parameters()] == ["W_query", "W_key", "W_value"]
    assert all(p.shape == (3, 5) for p in v1.parameters())
    assert all(isinstance(getattr(v2, n), nn.Linear) for n in ["W_query", "W_key", "W_value"])
    assert v2.W_query.weight.shape == (5, 3) and v2.W_query.bias is not None


@settings(max_examples=30, deadline=None)
@given(d_in=st.integers(1, 6), d_out=st.integers(1, 6), num_tokens=st.integers(1, 7), seed=st.integers(0, 2**31 - 1))
def test_transfer_makes_v1_equal_v2_in_place(d_in, d_out, num_tokens, seed, solutions):
    torch.manual_seed(seed)
    sa_v1, sa_v2 = solutions.SelfAttention_v1(d_in, d_out), solutions.SelfAttention_v2(d_in, d_out)
    x = torch.rand(num_tokens, d_in)
    returned = solutions.transfer_weights_v2_to_v1(sa_v2, sa_v1)
    assert returned is sa_v1
    torch.testing.assert_close(sa_v1(x), sa_v2(x))
    torch.testing.assert_close(sa_v1.W_key.data, sa_v2.W_key.weight.T)


def test_transfer_refuses_bias_and_says_why(solutions):
    with pytest.raises(ValueError, match="bias"):
        solutions.transfer_weights_v2_to_v1(
            solutions.SelfAttention_v2(3, 2, qkv_bias=True), solutions.SelfAttention_v1(3, 2)
        )


# Stage 4 ---------------------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(n=st.integers(1, 10), batch=st.integers(1, 3), d_k=st.integers(1, 16), seed=st.integers(0, 2**31 - 1))
def test_both_masking_routes_give_the_same_causal_weights(n, batch, d_k, seed, solutions):
    torch.manual_seed(seed)
    scores = torch.randn(batch, n, n)
    renormalized = solutions.mask_and_renormalize(torch.softmax(scores / d_k**0.5, dim=-1))
    via_inf = solutions.causal_softmax(scores, d_k)
    torch.testing.assert_close(renormalized, via_inf)
    assert torch.triu(via_inf, diagonal=1).abs().max() == 0
    torch.testing.assert_close(via_inf.sum(-1), torch.ones(batch, n))


@pytest.mark.parametrize("name", ["CausalAttention", "MultiHeadAttention"])
def test_mask_is_a_saved_buffer_not_a_parameter(name, solutions):
    module = solutions.name(name)(3, 4, 7, 0.0, *([2] if name == "MultiHeadAttention" else []))
    assert "mask" in dict(module.named_buffers())
    assert "mask" in module.state_dict()
    assert "mask" not in dict(module.named_parameters())
    assert module.mask.shape == (7, 7)
    assert module.double().mask.dtype == torch.float64  # buffers follow the module


@pytest.mark.parametrize("name", ["CausalAttention", "MultiHeadAttention", "MultiHeadAttentionWrapper"])
def test_outputs_never_depend_on_later_tokens_and_short_inputs_work(name, solutions):
    torch.manual_seed(0)
    extra = [2] if name != "CausalAttention" else []
    module = solutions.name(name)(5, 4, 10, 0.0, *extra).eval()
    x = torch.rand(3, 7, 5)  # 7 tokens < context_length 10
    changed = x.clone()
    changed[:, 4:] = torch.rand(3, 3, 5)
    torch.testing.assert_close(module(x)[:, :4], module(changed)[:, :4])
    assert not torch.allclose(module(x)[:, 4:], module(changed)[:, 4:])


def test_dropout_acts_in_training_only(solutions):
    torch.manual_seed(0)
    module = solutions.CausalAttention(4, 4, 16, 0.5)
    x = torch.rand(2, 16, 4)
    module.eval()
    torch.testing.assert_close(module(x), module(x))
    module.train()
    assert not torch.allclose(module(x), module(x))


# Stage 5 ---------------------------------------------------------------------------------


def test_wrapper_is_its_heads_side_by_side(solutions):
    torch.manual_seed(1)
    wrapper = solutions.MultiHeadAttentionWrapper(5, 3, 8, 0.0, num_heads=4)
    assert isinstance(wrapper.heads, nn.ModuleList) and len(wrapper.heads) == 4
    x = torch.rand(2, 6, 5)
    torch.testing.assert_close(wrapper(x), torch.cat([head(x) for head in wrapper.heads], dim=-1))
    assert wrapper(x).shape == (2, 6, 12)


def test_one_head_multihead_is_causal_attention_then_out_proj(solutions):
    torch.manual_seed(2)
    mha = solutions.MultiHeadAttention(5, 4, 8, 0.0, num_heads=1)
    single = solutions.CausalAttention(5, 4, 8, 0.0)
    for name in ["W_query", "W_key", "W_value"]:
        getattr(single, name).load_state_dict(getattr(mha, name).state_dict())
    x = torch.rand(3, 8, 5)
    torch.testing.assert_close(mha(x), mha.out_proj(single(x)))


def test_multihead_heads_are_independent_slices(solutions):
    """Head h of a weight-split layer is a CausalAttention on rows h*head_dim:(h+1)*head_dim."""
    torch.manual_seed(3)
    mha = solutions.MultiHeadAttention(5, 6, 8, 0.0, num_heads=3)
    x = torch.rand(2, 8, 5)
    heads = []
    for h in range(3):
        head = solutions.CausalAttention(5, 2, 8, 0.0)
        rows = slice(2 * h, 2 * h + 2)
        for name in ["W_query", "W_key", "W_value"]:
            getattr(head, name).weight.data = getattr(mha, name).weight.data[rows]
        heads.append(head(x))
    torch.testing.assert_close(mha(x), mha.out_proj(torch.cat(heads, dim=-1)))


def test_multihead_refuses_indivisible_d_out(solutions):
    with pytest.raises(ValueError, match="divisible"):
        solutions.MultiHeadAttention(4, 5, 8, 0.0, num_heads=2)
