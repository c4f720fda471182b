"""Every command the README shows works: run here when cheap, else proven by CI or a named test."""

import re
import subprocess

import pytest

from tests.grading import REPO, learner_copy
from tests.grading import make as run_make

README = (REPO / "README.md").read_text(encoding="utf-8")
CI = (REPO / ".ci" / "run").read_text(encoding="utf-8")
# target -> the test file that runs what the target runs (checked against `make -n`)
PROVEN_BY_TESTS = {
    "nbgrader-demo": ("tests/test_nbgrader.py", "grader.authoring.nbgrader.demo"),
    "stubs": ("tests/test_stubs.py", "grader.authoring.stubs"),
    "figures": ("tests/test_figures.py", "grader.authoring.figures"),
    "watch": ("tests/test_watch.py", "grader.cli.watch"),
}
RUN_HERE = {"grade", "grade-all", "release", "gradescope", "nbgrader"}
PROVEN_BY_CI = {"grade", "test"}
STUDENT_REPOSITORY = {"submit"}  # the README describes the release's Makefile: tests/test_release.py runs it
# target -> what its recipe runs: `make lint` runs first in `make test` (so in CI); `make test-fast` is that
# suite on every core, which this suite cannot run inside itself
DEVELOPMENT = {"lint": ["-m ruff check .", "-m ruff format --check .", "-m mypy"], "test-fast": ["-m pytest -n auto"]}


def readme_targets() -> set[str]:
    return set(re.findall(r"\bmake ([a-z][a-z-]*)", README))


def make(*args: str) -> subprocess.CompletedProcess:
    return run_make(REPO, *args)


def test_every_readme_command_is_accounted_for():
    assert readme_targets() == RUN_HERE | PROVEN_BY_CI | set(PROVEN_BY_TESTS) | STUDENT_REPOSITORY | set(DEVELOPMENT)
    release_tests = (REPO / "tests" / "test_release.py").read_text(encoding="utf-8")
    release_makefile = (REPO / "grader" / "authoring" / "release" / "Makefile").read_text(encoding="utf-8")
    for target in STUDENT_REPOSITORY:
        assert f"\n{target}:" in release_makefile and f'make(solved, "{target}"' in release_tests
    for target in PROVEN_BY_CI:
        assert re.search(rf"^make {target}$", CI, re.MULTILINE), f"CI does not run make {target}"


@pytest.mark.parametrize("target", sorted(PROVEN_BY_TESTS))
def test_targets_proven_elsewhere_run_what_their_test_covers(target):
    test_file, module = PROVEN_BY_TESTS[target]
    dry_run = make("-n", target)
    assert dry_run.returncode == 0 and f"-m {module}" in dry_run.stdout
    assert f"from {module} import" in (REPO / test_file).read_text(encoding="utf-8")


def test_make_grade_one_stage_points_to_the_next_function():
    done = make("grade", "STAGE=2")
    assert done.returncode == 0, done.stderr
    assert "stage 2" in done.stdout and "stage 1" not in done.stdout.split("\n\n")[1]
    assert "open exercises/stage2_self_attention.py" in done.stdout
    assert "SelfAttention_v1.__init__ is not implemented yet" in done.stdout
    assert done.stdout.rstrip("\n").split("\n")[-1] == "Heat maps and details: grade-report.html"
    assert "SelfAttention_v1.__init__ is not implemented yet" in (REPO / "grade-report.html").read_text()


def test_make_grade_a_submission_and_a_class(tmp_path):
    learner_copy(tmp_path / "class" / "ada")
    one = make("grade", f"SUBMISSION={tmp_path / 'class' / 'ada'}", f"GRADE_ARGS=--json {tmp_path / 'ada.json'}")
    assert one.returncode == 0 and "Total: 100/100" in one.stdout, one.stdout + one.stderr
    everyone = make("grade-all", f"SUBMISSIONS={tmp_path / 'class'}", f"OUT={tmp_path / 'grades'}")
    assert everyone.returncode == 0, everyone.stderr
    assert (tmp_path / "grades" / "grades.csv").read_text().splitlines()[1].startswith("ada,100,100,")
    assert make("grade-all").returncode != 0  # without SUBMISSIONS and OUT: a usage line


def test_make_release_gradescope_and_nbgrader_build_what_they_say():
    for target, output in (
        ("release", "dist/student.zip"),
        ("gradescope", "dist/gradescope-autograder.zip"),
        ("nbgrader", "build/nbgrader/source/attention/stage1_softmax.ipynb"),
    ):
        done = make(target)
        assert done.returncode == 0, f"make {target}: {done.stderr}"
        assert (REPO / output).is_file(), f"make {target} did not write {output}"


@pytest.mark.parametrize("target", sorted(DEVELOPMENT))
def test_the_development_targets_run_the_tools_they_name(target):
    dry_run = make("-n", target)
    assert dry_run.returncode == 0 and all(command in dry_run.stdout for command in DEVELOPMENT[target])
    assert all(command in make("-n", "test").stdout for command in DEVELOPMENT["lint"])  # CI runs `make test`
