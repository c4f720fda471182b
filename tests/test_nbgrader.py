"""The nbgrader course, proven with the real nbgrader CLI: release, autograde, feedback, export.

Slow (nbgrader starts a kernel per notebook, about a minute in all): `make test` runs these;
skip them locally with `-m "not nbgrader"`.
"""

import csv
import re
import shutil

import nbformat
import pytest
from nbgrader.api import Gradebook
from nbgrader.nbgraderformat.v3 import MetadataValidatorV3

from grader.authoring.nbgrader_course import ASSIGNMENT, answer_cell_source, answer_source, stage_points, write_course
from grader.authoring.nbgrader_demo import grade, prepare, solved_answers, submit
from grader.authoring.stubs import BEGIN, END
from grader.plugin import planned_checks
from grader.points import STAGE_POINTS
from grader.runner.implementation import STAGE_MODULES
from tests.grading import MUTANTS, REPO, grade as grade_folder, learner_copy, stage_scores

pytestmark = pytest.mark.nbgrader

MUTANT = next(m for m in MUTANTS if m["hint"] == "missing-scaling")  # fails hidden checks with numbers


@pytest.fixture(scope="module")
def term(tmp_path_factory):
    """One term: ada pastes the solutions, bob hands in the release, cy a stage-2 notebook with a mistake."""
    course = tmp_path_factory.mktemp("nbgrader") / "course"
    prepare(course)
    submit(course, "ada", solved_answers(course))
    submit(course, "bob", {})
    mistaken = learner_copy(course.parent / "cy-files", MUTANT)
    name = f"{STAGE_MODULES[2]}.py"
    folder = submit(course, "cy", {f"{STAGE_MODULES[2]}.ipynb": answer_cell_source(2, (mistaken / name).read_text())})
    for notebook in folder.glob("*.ipynb"):
        if notebook.stem != STAGE_MODULES[2]:
            notebook.unlink()  # cy handed in only stage 2
    grades = grade(course)
    return course, grades


def notebook_scores(course, student: str) -> dict[int, float]:
    """Stage -> the points nbgrader gave that stage's notebook (0 for one not handed in)."""
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        return {stage: gradebook.find_submission_notebook(module, ASSIGNMENT, student).score
                for stage, module in STAGE_MODULES.items()}


def solution_lines(stage: int) -> set[str]:
    """Lines that only a solution region of the stage holds."""
    inside, outside, in_region = set(), set(), False
    for line in (REPO / "solutions" / f"{STAGE_MODULES[stage]}.py").read_text().splitlines():
        if line.strip() in (BEGIN, END):
            in_region = line.strip() == BEGIN
            continue
        (inside if in_region else outside).add(line.strip())
    return {line for line in inside - outside if len(line) >= 8 and not line.startswith("#")}


def notebook_lines(path) -> set[str]:
    return {line.strip() for cell in nbformat.read(path, as_version=4).cells for line in cell.source.splitlines()}


# Generated course (no nbgrader run needed) -------------------------------------------------


def test_course_regenerates_byte_for_byte(tmp_path):
    first = write_course(tmp_path / "a")
    second = write_course(tmp_path / "b")
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in second]


@pytest.mark.parametrize("stage", sorted(STAGE_MODULES))
def test_notebook_follows_solutions_and_nbgrader_schema(tmp_path, stage):
    write_course(tmp_path)
    notebook = nbformat.read(tmp_path / "source" / ASSIGNMENT / f"{STAGE_MODULES[stage]}.ipynb", as_version=4)
    nbformat.validate(notebook)
    validator = MetadataValidatorV3()
    graded = [c for c in notebook.cells if "nbgrader" in c.metadata]
    for cell in graded:
        validator.validate_cell(cell)
        assert cell.metadata["nbgrader"]["schema_version"] == 3
    answers = [c for c in graded if c.metadata["nbgrader"]["solution"]]
    assert [c.source for c in answers] == [answer_source(stage)]
    assert answers[0].source.count(BEGIN) == answers[0].source.count(END) >= 1
    tests = {c.metadata["nbgrader"]["grade_id"]: c for c in graded if c.metadata["nbgrader"]["grade"]}
    assert set(tests) == {f"stage{stage}-visible", f"stage{stage}-hidden"}
    assert "### BEGIN HIDDEN TESTS" in tests[f"stage{stage}-hidden"].source


