"""An exception's own words name their cause only where they prove it (grader/judge/exception_hints.py)."""

import pytest

from grader.judge.exception_hints import hint_for_exception


@pytest.mark.parametrize(
    ("message", "hint"),
    [
        ("'SelfAttention_v2' object has no attribute 'W'", "attribute-missing"),
        ("'StandInSelfAttention_v2' object has no attribute 'qkv_bias'", "undocumented-attribute"),
        # a value of another kind where a module or tensor belongs: no attribute was misspelt
        ("'NoneType' object has no attribute 'masked_fill'", None),
        ("'int' object has no attribute 'shape'", None),
        ("MultiHeadAttentionWrapper.__init__() got an unexpected keyword argument 'd_in'", "signature"),
        ("CausalAttention.__init__() takes 1 positional argument but 5 were given", "signature"),
        ("CausalAttention.__init__() missing 1 required positional argument: 'dropout'", "signature"),
        ("forward() takes 2 positional arguments but 3 were given", None),
        ("Expected all tensors to be on the same device, but found at least two devices", "device-mismatch"),
        ("mat1 and mat2 shapes cannot be multiplied (6x3 and 2x3)", None),
    ],
)
def test_an_exception_names_the_cause_its_words_prove(message, hint):
    assert hint_for_exception(message) == hint
