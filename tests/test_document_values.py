"""The solutions reproduce every value the documents print, and each value is quoted faithfully."""

import re

import pytest
import torch

from grader.judge.document_values import document_values, errata
from grader.judge.tensor_diff import describe_difference
from grader.runner.document_examples import RECIPES, run_recipe
from tests.conftest import seeds_dir

VALUES = document_values()
ERRATA = errata()


@pytest.mark.parametrize("value", VALUES, ids=[v.id for v in VALUES])
def test_solutions_reproduce_document_value(value, solutions):
    problem = value.check(run_recipe(value.recipe, solutions))
    assert problem is None, f"{value.id} ({value.document or value.source}, {value.section}): {problem}"


def _normalized(text: str) -> str:
    # The documents differ from torch's own layout in spaces, line breaks and 002's "> " quoting.
    return re.sub(r"[\s>]", "", text)


@pytest.mark.parametrize("value", VALUES + ERRATA, ids=[v.id for v in VALUES + ERRATA])
def test_printed_text_is_quoted_from_its_document(value):
    if value.document is None:
        assert value.source, f"{value.id} names neither a document nor a source"
        return
    path = seeds_dir() / value.document
    if not path.is_file():
        pytest.skip(f"seed documents not found at {seeds_dir()} (set SEEDS_DIR to check quotes)")
    assert _normalized(value.printed) in _normalized(path.read_text(encoding="utf-8")), (
        f"{value.id}: its printed text does not appear in {value.document}"
    )


def test_every_recipe_is_used_exactly_by_the_data_file():
    named = {v.recipe for v in VALUES + ERRATA}
    assert named - RECIPES.keys() == set(), "values name recipes that do not exist"
    assert RECIPES.keys() - named == set(), "recipes that no value uses"


def test_ids_are_unique_and_name_their_stage():
    ids = [v.id for v in VALUES + ERRATA]
    assert len(ids) == len(set(ids))
    for value in VALUES:
        assert value.id.startswith(f"stage{value.stage}."), value.id


def test_uses_name_public_objects_of_the_stage_modules(solutions):
    for value in VALUES + ERRATA:
        for name in value.uses:
            assert not name.startswith("_")
            solutions.name(name)  # raises LookupError for a name no stage defines


REQUIRED = [
    # The values the curriculum names explicitly.
    "stage1.attn_scores_2", "stage1.attn_weights_2_naive", "stage1.context_vec_2",
    "stage1.attn_scores", "stage1.attn_weights", "stage1.all_context_vecs",
    "stage2.query_2", "stage2.key_2", "stage2.value_2", "stage2.attn_scores_2",
    "stage2.attn_weights_2", "stage2.context_vec_2", "stage2.sa_v1_output", "stage2.sa_v2_output",
    "stage3.v1_before_transfer", "stage3.v2_output", "stage3.v1_after_transfer",
    "stage4.masked_renormalized_weights", "stage4.masked_scores", "stage4.masked_context_vecs",
    "stage4.dropout_of_ones", "stage4.dropout_of_causal_weights", "stage4.causal_attention_output",
    "stage4.once_upon_causal_attention_output",
    "stage5.wrapper_output", "stage5.multihead_output", "stage5.exercise_3_2_shape",
    "stage5.exercise_3_3_parameter_count",
]  # fmt: skip


def test_the_curriculum_values_are_all_present():
    assert set(REQUIRED) - {v.id for v in VALUES} == set()


def test_dropout_values_are_cpu_only_and_only_they_are():
    for value in VALUES:
        assert value.cpu_only == ("dropout" in value.recipe), value.id


@pytest.mark.parametrize("erratum", ERRATA, ids=[e.id for e in ERRATA])
def test_erratum_agrees_with_correct_code_on_first_rows_only(erratum, solutions):
    actual = run_recipe(erratum.recipe, solutions)
    expected, tolerance = erratum.expected, erratum.tolerance
    first = (slice(None), slice(0, 1))
    rest = (slice(None), slice(1, None))
    assert describe_difference(actual[first], expected[first], tolerance[first]) is None
    assert describe_difference(actual[rest], expected[rest], tolerance[rest]) is not None


@pytest.mark.parametrize("erratum", ERRATA, ids=[e.id for e in ERRATA])
def test_erratum_is_what_scaling_by_sqrt_d_out_prints(erratum, solutions, monkeypatch):
    """Re-running the solution with 002's divisor reproduces 002's numbers in full."""
    real_softmax = torch.softmax
    # 002's heads have 3 features and divide by sqrt(6): rescale the scores by sqrt(3 / 6).
    monkeypatch.setattr(torch, "softmax", lambda x, dim: real_softmax(x * (3 / 6) ** 0.5, dim=dim))
    assert erratum.check(run_recipe(erratum.recipe, solutions)) is None


def test_counting_gpt2_parameters_draws_no_random_numbers_and_leaves_init_working(solutions):
    # The count is the document's; its 2.4 million initial weights are never drawn.
    state = torch.get_rng_state()
    count = run_recipe("exercise_3_3_parameter_count", solutions)
    assert int(count) == 2_360_064
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.nn.Linear(4, 4).weight.abs().sum() > 0  # nn.init fills weights again afterwards


def test_counting_parameters_passes_on_what_the_learners_module_raises():
    class Broken:
        def MultiHeadAttention(self, *args, **kwargs):  # noqa: N802 - the public name being graded
            raise ValueError("d_out must be divisible by num_heads")

    with pytest.raises(ValueError, match="divisible"):
        run_recipe("exercise_3_3_parameter_count", Broken())
    assert torch.nn.Linear(4, 4).weight.abs().sum() > 0


def test_learners_read_where_a_value_comes_from_in_their_own_words():
    from grader.judge.document_values import document_values

    for value in document_values():
        assert "00" not in value.citation.split(" ")[0] and "_" not in value.citation.split(" ")[0], value.citation
        if value.document and value.document.startswith(("000_", "004_")) and value.section[0].isdigit():
            assert value.citation.startswith("book section 3."), value.citation
