"""Correct code that differs from the stubs on the surface only (tests/variants/, written as learners would):
one difference costs at most the one check that prices it, with a message that names it."""

import shutil
import tomllib

import pytest

from tests.grading import REPO, grade

VARIANTS = REPO / "tests" / "variants"
ENTRIES = tomllib.loads((VARIANTS / "manifest.toml").read_text())["variant"]
MOST_LOST = 3  # of a stage's 20: the bound on what one surface difference may cost


@pytest.mark.parametrize("variant", ENTRIES, ids=[entry["name"] for entry in ENTRIES])
def test_one_difference_costs_one_check(tmp_path, variant):
    folder = tmp_path / variant["name"]
    shutil.copytree(VARIANTS / variant["name"], folder)
    _, report = grade(folder, "--stage", str(variant["stage"]))
    (stage,) = report["stages"]
    failed = [c for c in stage["checks"] if c["status"] != "passed" and not c["id"].startswith("note.")]
    assert {c["id"] for c in failed} <= set(variant.get("priced_by", [])), [(c["id"], c["message"]) for c in failed]
    assert stage["max_score"] - stage["score"] <= MOST_LOST
    for check in failed:
        for words in variant["shows"]:
            assert words in check["message"], (check["id"], check["message"])
    spoke = {c["id"] for c in stage["checks"] if c["id"].startswith("note.") and c["status"] != "passed"}
    assert spoke == set(variant.get("notes", [])), spoke
