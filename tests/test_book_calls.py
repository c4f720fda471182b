"""The runner builds the book's classes the way the book calls them, and finds renamed projections by order."""

import inspect

import pytest
import torch.nn as nn

from grader.core.stages import STAGE_MODULES
from grader.runner.book_calls import BOOK_SIGNATURES, book_constructor, book_signature, projection, renamed
from grader.runner.implementation import load_package


def test_the_book_signatures_are_the_solutions():
    solutions = load_package("solutions", STAGE_MODULES)
    for name in BOOK_SIGNATURES:
        cls = next(getattr(m, name) for m in solutions.modules.values() if hasattr(m, name))
        documented = inspect.signature(cls)
        assert [(p.name, p.default) for p in documented.parameters.values()] == [
            (p.name, p.default) for p in book_signature(name).parameters.values()
        ], name


class Swapped(nn.Module):  # context_length and dropout swapped, no qkv_bias
    def __init__(self, d_in, d_out, dropout, context_length):
        super().__init__()
        self.got = (d_in, d_out, context_length, dropout)


class NoDefault(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias):
        super().__init__()
        self.got = (d_in, d_out, qkv_bias)


class RenamedHeads(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, n_heads, qkv_bias=False):
        super().__init__()
        self.got = (d_in, d_out, context_length, dropout, n_heads, qkv_bias)


class OtherNames(nn.Module):
    def __init__(self, in_dim, out_dim):
        super().__init__()
        self.got = (in_dim, out_dim)


def test_arguments_reach_the_parameters_the_book_names_whatever_their_order():
    build = book_constructor(Swapped, "CausalAttention")
    assert build(3, 2, 6, 0.5).got == (3, 2, 6, 0.5)
    assert build(3, 2, 6, 0.5, False).got == (3, 2, 6, 0.5)  # a qkv_bias at the book's default needs no parameter
    with pytest.raises(
        TypeError, match=r"Swapped|CausalAttention\(d_in, d_out, context_length, dropout, qkv_bias=False\)"
    ):
        build(3, 2, 6, 0.5, True)


def test_a_renamed_parameter_takes_the_books_argument_by_position():
    assert book_constructor(RenamedHeads, "MultiHeadAttention")(3, 2, 6, 0.0, num_heads=2).got == (
        3,
        2,
        6,
        0.0,
        2,
        False,
    )


def test_a_missing_default_is_the_books():
    assert book_constructor(NoDefault, "SelfAttention_v2")(3, 2).got == (3, 2, False)


class BiasedByDefault(nn.Module):  # real corpus 4: qkv_bias defaults to True, and dropout to 0.2
    def __init__(self, d_in, d_out, context_length, dropout=0.2, qkv_bias=True):
        super().__init__()
        self.got = (d_in, d_out, context_length, dropout, qkv_bias)


def test_another_default_gets_the_books_when_the_book_leaves_it_out():
    build = book_constructor(BiasedByDefault, "CausalAttention")
    assert build(3, 2, 6, 0.0).got == (3, 2, 6, 0.0, False)  # the book's call means no bias
    assert build(3, 2, 6, 0.0, qkv_bias=True).got == (3, 2, 6, 0.0, True)
    assert build(3, 2, 6, dropout=0.1).got == (3, 2, 6, 0.1, False)


def test_other_parameter_names_are_called_in_the_books_order():
    assert book_constructor(OtherNames, "SelfAttention_v1")(4, 5).got == (4, 5)
    assert book_constructor(OtherNames, "SelfAttention_v2")(4, 5).got == (4, 5)
    with pytest.raises(TypeError, match=r"the book's signature SelfAttention_v2\(d_in, d_out, qkv_bias=False\) takes"):
        book_constructor(OtherNames, "SelfAttention_v2")(4, 5, True)


def test_one_constructor_per_class_so_callers_may_cache_by_it():
    assert book_constructor(Swapped, "CausalAttention") is book_constructor(Swapped, "CausalAttention")
    assert book_constructor(Swapped, "not_a_book_class") is Swapped


def test_renamed_projections_pair_by_creation_order_kind_and_shape():
    documented = {
        "W_query.weight": (2, 3),
        "W_key.weight": (2, 3),
        "W_value.weight": (2, 3),
        "out_proj.weight": (2, 2),
        "out_proj.bias": (2,),
    }
    held = {"W_q.weight": (2, 3), "W_k.weight": (2, 3), "W_v.weight": (2, 3), "W_o.weight": (2, 2), "W_o.bias": (2,)}
    assert renamed(held, documented) == {
        "W_query.weight": "W_q.weight",
        "W_key.weight": "W_k.weight",
        "W_value.weight": "W_v.weight",
        "out_proj.weight": "W_o.weight",
        "out_proj.bias": "W_o.bias",
    }
    assert renamed(documented, documented) is None  # nothing to rename
    assert renamed({**held, "W_o.bias": (3,)}, documented) is None  # another shape: no pairing
    assert renamed({"W_q": (3, 2), "W_k": (3, 2)}, {"W_query": (3, 2), "W_key": (3, 2), "W_value": (3, 2)}) is None


def test_projection_by_name_or_by_order():
    class Plain(nn.Module):
        def __init__(self):
            super().__init__()
            self.W_q, self.W_k, self.W_v = (
                nn.Parameter(nn.init.zeros_(nn.Linear(2, 2).weight.data.clone()) + i) for i in range(3)
            )
            self.softmax = nn.Softmax(dim=-1)

    module = Plain()
    assert projection(module, "W_key") is module.W_k
    with pytest.raises(AttributeError):
        projection(nn.Linear(2, 2), "W_query")


@pytest.mark.parametrize(
    ("written", "extends"),
    [
        ("d_in, d_out, context_length, dropout, num_heads, qkv_bias=False, max_seq_len=None", True),  # real corpus 5
        ("d_in, d_out, context_length, dropout, num_heads, qkv_bias=False, *, dtype=None", True),
        ("d_in, d_out, context_length, dropout, num_heads, qkv_bias=False, **kwargs", True),
        ("d_in, d_out, context_length, dropout, num_heads, qkv_bias=False, window", False),  # required: calls fail
        ("d_in, d_out, context_length, num_heads, dropout, qkv_bias=False", False),  # another order
        ("d_in, d_out, context_length, dropout, num_heads, qkv_bias=True", False),  # another default
        ("d_in, d_out, context_length, dropout, num_heads, qkv_bias", False),  # the book's default missing
        ("d_in, d_out, context_length, dropout=0.1, num_heads=2, qkv_bias=False", False),  # defaults it lacks
    ],
)
def test_a_signature_that_only_adds_defaulted_parameters_takes_every_book_call(written, extends):
    from grader.judge.class_source import extends_the_book

    assert extends_the_book(written, BOOK_SIGNATURES["MultiHeadAttention"]) is extends
