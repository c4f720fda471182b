"""Printed values parse into the right numbers and tolerances, and a wrong answer is caught."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.judge.document_values import parse_printed
from grader.judge.tensor_diff import describe_difference


def test_four_decimals_allow_one_unit_in_the_last_digit():
    values, tolerance = parse_printed("[0.9544, -1.4950]")
    assert values.tolist() == [0.9544, -1.4950]
    assert tolerance.tolist() == pytest.approx([1e-4, 1e-4])


def test_scientific_notation_tolerance_follows_the_exponent():
    values, tolerance = parse_printed("[4.4966e-05, 9.9994e-01]")
    assert values.tolist() == pytest.approx([4.4966e-05, 0.99994])
    assert tolerance.tolist() == pytest.approx([1e-9, 1e-5])


def test_whole_numbers_and_negative_infinity_are_exact():
    values, tolerance = parse_printed("[[2., -inf], [0., 2360064]]")
    assert values[0, 1].item() == float("-inf")
    assert values[1, 1].item() == 2360064
    assert (tolerance <= 1e-6).all()


def test_nested_shape_is_kept():
    values, _ = parse_printed("[[[1., 2.]], [[3., 4.]]]")
    assert values.shape == (2, 1, 2)


def test_unbalanced_text_is_refused():
    with pytest.raises(ValueError, match="unbalanced"):
        parse_printed("[[0.1, 0.2]")


def test_difference_names_shape():
    expected, tolerance = parse_printed("[[0.1, 0.2]]")
    assert "expected shape (1, 2), got (2, 1)" in describe_difference(torch.zeros(2, 1), expected, tolerance)


def test_difference_names_first_and_largest_mismatch():
    expected, tolerance = parse_printed("[0.1000, 0.2000, 0.3000]")
    message = describe_difference(torch.tensor([0.1, 0.25, 0.4]), expected, tolerance)
    assert "2 of 3 values differ" in message
    assert "first at index (1,)" in message
    assert "largest difference 0.1 at index (2,)" in message


def test_difference_names_nan_and_infinity():
    expected, tolerance = parse_printed("[0.5000, -inf]")
    assert "NaN at index (0,)" in describe_difference(torch.tensor([float("nan"), 0.0]), expected, tolerance)
    assert "at index (1,) expected -inf, got 0" in describe_difference(torch.tensor([0.5, 0.0]), expected, tolerance)
    assert "expected 0.5, got inf" in describe_difference(
        torch.tensor([float("inf"), -float("inf")]), expected, tolerance
    )


def test_difference_refuses_non_tensors():
    expected, tolerance = parse_printed("[1.0000]")
    assert "got a list" in describe_difference([1.0], expected, tolerance)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-50, 50, allow_nan=False, width=32), min_size=1, max_size=8), st.sampled_from([2, 4]))
def test_printing_to_n_decimals_round_trips_and_two_units_off_does_not(numbers, decimals):
    printed = "[" + ", ".join(f"{x:.{decimals}f}" for x in numbers) + "]"
    expected, tolerance = parse_printed(printed)
    actual = torch.tensor(numbers, dtype=torch.float32)
    assert describe_difference(actual, expected, tolerance) is None
    off = actual.double().clone()
    off[0] += 2.5 * 10.0**-decimals
    assert describe_difference(off, expected, tolerance) is not None


def test_difference_takes_no_shortcut_past_infinities_or_nan():
    expected = torch.tensor([1.0, -torch.inf])
    tolerance = torch.full((2,), 1e-4)
    assert describe_difference(torch.tensor([1.0, -torch.inf]), expected, tolerance) is None
    assert describe_difference(torch.tensor([1.0, torch.inf]), expected, tolerance) is not None
    assert describe_difference(torch.tensor([1.0, 0.0]), expected, tolerance) is not None
    assert "NaN" in describe_difference(torch.tensor([torch.nan, -torch.inf]), expected, tolerance)
