"""The artefacts as their users get them: built into a folder outside this checkout, installed into fresh
virtual environments that cannot see it (no editable install of this repository, no PYTHONPATH, no
working directory inside it), and run the way their users run them:

* the release: its own `make grade` (which creates its .venv) on the stubs and on a correct submission,
  `make submit`, and the run steps of its GitHub Classroom workflow;
* the Gradescope zip: unpacked into a temporary /autograder, set up by its setup.sh (apt-get stubbed:
  this machine is not changed), then run_autograder on a correct submission;
* the nbgrader course: the students' copy of a stage notebook, answered, executed by a Jupyter kernel
  in the students' environment (the release installed, plus a kernel).

Slow (a torch install per environment, about three minutes in all): `make test` runs these; skip them
locally with `-m "not artefacts"`.
"""

import base64
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema
import nbformat
import pytest
import yaml

from grader.authoring.gradescope import build as build_gradescope_zip
from grader.authoring.release import build_release
from grader.core.points import points_in_use
from grader.core.stages import CORE, STAGE_MODULES, registry, stages_of
from grader.judge.plugin import GRADER_FAULTS, grader_faults, planned_checks
from grader.notebook import SUMMARY
from tests.conftest import REPO
from tests.grading import BONUS_ON, batch, correct_class, learner_copy
from tests.test_gradescope import install
from tests.watching import Watcher

pytestmark = pytest.mark.artefacts

STAGES = stages_of((CORE,))  # the artefacts are built without course.toml: the core stages
VISIBLE = {
    stage: sum(c.points for c in planned_checks([stage], points_in_use()) if c.visibility == "visible")
    for stage in STAGES
}
SCHEMAS = REPO / "grader" / "core" / "schemas"
# Variables that would lead a fresh environment back to this checkout, or carry this run's make or pytest options.
LEAKS = (
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "__PYVENV_LAUNCHER__",
    "MAKEFLAGS",
    "MFLAGS",
    "MAKELEVEL",
    "MAKEOVERRIDES",
)
TIMEOUT = 900


def fresh_env(path_first: Path | None = None, **extra: str) -> dict[str, str]:
    """This process's environment without the ways back to the checkout: the variables above, and PATH
    entries inside the checkout or this virtual environment; ``path_first`` leads PATH."""
    here = [REPO.resolve()] + ([Path(sys.prefix).resolve()] if sys.prefix != sys.base_prefix else [])
    kept = [
        entry
        for entry in os.environ.get("PATH", "").split(os.pathsep)
        if entry and not any(Path(entry).resolve().is_relative_to(place) for place in here)
    ]
    env = {key: value for key, value in os.environ.items() if key not in LEAKS and not key.startswith("PYTEST")}
    env["PATH"] = os.pathsep.join([*([str(path_first)] if path_first else []), *kept])
    return {**env, **extra}


def run(
    command: list[str] | str, cwd: Path, env: dict[str, str] | None = None, **options
) -> subprocess.CompletedProcess:
    """``command`` in ``cwd`` (never inside the checkout) with a fresh environment."""
    assert not cwd.resolve().is_relative_to(REPO.resolve()), cwd
    return subprocess.run(
        command, cwd=cwd, env=env or fresh_env(), capture_output=True, text=True, timeout=TIMEOUT, **options
    )


def assert_resolves_inside(python: Path, folder: Path, cwd: Path, env: dict[str, str] | None = None) -> None:
    """``python`` imports the grader from ``folder``, not from this checkout."""
    found = run([str(python), "-c", "import grader; print(grader.__file__)"], cwd, env)
    assert found.returncode == 0, found.stderr
    location = Path(found.stdout.strip()).resolve()
    assert location.is_relative_to(folder.resolve()) and not location.is_relative_to(REPO.resolve()), location


def outside(tmp_path_factory, name: str) -> Path:
    folder = tmp_path_factory.mktemp(name)
    assert not folder.resolve().is_relative_to(REPO.resolve())
    return folder