def test_cell_points_are_the_graders_points():
    points = stage_points()
    for stage, split in points.items():
        assert split["visible"] + split["hidden"] == STAGE_POINTS
        visible = sum(c.points for c in planned_checks([stage]) if c.visibility == "visible")
        assert split["visible"] == visible > 0


# The real nbgrader cycle ----------------------------------------------------------------------


def test_release_holds_no_solution_and_no_hidden_check(term):
    course, _ = term
    hidden_ids = {c.id for c in planned_checks(sorted(STAGE_MODULES)) if c.visibility == "hidden"}
    for stage, module in STAGE_MODULES.items():
        released = (course / "release" / ASSIGNMENT / f"{module}.ipynb").read_text()
        source = (course / "source" / ASSIGNMENT / f"{module}.ipynb").read_text()
        secret_lines = solution_lines(stage) & notebook_lines(course / "source" / ASSIGNMENT / f"{module}.ipynb")
        assert secret_lines, "the source notebook must hold the solution for this test to mean anything"
        assert not secret_lines & notebook_lines(course / "release" / ASSIGNMENT / f"{module}.ipynb")
        assert "HIDDEN TESTS" not in released and "hidden=True" not in released
        assert "hidden=True" in source
        assert not {i for i in hidden_ids if f'"{i}' in released or f" {i}:" in released}
        assert "NotImplementedError()" in released


def test_autograde_matches_make_grade(term):
    course, grades = term
    for student, expected_total in (("ada", 100), ("bob", 0)):
        scores = notebook_scores(course, student)
        assert sum(scores.values()) == expected_total
        # make grade on the very files the notebooks wrote while being autograded
        files = shutil.copytree(course / "autograded" / student / ASSIGNMENT, course.parent / f"{student}-written",
                                ignore=shutil.ignore_patterns("*.ipynb", "*.txt", "__pycache__"))
        _, report = grade_folder(files)
        assert stage_scores(report) == scores
    rows = {row["student_id"]: row for row in csv.DictReader(grades.open())}
    assert float(rows["ada"]["score"]) == 100 and float(rows["bob"]["score"]) == 0


def test_a_mistake_costs_its_own_notebook_as_make_grade_says(term):
    course, _ = term
    scores = notebook_scores(course, "cy")
    _, report = grade_folder(learner_copy(course.parent / "cy-check", MUTANT))
    assert scores == {stage: stage_scores(report)[2] if stage == 2 else 0 for stage in STAGE_MODULES}
    assert 0 < scores[2] < STAGE_POINTS


def test_feedback_shows_verdicts_but_no_hidden_data(term):
    course, _ = term
    _, report = grade_folder(learner_copy(course.parent / "cy-data", MUTANT), "--stage", "2")
    hidden_failures = [c for c in report["stages"][0]["checks"] if c["visibility"] == "hidden" and c["status"] != "passed"]
    hidden_numbers = {n for c in hidden_failures for n in re.findall(r"-?\d+\.\d{3,}", c["message"])}
    assert hidden_numbers, "the mistake must fail hidden checks with data in their messages"
    feedback = (course / "feedback" / "cy" / ASSIGNMENT / f"{STAGE_MODULES[2]}.html").read_text()
    assert not {n for n in hidden_numbers if n in feedback}
    for check in hidden_failures:
        assert check["id"] in feedback  # the verdict is there, with the catalog's explanation
        assert check["message"].splitlines()[0] not in feedback
    assert MUTANT["hint"] in feedback
