"""The GitHub Classroom workflow: its grading command runs here and gives the reporter valid points."""

import base64
import json
import re
import subprocess
import sys

import jsonschema
import pytest

from grader.core.points import points_in_use
from grader.core.stages import CORE, stages_of
from grader.judge.plugin import planned_checks
from tests.conftest import REPO
from tests.grading import learner_copy

WORKFLOW = (REPO / "grader" / "authoring" / "classroom" / "classroom.yml").read_text()
SCHEMA = json.loads((REPO / "grader" / "core" / "schemas" / "classroom.schema.json").read_text())


def grading_command() -> str:
    (command,) = re.findall(r"^\s+(python -m grader exercises .*)$", WORKFLOW, re.M)
    return command


def test_the_reporter_reads_the_step_that_grades():
    step = re.search(r"id: (\S+)", WORKFLOW.split("name: Visible checks")[1]).group(1)
    assert f'{step.upper()}_RESULTS: "${{{{ steps.{step}.outputs.result }}}}"' in WORKFLOW
    assert re.search(rf"runners: {step}$", WORKFLOW, re.M)
    assert "--visible-only" in grading_command()
    assert "name: Autograding Tests" in WORKFLOW


@pytest.mark.parametrize("work, points", [("stubs", 0), ("solutions", "all")])
def test_the_grading_command_gives_the_reporter_the_visible_points(tmp_path, work, points):
    repository = tmp_path / "student-repository"
    if work == "solutions":
        learner_copy(repository / "exercises")
    else:
        (repository / "exercises").mkdir(parents=True)
        for stub in (REPO / "exercises").glob("stage*.py"):
            (repository / "exercises" / stub.name).write_bytes(stub.read_bytes())
    command = grading_command().replace(
        "python -m grader exercises", f"{sys.executable} -m grader {repository / 'exercises'}"
    )
    command = command.replace("classroom-result.json", str(tmp_path / "result.json"))
    subprocess.run(command, shell=True, cwd=REPO, check=True, capture_output=True, timeout=300)
    encoded = base64.b64encode((tmp_path / "result.json").read_bytes())  # as the workflow hands it on
    result = json.loads(base64.b64decode(encoded))
    jsonschema.validate(result, SCHEMA)
    total = sum(test["score"] for test in result["tests"])
    assert result["max_score"] > 0 and total == (result["max_score"] if points == "all" else 0)
    visible = {c.id for c in planned_checks(stages_of((CORE,)), points_in_use()) if c.visibility == "visible"}
    assert {test["name"].split(": ")[1] for test in result["tests"]} == visible