# The release ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """The students' repository, as a student gets it, after their first `make grade` (on the stubs):
    the folder, the output of that run and its JSON report."""
    folder = outside(tmp_path_factory, "release") / "student"
    build_release(folder)
    report = folder.parent / "stubs.json"
    first = run(["make", "grade", f"GRADE_ARGS=--json {report}"], folder)
    assert first.returncode == 0, (first.stdout + first.stderr)[-3000:]
    return folder, first, json.loads(report.read_text())


@pytest.fixture(scope="module")
def solved(release):
    """The release with the solutions in exercises/, as a student who is done: the output of `make grade`
    and its JSON report."""
    folder, _, _ = release
    learner_copy(folder / "exercises", stages=STAGES)
    report = folder.parent / "solved.json"
    done = run(["make", "grade", f"GRADE_ARGS=--json {report}"], folder)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return done, json.loads(report.read_text())


def test_the_release_installs_itself_and_grades_the_stubs(release):
    folder, first, report = release
    assert_resolves_inside(folder / ".venv" / "bin" / "python", folder, folder.parent)
    assert "Setting up .venv" in first.stdout
    assert report["score"] == 0 and "provisional" in report["flags"]
    assert f"Provisional total (visible checks only): 0/{sum(VISIBLE.values()):g}" in first.stdout
    assert (
        "Next step\n    open exercises/stage1_softmax.py\n    attention_scores is not implemented yet" in first.stdout
    )
    assert first.stdout.rstrip("\n").split("\n")[-1] == "Heat maps and details: grade-report.html"
    if sys.platform == "linux":  # the CPU build: PyTorch's CPU index first (or here, the local wheel)
        torch = run(
            [str(folder / ".venv" / "bin" / "python"), "-c", "import torch; print(torch.version.cuda)"], folder.parent
        )
        assert torch.stdout.strip() == "None", torch.stdout + torch.stderr


def test_the_release_gives_a_correct_submission_every_visible_point(solved):
    done, report = solved
    assert {int(s["id"].removeprefix("stage")): (s["score"], s["max_score"]) for s in report["stages"]} == {
        stage: (points, points) for stage, points in VISIBLE.items()
    }
    assert {c["visibility"] for s in report["stages"] for c in s["checks"]} == {"visible"}
    total = sum(VISIBLE.values())
    assert f"Provisional total (visible checks only): {total:g}/{total:g}" in done.stdout


def test_the_release_gives_the_books_own_code_every_visible_point(release, solved):
    """tests/book/: the chapter's code pasted into the stubs of exercises/, graded by the student's own `make grade`
    (which grades exercises/ alone). The solutions are put back afterwards, for the tests that read them."""
    folder, _, _ = release
    for path in sorted((REPO / "tests" / "book").glob("*.py")):
        shutil.copy2(path, folder / "exercises" / path.name)
    report = folder.parent / "book.json"
    try:
        done = run(["make", "grade", f"GRADE_ARGS=--json {report}"], folder)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        assert "torch.empty(inputs.shape[0])" in (folder / "exercises" / f"{STAGE_MODULES[1]}.py").read_text()
        scores = {
            int(s["id"].removeprefix("stage")): (s["score"], s["max_score"])
            for s in json.loads(report.read_text())["stages"]
        }
        assert scores == {stage: (points, points) for stage, points in VISIBLE.items()}
        assert "Notes (marked i above: advice beyond the book" in done.stdout and "What to fix" not in done.stdout
    finally:
        learner_copy(folder / "exercises", stages=STAGES)


def test_the_releases_make_watch_grades_a_save_again(release, solved):
    folder, _, _ = release
    stage_file = folder / "exercises" / f"{STAGE_MODULES[4]}.py"
    correct = stage_file.read_text()
    try:
        with Watcher(["make", "-s", "watch", "STAGE=4"], folder, fresh_env()) as watcher:
            assert f"Provisional total (visible checks only): {VISIBLE[4]:g}/{VISIBLE[4]:g}" in watcher.report()
            unmasked, _ = watcher.saved(stage_file, correct.replace("masked_fill_", "masked_fill"))
            assert f"{VISIBLE[4]:g}/{VISIBLE[4]:g}" not in unmasked.split("Provisional total")[-1], unmasked
    finally:
        stage_file.write_text(correct)


def test_the_releases_make_submit_zips_the_stage_files(release, solved):
    folder, _, _ = release
    done = run(["make", "submit", "STUDENT=ada"], folder)
    assert done.returncode == 0, done.stderr
    with zipfile.ZipFile(folder / "ada.zip") as bundle:
        assert sorted(bundle.namelist()) == sorted(f"{STAGE_MODULES[n]}.py" for n in STAGES)
        assert bundle.read(f"{STAGE_MODULES[1]}.py") == (folder / "exercises" / f"{STAGE_MODULES[1]}.py").read_bytes()


def test_the_classroom_workflow_runs_in_the_release(release, solved, tmp_path):
    """The workflow's run steps, in order, in the student's repository; `python` is the fresh environment's
    (GitHub's setup-python gives a fresh one too). `sudo apt-get install bubblewrap` is left out: this
    machine is not changed (without bubblewrap the grade is the same, unsandboxed)."""
    folder, _, _ = release
    workflow = yaml.safe_load((folder / ".github" / "workflows" / "classroom.yml").read_text())
    steps = [step for step in workflow["jobs"]["run-autograding-tests"]["steps"] if "run" in step]
    assert [step["name"] for step in steps] == ["Install the grader", "Visible checks"]
    output = tmp_path / "github-output"
    env = fresh_env(folder / ".venv" / "bin", GITHUB_OUTPUT=str(output))
    for step in steps:
        script = "\n".join(line for line in step["run"].splitlines() if not line.lstrip().startswith("sudo "))
        done = run(["bash", "-e", "-c", script], folder, env)
        assert done.returncode == 0, f"{step['name']}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    assert_resolves_inside(folder / ".venv" / "bin" / "python", folder, tmp_path)
    result = json.loads((folder / "classroom-result.json").read_text())
    jsonschema.validate(result, json.loads((SCHEMAS / "classroom.schema.json").read_text()))
    (line,) = output.read_text().splitlines()
    assert json.loads(base64.b64decode(line.removeprefix("result="))) == result
    assert result["max_score"] == sum(VISIBLE.values()) == sum(test["score"] for test in result["tests"])


# The Gradescope zip --------------------------------------------------------------------------------


def test_the_gradescope_zip_sets_itself_up_and_grades(tmp_path_factory):
    """setup.sh and run_autograder in a temporary /autograder (AUTOGRADER_ROOT); setup.sh's apt-get is a
    stub that records what it was asked for."""
    base = outside(tmp_path_factory, "gradescope")
    archive = build_gradescope_zip(base / "autograder.zip")
    root = install(archive, base / "autograder")  # source/, run_autograder, submission/, as Gradescope lays them out
    stubs = base / "bin"
    stubs.mkdir()
    (stubs / "apt-get").write_text(f'#!/bin/sh\necho "$@" >> {base / "apt-get.log"}\n')
    (stubs / "apt-get").chmod(0o755)
    env = fresh_env(stubs, AUTOGRADER_ROOT=str(root))
    setup = run(["bash", str(root / "source" / "setup.sh")], root / "source", env)
    assert setup.returncode == 0, (setup.stdout + setup.stderr)[-3000:]
    assert "bubblewrap" in (base / "apt-get.log").read_text()
    python = root / "venv" / "bin" / "python"
    alone = run([str(python), "-c", "import grader"], base, env)
    assert alone.returncode != 0 and "No module named 'grader'" in alone.stderr  # the venv holds no grader
    assert_resolves_inside(python, root / "source", root / "source", {**env, "PYTHONPATH": str(root / "source")})

    learner_copy(root / "submission")
    graded = run([str(root / "run_autograder")], base, env)
    assert graded.returncode == 0, graded.stderr
    results = json.loads((root / "results" / "results.json").read_text())
    jsonschema.validate(results, json.loads((SCHEMAS / "gradescope.schema.json").read_text()))
    assert results["score"] == 100, results.get("output", "")[:3000] + graded.stdout[-3000:]
    assert sum(test["score"] for test in results["tests"]) == 100 and "Total: 100/100" in graded.stdout
    assert not any(fault in json.dumps(results) + graded.stdout for fault in GRADER_FAULTS)


# The nbgrader course -------------------------------------------------------------------------------


@pytest.mark.nbgrader
def test_a_students_notebook_runs_in_the_students_environment(release, tmp_path_factory):
    """The instructor's side as the docs say (this repository's environment: `make nbgrader`, then
    `nbgrader generate_assignment`); the student's Jupyter has the release installed, plus a kernel
    (nbclient and ipykernel, the versions nbgrader brings here). The students' copy of stage 1, with the
    solution pasted in, earns the stage's visible points."""
    from grader.authoring.nbgrader.course import ASSIGNMENT, answer_cell
    from grader.authoring.nbgrader.demo import prepare, solved_answers

    folder, _, _ = release
    base = outside(tmp_path_factory, "nbgrader")
    course = base / "course"
    prepare(course)
    name = f"{STAGE_MODULES[1]}.ipynb"
    notebook = nbformat.read(course / "release" / ASSIGNMENT / name, as_version=4)
    assert "check(1, hidden=True)" not in "".join(c.source for c in notebook.cells)  # the students' copy
    answer_cell(notebook).source = solved_answers(course)[name]
    notebook.cells.append(
        nbformat.v4.new_code_cell("import grader, sys\nprint(grader.__file__)\nprint(sys.executable)")
    )
    student = base / "student"
    student.mkdir()
    nbformat.write(notebook, student / name)

    python = folder / ".venv" / "bin" / "python"
    kernel = [f"{package}=={importlib.metadata.version(package)}" for package in ("nbclient", "ipykernel")]
    env = fresh_env(
        folder / ".venv" / "bin",
        JUPYTER_DATA_DIR=str(base / "jupyter-data"),
        JUPYTER_CONFIG_DIR=str(base / "jupyter-config"),
        IPYTHONDIR=str(base / "ipython"),
    )
    installed = run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *kernel], base, env)
    assert installed.returncode == 0, installed.stderr[-3000:]
    execute = (
        "import sys, nbclient, nbformat\nnotebook = nbformat.read(sys.argv[1], as_version=4)\n"
        "nbclient.NotebookClient(notebook, timeout=300, kernel_name='python3',\n"
        "                        resources={'metadata': {'path': sys.argv[2]}}).execute()\n"
        "nbformat.write(notebook, sys.argv[3])\n"
    )
    done = run(
        [str(python), "-c", execute, str(student / name), str(student), str(base / "executed.ipynb")], student, env
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    executed = nbformat.read(base / "executed.ipynb", as_version=4)
    printed = "".join(
        output.get("text", "") for cell in executed.cells if cell.cell_type == "code" for output in cell.outputs
    )
    assert SUMMARY.format(kind="visible", stage=1) + f"{VISIBLE[1]:g}/{VISIBLE[1]:g}" in printed, printed
    assert not any(fault in printed for fault in GRADER_FAULTS), printed
    where, interpreter = printed.strip().splitlines()[-2:]
    assert Path(where).resolve().is_relative_to(folder.resolve()) and Path(interpreter).parent == python.parent
    assert (student / f"{STAGE_MODULES[1]}.py").is_file()  # the answer cell saved the stage file there


# Right code everywhere ------------------------------------------------------------------------------


def check_verdicts(report: dict) -> dict[str, tuple[str, str | None]]:
    """Check id -> (status, hint): what two gradings of the same files must agree on."""
    return {c["id"]: (c["status"], c.get("hint")) for s in report["stages"] for c in s["checks"]}


def test_right_code_grades_in_the_release_as_in_the_repository(release, solved, tmp_path):
    """The solutions, the book's code and every right alternative and variant, graded by the release's own
    grader in its fresh environment (make grade's command line): no check the grader could not finish, and
    every check's verdict the repository's visible view gives the same files. The release's bonus stages
    too: a release built with them, run by the same fresh environment."""
    folder, _, _ = release
    python = folder / ".venv" / "bin" / "python"
    bonus = outside_folder(tmp_path, "bonus-release") / "student"
    build_release(bonus, BONUS_ON)
    env = fresh_env()
    assert_resolves_inside(python, bonus, bonus, env)  # python -m from the folder: that release's grader
    for where, stages in [(folder, STAGES), (bonus, sorted(registry()))]:
        students = correct_class(outside_folder(tmp_path, f"class-{where.parent.name}"), stages)
        repository = tmp_path / f"repository-{where.parent.name}"
        batch(students, repository, "--visible-only", "--course", str(where / "course.toml"))
        for student in sorted(p for p in students.iterdir() if p.is_dir()):
            out = tmp_path / f"{where.parent.name}-{student.name}.json"
            done = run([str(python), "-m", "grader", str(student), "--visible-only", "--json", str(out)], where, env)
            assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
            released = json.loads(out.read_text())
            expected = json.loads((repository / "students" / f"{student.name}.json").read_text())
            assert grader_faults(released) == [] and grader_faults(expected) == [], student.name
            assert check_verdicts(released) == check_verdicts(expected), student.name
            assert {c["visibility"] for s in released["stages"] for c in s["checks"]} == {"visible"}


def outside_folder(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    assert not folder.resolve().is_relative_to(REPO.resolve())
    return folder
