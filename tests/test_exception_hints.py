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
        ("name 'qkv_bias' is not defined", "name-undefined"),
        # one of torch.nn's layers where a tensor belongs: transposed, multiplied, indexed, handed to a tensor function
        ("'Linear' object has no attribute 'transpose'", "layer-not-called"),
        ("unsupported operand type(s) for @: 'Tensor' and 'Linear'", "layer-not-called"),
        ("'Dropout' object is not subscriptable", "layer-not-called"),
        ("softmax(): argument 'input' (position 1) must be Tensor, not Linear", "layer-not-called"),
        ("'Linear' object has no attribute 'wieght'", "attribute-missing"),  # a layer's misspelt attribute
        ("unsupported operand type(s) for @: 'Tensor' and 'NoneType'", None),
    ],
)
def test_an_exception_names_the_cause_its_words_prove(message, hint):
    assert hint_for_exception(message) == hint


def test_a_documented_function_that_refuses_the_documented_call_has_another_signature():
    # real corpus 4: a stage 6 without scale, dropout_p and enable_gqa
    refused = "scaled_dot_product_attention() got an unexpected keyword argument 'scale'"
    assert hint_for_exception(refused, at_call=True) == "signature"
    assert hint_for_exception(refused) is None  # raised inside the learner's code: its own call of the function
    assert hint_for_exception("softmax() got an unexpected keyword argument 'dimm'", at_call=True) is None
