"""make nbgrader-demo: a whole nbgrader term on two made-up students, then their grades.csv.

  python -m grader.authoring.nbgrader.demo [COURSE_DIR]     # default: build/nbgrader-demo

generate_assignment -> submitted/ (ada pasted the solutions into the release; bob handed the
release in untouched) -> autograde -> generate_feedback -> export
"""

import argparse
import datetime
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

from grader.authoring.nbgrader.course import ASSIGNMENT, REPO, answer_cell, write_course

DEFAULT_COURSE = REPO / "build" / "nbgrader-demo"


class NbgraderFailed(RuntimeError):
    """An nbgrader command exited with an error; the message holds the end of its output."""


def nbgrader(course: Path, *args: str) -> str:
    """Run ``nbgrader ARGS`` in the course folder with this interpreter and this checkout's grader
    (for nbgrader's plugins and the kernels' test cells); its output."""
    bin_dir = str(Path(sys.executable).parent)  # nbgrader calls `alembic` from PATH
    env = {
        **os.environ,
        "PATH": os.pathsep.join(filter(None, [bin_dir, os.environ.get("PATH")])),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args], cwd=course, env=env, capture_output=True, text=True
    )
    output = done.stdout + done.stderr
    if done.returncode != 0 or "[ERROR]" in output or "| ERROR]" in output:
        raise NbgraderFailed(f"nbgrader {' '.join(args)} failed (exit {done.returncode}):\n{output[-3000:]}")
    return output


def prepare(course: Path) -> None:
    """A fresh course with its assignment generated (release/ holds the students' copy)."""
    shutil.rmtree(course, ignore_errors=True)
    write_course(course)
    nbgrader(course, "generate_assignment", ASSIGNMENT, "--force")


def solved_answers(course: Path) -> dict[str, str]:
    """Notebook name -> the source notebook's answer cell: a student who pasted the solutions in."""
    return {
        path.name: answer_cell(nbformat.read(path, as_version=4)).source
        for path in sorted((course / "source" / ASSIGNMENT).glob("*.ipynb"))
    }


def submit(course: Path, student: str, answers: dict[str, str]) -> Path:
    """Hand in the released notebooks with these answer cells (notebook name -> source); the rest untouched."""
    folder = course / "submitted" / student / ASSIGNMENT
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(course / "release" / ASSIGNMENT, folder)
    for name, answer in answers.items():
        notebook = nbformat.read(folder / name, as_version=4)
        answer_cell(notebook).source = answer
        nbformat.write(notebook, folder / name)
    (folder / "timestamp.txt").write_text(datetime.datetime.now(datetime.timezone.utc).isoformat())
    return folder


def grade(course: Path) -> Path:
    """Autograde every submission, write the feedback, export the gradebook; the path of grades.csv."""
    nbgrader(course, "autograde", ASSIGNMENT, "--force")
    nbgrader(course, "generate_feedback", ASSIGNMENT, "--force")
    nbgrader(course, "export", "--to", "grades.csv")
    return course / "grades.csv"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("course", nargs="?", type=Path, default=DEFAULT_COURSE)
    args = parser.parse_args(argv)
    course = args.course.resolve()
    try:
        prepare(course)
        submit(course, "ada", solved_answers(course))
        submit(course, "bob", {})
        grades = grade(course)
    except NbgraderFailed as error:
        print(error, file=sys.stderr)
        return 1
    print(f"course: {args.course} (feedback in feedback/<student>/{ASSIGNMENT}/*.html)\n")
    print(grades.read_text(encoding="utf-8"), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
