"""Names beside ids, and anonymous grading (grader/classroom/names.py): the download's names (Canvas, Moodle,
Gradescope) or a roster's reach names.csv, the class report, similarity.csv and each feedback header; under
anonymous grading no output of the batch holds a name, run after run, until --reveal names everyone without
grading anyone again."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from grader.classroom.similarity import pairs_csv
from grader.intake.layouts import list_students
from tests.grading import REPO, batch, learner_copy

# Moodle writes "<full name>_<participant>_assignsubmission_file_/": two students, one right and one a stub.
MOODLE = {"Ada Lovelace": "101", "=Grace Hopper": "102"}  # a name a spreadsheet would run stays text


def moodle_class(folder: Path) -> Path:
    for name, participant in MOODLE.items():
        learner_copy(folder / f"{name}_{participant}_assignsubmission_file_", stages=[1])
    stub = (REPO / "exercises" / "stage1_softmax.py").read_text()
    (folder / "=Grace Hopper_102_assignsubmission_file_" / "stage1_softmax.py").write_text(stub)
    return folder


def every_output(out: Path) -> str:
    """The text of every file the batch and the class report wrote."""
    return "".join(path.read_text(encoding="utf-8", errors="replace") for path in out.rglob("*") if path.is_file())


def class_report(out: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "grader.cli.class_report", str(out)], cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return (out / "class-report.html").read_text()


def test_each_lms_download_names_its_students(tmp_path):
    canvas = tmp_path / "canvas"
    canvas.mkdir()
    (canvas / "lovelaceada_5001_900_stage1_softmax.py").write_text("")
    (canvas / "LATE_5002_901_stage1_softmax.py").write_text("")  # Canvas leaves an empty name out
    assert {s.id: s.name for s in list_students(canvas)[0]} == {"5001": "lovelaceada", "5002": None}
    moodle = tmp_path / "moodle"
    moodle.mkdir()
    (moodle / "Ada_Lovelace 2_101_assignsubmission_file_").mkdir()  # a name with an underscore and a digit
    assert {s.id: s.name for s in list_students(moodle)[0]} == {"101": "Ada_Lovelace 2"}
    gradescope = tmp_path / "gradescope"
    (gradescope / "submission_1").mkdir(parents=True)
    (gradescope / "submission_metadata.yml").write_text(
        "submission_1:\n  :submitters:\n  - :name: Ada Lovelace\n    :sid: '7'\n  - :sid: '8'\n"
    )
    assert {s.id: s.name for s in list_students(gradescope)[0]} == {"7": "Ada Lovelace", "8": None}


@pytest.fixture(scope="module")
def moodle(tmp_path_factory) -> Path:
    return moodle_class(tmp_path_factory.mktemp("names") / "class")


def test_names_stand_beside_ids_in_names_csv_the_class_report_and_the_feedback(moodle, tmp_path):
    out = tmp_path / "out"
    said = batch(moodle, out).stderr
    assert f"2 of 2 students named in {out / '.grader' / 'names.csv'}" in said  # where the file is
    with (out / ".grader" / "names.csv").open(newline="") as handle:
        assert list(csv.reader(handle)) == [["student_id", "name"], ["101", "Ada Lovelace"], ["102", "'=Grace Hopper"]]
    assert (out / "students" / "101.txt").read_text().count("101 (Ada Lovelace)") == 1  # the header, once
    page = class_report(out)
    assert "101 (Ada Lovelace)" in page and "102 (=Grace Hopper)" in page


def test_a_roster_names_students_over_the_download(moodle, tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name\n101,Augusta Ada King\n")
    out = tmp_path / "out"
    batch(moodle, out, "--roster", str(roster))
    assert "101 (Augusta Ada King)" in (out / "students" / "101.txt").read_text()
    assert "102 (=Grace Hopper)" in (out / "students" / "102.txt").read_text()


def test_anonymous_grading_keeps_every_name_out_until_the_reveal(moodle, tmp_path):
    out = tmp_path / "out"
    batch(moodle, out)  # named first: the anonymous run must take the names back out
    said = batch(moodle, out, "--anonymous").stderr
    assert "graded anonymously" in said and "names.csv removed" in said
    class_report(out)
    (out / "similarity.csv").write_text(pairs_csv([["101", "102", "stage1_softmax.py", 0.9, 0.9, 200]]))
    names = ("Ada", "Lovelace", "Grace", "Hopper")
    assert not [name for name in names if name in every_output(out)]
    batch(moodle, out)  # a later run without --anonymous stays anonymous
    assert not (out / ".grader" / "names.csv").exists() and "Lovelace" not in (out / "students" / "101.txt").read_text()
    graded_at = json.loads((out / "students" / "101.json").read_text())["graded_at"]
    batch(moodle, out, "--reveal")
    assert json.loads((out / "students" / "101.json").read_text())["graded_at"] == graded_at  # no one graded again
    assert "101 (Ada Lovelace)" in (out / "students" / "101.txt").read_text()
    assert "101 (Ada Lovelace)" in class_report(out)


def test_a_course_file_grades_anonymously(moodle, tmp_path):
    course = tmp_path / "course.toml"
    course.write_text("[gradebook]\nanonymous = true\n")
    out = tmp_path / "out"
    batch(moodle, out, "--course", str(course))
    assert "Lovelace" not in every_output(out)
    course.write_text("[gradebook]\nanonymous = 1\n")
    done = subprocess.run(
        [sys.executable, "-m", "grader", "batch", str(moodle), "--out", str(out), "--course", str(course)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "gradebook.anonymous = 1; write true or false" in done.stderr


def test_similarity_csv_names_the_pair_where_names_are_known():
    rows = [["101", "102", "stage1_softmax.py", 0.9, 0.8, 200]]
    assert pairs_csv(rows, {"101": "Ada", "102": "=Grace"}).splitlines() == [
        "student_a,student_b,file,similarity_a,similarity_b,tokens_overlap,name_a,name_b",
        "101,102,stage1_softmax.py,0.9,0.8,200,Ada,'=Grace",
    ]
    assert pairs_csv(rows, {}).splitlines()[0].endswith("tokens_overlap")
