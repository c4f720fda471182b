"""The nbgrader term through nbgrader's own exchange, as docs/instructors.md runs it command by
command: release, a student fetches and submits, collect, autograde, feedback released and fetched."""

import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest

from grader.authoring.nbgrader.course import ASSIGNMENT
from grader.authoring.nbgrader.demo import prepare

pytestmark = pytest.mark.nbgrader
COURSE_ID = "attention-exercises"


def nbgrader(folder: Path, exchange: Path, *args: str) -> str:
    """``nbgrader ARGS`` in ``folder``, with ``exchange`` as the exchange's root; its output."""
    env = {**os.environ, "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    done = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args, f"--Exchange.root={exchange}"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "[ERROR]" not in output, f"nbgrader {' '.join(args)}:\n{output[-3000:]}"
    return output


def test_a_released_assignment_comes_back_collected_graded_and_with_feedback(tmp_path):
    # The exchange knows a student by the account that submits: here, whoever runs the tests.
    student = pwd.getpwuid(os.getuid()).pw_name
    course, exchange, home = tmp_path / "course", tmp_path / "exchange", tmp_path / "student-home"
    exchange.mkdir(mode=0o777)
    home.mkdir()
    prepare(course)  # make nbgrader, then nbgrader generate_assignment
    nbgrader(course, exchange, "release_assignment", ASSIGNMENT)

    nbgrader(home, exchange, "fetch_assignment", ASSIGNMENT, f"--course={COURSE_ID}")
    fetched = sorted(p.name for p in (home / ASSIGNMENT).glob("*.ipynb"))
    assert fetched == sorted(p.name for p in (course / "release" / ASSIGNMENT).glob("*.ipynb"))
    nbgrader(home, exchange, "submit", ASSIGNMENT, f"--course={COURSE_ID}")

    nbgrader(course, exchange, "collect", ASSIGNMENT)
    assert sorted(p.name for p in (course / "submitted" / student / ASSIGNMENT).glob("*.ipynb")) == fetched
    nbgrader(course, exchange, "autograde", ASSIGNMENT)
    nbgrader(course, exchange, "generate_feedback", ASSIGNMENT)
    nbgrader(course, exchange, "release_feedback", ASSIGNMENT)

    nbgrader(home, exchange, "fetch_feedback", ASSIGNMENT, f"--course={COURSE_ID}")
    feedback = sorted(p.name for p in (home / ASSIGNMENT / "feedback").rglob("*.html"))
    assert feedback == sorted(name.replace(".ipynb", ".html") for name in fetched)
