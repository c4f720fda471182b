"""Warnings the learner's code raises (torch's about how it was called, or its own) are shown apart from
what it printed, naming the learner's line, in every view; a hidden check shows none of them."""

import json
import subprocess
import sys

import jsonschema
import pytest

from grader.core.report import from_json
from grader.views.feedback import PRINTED_HEADING, WARNED_HEADING, student_view
from tests.conftest import REPO
from tests.grading import learner_copy

SCHEMA = json.loads((REPO / "grader" / "core" / "schemas" / "report.schema.json").read_text())

# softmax_naive forgets exp(), prints a line, copies its input with torch.tensor (torch warns) and warns itself.
WARNING_SOFTMAX = """
def softmax_naive(x: torch.Tensor) -> torch.Tensor:
    print("my debug line")
    x = torch.tensor(x)
    warnings.warn("I am not sure about dim 0")
    return x / x.sum(dim=0)
"""


def _line_of(text: str, needle: str) -> int:
    return next(number for number, line in enumerate(text.splitlines(), 1) if needle in line)


@pytest.fixture(scope="module")
def warned(tmp_path_factory):
    folder = tmp_path_factory.mktemp("warned")
    submission = learner_copy(folder / "submission", stages=[1])
    stage1 = submission / "stage1_softmax.py"
    source = stage1.read_text()
    start = source.index("def softmax_naive")
    end = source.index("def context_vector")
    source = "import warnings\n" + source[:start] + WARNING_SOFTMAX.lstrip() + "\n\n" + source[end:]
    stage1.write_text(source)
    outputs = {name: folder / name for name in ("report.json", "report.html", "results.json")}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "grader",
            str(submission),
            "--stage",
            "1",
            f"--json={outputs['report.json']}",
            f"--html={outputs['report.html']}",
            f"--gradescope={outputs['results.json']}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return source, result, {name: path.read_text() for name, path in outputs.items()}


def test_warnings_are_kept_apart_from_prints_and_name_the_learners_line(warned):
    source, _, outputs = warned
    report = json.loads(outputs["report.json"])
    jsonschema.validate(report, SCHEMA)
    failed = [c for c in report["stages"][0]["checks"] if c["status"] == "failed" and "softmax" in c["id"]]
    assert failed, report
    shown = [c for c in failed if c.get("warned")]
    assert shown, failed
    for check in shown:
        assert "Warning" not in check["printed"] and "my debug line" in check["printed"]
        lines = check["warned"].split("\n")
        torch_line, own_line = _line_of(source, "torch.tensor(x)"), _line_of(source, "warnings.warn(")
        assert any(line.startswith(f"stage1_softmax.py:{own_line}: UserWarning: I am not sure") for line in lines)
        # torch warns once per process at the C++ level: the first check of the worker that copied shows it
        assert "Triggered internally" not in check["warned"]
    assert any(f"stage1_softmax.py:{torch_line}: UserWarning: To copy construct" in c["warned"] for c in shown)


def test_every_view_shows_the_warnings_under_their_own_heading(warned):
    _, result, outputs = warned
    assert WARNED_HEADING in result.stdout and PRINTED_HEADING in result.stdout
    assert result.stdout.index("I am not sure about dim 0") > result.stdout.index(WARNED_HEADING)
    assert WARNED_HEADING in outputs["report.html"] and "I am not sure about dim 0" in outputs["report.html"]
    gradescope = "\n".join(test.get("output", "") for test in json.loads(outputs["results.json"])["tests"])
    assert f"{WARNED_HEADING}\nstage1_softmax.py:" in gradescope


def test_a_hidden_check_shows_no_warning_to_students(warned):
    _, _, outputs = warned
    report = from_json(json.loads(outputs["report.json"]))
    hidden = [c for s in report["stages"] for c in s["checks"] if c["visibility"] == "hidden"]
    assert any(c.get("warned") for c in hidden), "no hidden check raised a warning: the test proves nothing"
    seen = student_view(report)
    assert not any(c.get("warned") for s in seen["stages"] for c in s["checks"] if c["visibility"] == "hidden")
