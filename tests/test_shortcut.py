"""A shortcut check's verdict from each line of evidence: the file as the judge holds it, what the recorder saw,
and what it did not see of a right answer."""

import pytest

from grader.judge.checks.shortcut import (
    ATTENTION_BY_HAND,
    SOFTMAX_BY_HAND,
    TRANSFER_BY_COPY,
    expect_not_spelled,
    expect_work_recorded,
)
from grader.judge.verdict import CheckFailed

HAND_WRITTEN = b"import torch\n\ndef softmax_naive(x):\n    e = torch.exp(x)\n    return e / e.sum()\n"


def hint_of(expectation) -> str | None:
    try:
        expectation()
    except CheckFailed as failed:
        return failed.hint
    return None


def test_the_file_names_the_shortcut_or_the_reach_into_the_grader():
    calls_softmax = b"import torch\n\ndef softmax_naive(x):\n    return torch.softmax(x, 0)\n"
    reaches_in = HAND_WRITTEN + b"\nimport sys\n_caller = sys._getframe\n"
    assert hint_of(lambda: expect_not_spelled({1: HAND_WRITTEN}, 1, "softmax_naive", SOFTMAX_BY_HAND)) is None
    assert hint_of(lambda: expect_not_spelled({1: calls_softmax}, 1, "softmax_naive", SOFTMAX_BY_HAND)) == "banned-api"
    assert (
        hint_of(lambda: expect_not_spelled({1: reaches_in}, 1, "softmax_naive", SOFTMAX_BY_HAND)) == "recorder-tampered"
    )


def test_code_nested_deeper_than_the_judge_reads_is_hiding():
    deep = HAND_WRITTEN + b"\n_hidden = " + b"-" * 5000 + b"1\n"
    assert hint_of(lambda: expect_not_spelled({1: deep}, 1, "softmax_naive", SOFTMAX_BY_HAND)) == "recorder-tampered"


def test_without_a_copy_of_the_file_the_other_lines_judge_alone():
    assert hint_of(lambda: expect_not_spelled({}, 1, "softmax_naive", SOFTMAX_BY_HAND)) is None
    assert hint_of(lambda: expect_not_spelled({1: None}, 1, "softmax_naive", SOFTMAX_BY_HAND)) is None


@pytest.mark.parametrize(
    "shortcut, ops, right, hint",
    [
        (SOFTMAX_BY_HAND, ["div", "exp", "sum"], True, None),
        (SOFTMAX_BY_HAND, ["_softmax", "softmax"], True, "banned-api"),
        (SOFTMAX_BY_HAND, [], True, "recorder-tampered"),  # a right softmax, and no exponential seen
        (SOFTMAX_BY_HAND, ["tolist", "tensor"], True, "recorder-tampered"),  # math.exp on single numbers
        # x / x.sum(): no shortcut, and no right answer to credit (the judge's, not the worker's, verdict)
        (SOFTMAX_BY_HAND, ["div", "sum"], False, "results-first"),
        (SOFTMAX_BY_HAND, [], False, "results-first"),
        (ATTENTION_BY_HAND, ["linear", "matmul", "softmax"], True, None),
        (ATTENTION_BY_HAND, ["linear", "addmm", "view", "transpose"], True, "recorder-tampered"),
        (ATTENTION_BY_HAND, ["scaled_dot_product_attention"], True, "banned-api"),
        (TRANSFER_BY_COPY, ["copy_", "permute"], True, None),
        (TRANSFER_BY_COPY, ["linalg_lstsq"], True, "banned-api"),
        (TRANSFER_BY_COPY, [], True, "recorder-tampered"),
        (TRANSFER_BY_COPY, [], False, "results-first"),
        (TRANSFER_BY_COPY, ["linalg_lstsq"], False, "banned-api"),
    ],
)
def test_what_the_recorder_saw_and_did_not_see(shortcut, ops, right, hint):
    assert hint_of(lambda: expect_work_recorded(ops, shortcut, right, "the function")) == hint
