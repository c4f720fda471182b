"""The Gradescope autograder zip, run as Gradescope would, in a temporary /autograder tree."""

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema
import pytest

from grader.authoring.gradescope import build
from tests.conftest import REPO
from tests.grading import learner_copy

SCHEMA = json.loads((REPO / "grader" / "schemas" / "gradescope.schema.json").read_text())


@pytest.fixture(scope="module")
def autograder_zip(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("dist") / "autograder.zip")


def install(autograder_zip: Path, root: Path) -> Path:
    """Lay out /autograder as Gradescope does: the zip in source/, run_autograder beside it."""
    with zipfile.ZipFile(autograder_zip) as archive:
        archive.extractall(root / "source")
        for info in archive.infolist():  # extractall drops the executable bit
            os.chmod(root / "source" / info.filename, info.external_attr >> 16 & 0o777)
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")
    (root / "submission").mkdir()
    return root


def run_autograder(root: Path, python: str = sys.executable) -> dict:
    environment = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": python}
    result = subprocess.run([str(root / "run_autograder")], env=environment, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr
    results = json.loads((root / "results" / "results.json").read_text())
    jsonschema.validate(results, SCHEMA)
    return results


def test_the_zip_holds_what_grading_needs_and_nothing_else(autograder_zip):
    with zipfile.ZipFile(autograder_zip) as archive:
        names = archive.namelist()
        modes = {i.filename: i.external_attr >> 16 for i in archive.infolist()}
        requirements = archive.read("requirements.txt").decode()
    assert {"setup.sh", "run_autograder", "requirements.txt", "grader/checks/test_stage5.py",
            "grader/document_values.toml", "solutions/stage5_multihead_attention.py"} <= set(names)
    assert not [n for n in names if n.startswith(("tests/", "exercises/", "grader/authoring/", ".venv"))
                or "__pycache__" in n], names
    assert modes["run_autograder"] & stat.S_IXUSR and modes["setup.sh"] & stat.S_IXUSR
    assert "torch==2.13.0\n" in requirements
    for script in ("setup.sh", "run_autograder"):
        subprocess.run(["bash", "-n", str(REPO / "grader" / "authoring" / "gradescope" / script)], check=True)


def test_the_same_sources_give_the_same_zip(autograder_zip, tmp_path):
    assert build(tmp_path / "again.zip").read_bytes() == autograder_zip.read_bytes()


def test_a_correct_submission_gets_full_marks_with_hidden_checks_held_back(autograder_zip, tmp_path):
    root = install(autograder_zip, tmp_path / "autograder")
    learner_copy(root / "submission")
    (root / "submission" / "notes.md").write_text("my notes")
    results = run_autograder(root)
    assert results["score"] == 100
    visibility = {t["visibility"] for t in results["tests"]}
    assert visibility == {"visible", "after_published"}
    assert "ignored: notes.md" in results["output"]


def test_the_stubs_get_zero_and_a_hint_per_check(autograder_zip, tmp_path):
    root = install(autograder_zip, tmp_path / "autograder")
    for stub in (REPO / "exercises").glob("stage*.py"):
        shutil.copy(stub, root / "submission")
    results = run_autograder(root)
    assert results["score"] == 0
    assert all("hint [not-implemented]" in t["output"] for t in results["tests"])


def test_when_the_grader_cannot_run_the_student_is_told(autograder_zip, tmp_path):
    root = install(autograder_zip, tmp_path / "autograder")
    shutil.rmtree(root / "submission")  # nothing was uploaded, so grading cannot start
    results = run_autograder(root)
    assert results["score"] == 0 and "could not grade this submission" in results["output"]
    assert "does not exist" in results["output"]
