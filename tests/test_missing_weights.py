"""What a module's missing documented weights prove (grader/judge/checks/naming.py: missing_weights_hint)."""

import torch

from grader.judge.checks.naming import missing_weights_hint

STATE = {"out_proj.weight": torch.zeros(4, 4), "out_proj.bias": torch.zeros(4)}
PROJECTIONS = [["W_query.weight", [4, 3]], ["W_key.weight", [4, 3]], ["W_value.weight", [4, 3]]]


def test_an_output_projection_under_another_name_without_a_bias_is_out_proj_without_its_bias():
    held = [*PROJECTIONS, ["output_projection.weight", [4, 4]]]  # real corpus 4
    assert missing_weights_hint(["out_proj.weight", "out_proj.bias"], held, STATE) == "out-proj-bias"


def test_no_output_projection_at_all_is_missing():
    rejected = ["out_proj.weight", "out_proj.bias"]
    assert missing_weights_hint(rejected, PROJECTIONS, STATE) == "missing-out-proj"
    assert missing_weights_hint(rejected) == "missing-out-proj"  # nothing known of what the module holds
    # a renamed one with its bias is paired by what it computes (role_pairing): missing only for other shapes
    other = [*PROJECTIONS, ["proj.weight", [4, 3]], ["proj.bias", [4]]]
    assert missing_weights_hint(rejected, other, STATE) == "missing-out-proj"


def test_out_projs_bias_alone():
    assert missing_weights_hint(["out_proj.bias"]) == "out-proj-bias"
