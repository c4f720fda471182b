"""The addresses users and generated files run the grader by keep working whatever the layout inside:
`python -m grader`, `python -m grader batch`, the notebook helper the nbgrader course's cells import, the
collectors an nbgrader_config.py names, and every `-m` module the Makefile runs."""

import importlib
import importlib.util
import re
import subprocess
import sys

import pytest

from grader.authoring.nbgrader.course import INSTRUCTOR_SETTINGS
from tests.conftest import REPO


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("command", "usage"), [(["grader"], "python -m grader"), (["grader", "batch"], "python -m grader batch")]
)
def test_python_m_grader_and_its_batch_command_answer_help(command, usage):
    result = run(*command, "--help")
    assert result.returncode == 0 and result.stdout.startswith(f"usage: {usage} "), result.stderr


def test_every_module_the_makefile_runs_is_there():
    modules = sorted(set(re.findall(r"-m (grader[\w.]*)", (REPO / "Makefile").read_text())))
    assert "grader.cli.similarity" in modules and "grader.authoring.release" in modules
    for module in modules:
        assert importlib.util.find_spec(module) is not None, module


def test_the_notebook_cells_and_an_nbgrader_config_find_what_they_name():
    notebook = importlib.import_module("grader.notebook")
    assert callable(notebook.load) and callable(notebook.check)
    for name in re.findall(r'"(grader\.authoring\.[\w.]+)\.(\w+Collector)"', INSTRUCTOR_SETTINGS):
        assert getattr(importlib.import_module(name[0]), name[1])
    old = importlib.import_module("grader.authoring.nbgrader_lms")  # what configs written before still name
    assert old.CanvasCollector.__name__ == "CanvasCollector" and old.MoodleCollector.__name__ == "MoodleCollector"
