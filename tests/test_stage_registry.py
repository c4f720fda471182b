"""A stage is one unit: a toy stage added as docs/instructors.md says (its solution, checks, guide and one
registry entry, in a copy of this repository) reaches the CLI, the batch, the release, the Gradescope
zip and the nbgrader course; and the bonus track follows course.toml's one setting."""

import csv
import json
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from grader.authoring.release import build_release
from grader.authoring.stubs import learner_imports
from grader.core.course import CourseError, course_stages
from grader.core.stages import BONUS, CORE, STAGES, registry, stages_of
from tests.grading import REPO, learner_copy

TOY = REPO / "tests" / "toy_stage"
NUMBER = max(STAGES) + 1  # the next stage, whatever the registry holds
NOT_COPIED = shutil.ignore_patterns(
    ".venv", ".git", "dist", "build", "__pycache__", ".pytest_cache", ".hypothesis", "*.egg-info", "grade-report.html"
)
BONUS_ON = "[stages]\nbonus = true\n"


def toy(name: str) -> str:
    return (TOY / name).read_text(encoding="utf-8").replace("@N@", str(NUMBER))


def run(repo: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m ARGS`` in ``repo``: its own grader and solutions come first on the import path."""
    result = subprocess.run([sys.executable, "-m", *args], cwd=repo, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    return result


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """This repository with the toy stage added, and a course.toml that turns the bonus on."""
    copy = tmp_path_factory.mktemp("toy") / "repo"
    shutil.copytree(REPO, copy, ignore=NOT_COPIED)
    (copy / "solutions" / f"stage{NUMBER}_toy.py").write_text(toy("solution.py"), encoding="utf-8")
    (copy / "grader" / "judge" / "checks" / f"test_stage{NUMBER}.py").write_text(toy("checks.py"), encoding="utf-8")
    (copy / "docs" / f"stage{NUMBER}.md").write_text(toy("guide.md"), encoding="utf-8")
    with (copy / "grader" / "core" / "stages.toml").open("a", encoding="utf-8") as registry_file:
        registry_file.write(toy("entry.toml"))
    (copy / "course.toml").write_text(BONUS_ON, encoding="utf-8")
    run(copy, "grader.authoring.stubs")  # make stubs
    return copy


@pytest.fixture(scope="module")
def toy_submission(repo, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("class") / "ada"
    folder.mkdir()
    solution = (repo / "solutions" / f"stage{NUMBER}_toy.py").read_text(encoding="utf-8")
    (folder / f"stage{NUMBER}_toy.py").write_text(learner_imports(solution), encoding="utf-8")
    return folder


def test_the_cli_grades_the_new_stage(repo, toy_submission, tmp_path):
    report = tmp_path / "report.json"
    result = run(repo, "grader", str(toy_submission), "--stage", str(NUMBER), "--json", str(report))
    (stage,) = json.loads(report.read_text())["stages"]
    assert (stage["id"], stage["title"], stage["track"]) == (f"stage{NUMBER}", "a toy stage: twice a tensor", BONUS)
    assert (stage["score"], stage["max_score"]) == (4, 4), result.stdout
    run(repo, "grader", str(toy_submission), "--json", str(report))  # the copy's course.toml turns the bonus on
    assert f"stage{NUMBER}" in [s["id"] for s in json.loads(report.read_text())["stages"]]
    stub = run(repo, "grader", "exercises", "--stage", str(NUMBER), "--json", str(report))
    (stage,) = json.loads(report.read_text())["stages"]
    assert stage["score"] == 0 and {c["status"] for c in stage["checks"]} == {"not_implemented"}, stub.stdout


def test_the_batch_gives_the_new_stage_a_gradebook_column(repo, toy_submission, tmp_path):
    run(repo, "grader", "batch", str(toy_submission.parent), "--out", str(tmp_path), "--sandbox", "auto")
    with (tmp_path / "grades.csv").open(newline="") as table:
        (row,) = csv.DictReader(table)
    assert row[f"stage{NUMBER}"] == "4" and row["stage1"] == "0"


def test_the_release_ships_the_new_stage(repo, tmp_path):
    run(repo, "grader.authoring.release", str(tmp_path / "student"))
    student = tmp_path / "student"
    assert "raise NotImplementedError" in (student / "exercises" / f"stage{NUMBER}_toy.py").read_text()
    assert (student / "docs" / f"stage{NUMBER}.md").read_text() == toy("guide.md")
    checks = (student / "grader" / "judge" / "checks" / f"test_stage{NUMBER}.py").read_text()
    assert "document.double" in checks and "random.double" not in checks
    released = tomllib.loads((student / "grader" / "core" / "stages.toml").read_text())
    assert released[f"stage{NUMBER}"]["points"] == {"document.double": 1}
    assert f"stage{NUMBER}_toy.py" in (student / "Makefile").read_text()
    assert f"[docs/stage{NUMBER}.md]" in (student / "README.md").read_text()
    assert tomllib.loads((student / "course.toml").read_text()) == {"stages": {"bonus": "extra"}}
    off = tmp_path / "off.toml"
    off.write_text("[stages]\nbonus = false\n")
    run(repo, "grader.authoring.release", str(tmp_path / "core"), "--course", str(off))
    assert not (tmp_path / "core" / "exercises" / f"stage{NUMBER}_toy.py").exists()
    assert f"stage{NUMBER}" not in tomllib.loads((tmp_path / "core" / "grader" / "core" / "stages.toml").read_text())


def test_the_gradescope_zip_holds_the_new_stage(repo, tmp_path):
    run(repo, "grader.authoring.gradescope", str(tmp_path / "autograder.zip"))
    with zipfile.ZipFile(tmp_path / "autograder.zip") as archive:
        names = set(archive.namelist())
        course = tomllib.loads(archive.read("course.toml").decode())
    assert {f"grader/judge/checks/test_stage{NUMBER}.py", f"solutions/stage{NUMBER}_toy.py"} <= names
    assert course == {"stages": {"bonus": "extra"}}


@pytest.mark.nbgrader
def test_the_nbgrader_course_has_a_notebook_for_the_new_stage(repo, tmp_path):
    run(repo, "grader.authoring.nbgrader.course", str(tmp_path / "course"))
    notebook = json.loads((tmp_path / "course" / "source" / "attention" / f"stage{NUMBER}_toy.ipynb").read_text())
    sources = ["".join(cell["source"]) for cell in notebook["cells"]]
    assert any(source.startswith(f"%%writefile stage{NUMBER}_toy.py") for source in sources)


# The bonus track in this repository ---------------------------------------------------------------


def test_the_core_is_100_points_and_the_bonus_is_off_by_default():
    core = stages_of((CORE,))
    assert core == [1, 2, 3, 4, 5]
    assert sum(sum(registry()[n].points.values()) for n in core) == 100
    assert course_stages() == core  # this repository holds no course.toml


def test_one_course_setting_turns_the_bonus_on_and_a_bad_one_is_refused_in_one_line(tmp_path):
    course = tmp_path / "course.toml"
    course.write_text(BONUS_ON)
    assert course_stages(course) == sorted(STAGES)
    for text, said in (
        ('[stages]\nbonus = "yes"\n', 'stages.bonus = \'yes\'; write false, true, "extra" or "required"'),
        ("[stages]\nbonsu = true\n", '[stages] holds bonus = false, true, "extra" or "required", and bonus_cap'),
    ):
        course.write_text(text)
        with pytest.raises(CourseError, match=said.replace("[", r"\[").replace("]", r"\]")):
            course_stages(course)


def test_bonus_stages_reach_the_release_only_when_the_course_turns_them_on(tmp_path):
    bonus_files = {registry()[n].file for n in stages_of((BONUS,))}
    course = tmp_path / "course.toml"
    course.write_text(BONUS_ON)
    build_release(tmp_path / "on", course)
    shipped = {p.name for p in (tmp_path / "on" / "exercises").glob("*.py")}
    assert bonus_files <= shipped
    course.write_text("[stages]\nbonus = false\n")
    build_release(tmp_path / "off", course)
    assert not bonus_files & {p.name for p in (tmp_path / "off" / "exercises").glob("*.py")}


def test_a_bonus_stage_is_graded_with_stage_whatever_the_course_says(tmp_path):
    (number, *_) = stages_of((BONUS,)) or [None]
    if number is None:
        pytest.skip("no bonus stage in the registry")
    submission = learner_copy(tmp_path / "ada", stages=[number])
    report = tmp_path / "report.json"
    subprocess.run(
        [sys.executable, "-m", "grader", str(submission), "--stage", str(number), "--json", str(report)],
        cwd=REPO,
        check=True,
        capture_output=True,
        timeout=600,
    )
    (stage,) = json.loads(report.read_text())["stages"]
    assert stage["track"] == BONUS and stage["score"] == stage["max_score"] > 0
