"""A class folder as an attacker or a careless export makes it: names too long for a file, names a
spreadsheet would run, names that escape alike, links to other students' work or to any file, and
a submission with thousands of strays. The batch grades the rest, and its outputs stay safe."""

import csv
import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grader.classroom.lms_export import read_grades
from grader.core.output_files import inert
from grader.intake.students import MAX_ID_BYTES, student_id
from tests.grading import batch, learner_copy

LONG = "a" * 250  # with ".zip", 254 bytes: as long as a file name gets
FORMULA = '=HYPERLINK("evil.example","click")'  # a file name holds no /
ESCAPED = "b\x1b"  # printable() writes it as the next one
LOOKALIKE = "b\\x1b"
STRAYS = 5_000
FORMULA_STARTS = ("=", "+", "-", "@")


@pytest.fixture(scope="module")
def hostile_class(tmp_path_factory):
    """Graded in one batch: the class folder, the output folder and the batch's result."""
    root = tmp_path_factory.mktemp("names")
    submissions = root / "submissions"
    learner_copy(submissions / "honest")
    shutil.make_archive(str(submissions / LONG), "zip", learner_copy(root / "long-files", stages=[1]))
    learner_copy(submissions / FORMULA, stages=[1])
    learner_copy(submissions / ESCAPED, stages=[1])
    learner_copy(submissions / LOOKALIKE, stages=[2])
    (submissions / "copier.zip").symlink_to(submissions / f"{LONG}.zip")
    (submissions / "shadow.zip").symlink_to("/etc/shadow")
    (submissions / "copier-folder").symlink_to(submissions / "honest")
    borrowed = learner_copy(root / "elsewhere", stages=[1]) / "stage1_softmax.py"
    os.link(borrowed, learner_copy(submissions / "borrower", stages=[2]) / "stage1_softmax.py")
    crowded = learner_copy(submissions / "crowded", stages=[1])
    for index in range(STRAYS):
        (crowded / f"stray{index:04}.txt").touch()
    learner_copy(submissions / "unwritable", stages=[1])
    out = root / "out"
    (out / "students" / "unwritable.json").mkdir(parents=True)  # its report cannot be written: the batch goes on
    return submissions, out, batch(submissions, out, "--workers", "1")


@pytest.fixture(scope="module")
def rows(hostile_class) -> dict[str, dict]:
    _, out, _ = hostile_class
    with open(out / "grades.csv", newline="") as handle:
        return {row["student_id"]: row for row in csv.DictReader(handle)}


def report_of(out, student_id: str) -> dict:
    return json.loads((out / "students" / f"{student_id}.json").read_text())


def test_a_name_too_long_for_a_report_file_gets_a_short_id_and_is_graded(hostile_class, rows):
    _, out, _ = hostile_class
    [long_id] = [student for student in rows if student.startswith("aaaa")]
    assert len(long_id.encode()) <= MAX_ID_BYTES and rows[long_id]["score"] == "20"
    assert report_of(out, long_id)["complete"] and (out / "students" / f"{long_id}.txt").exists()
    assert not list(out.rglob("*.partial")), "temporary files left behind"


def test_one_students_unwritable_report_leaves_only_them_ungraded(hostile_class, rows):
    _, out, result = hostile_class
    assert "cannot write the report of unwritable, left ungraded" in result.stderr
    assert rows["unwritable"]["flags"] == "not graded: report unreadable" and rows["honest"]["score"] == "100"


def test_no_gradebook_cell_is_a_formula(rows):
    cells = [cell for row in rows.values() for cell in row.values()]
    assert not [cell for cell in cells if cell.startswith(FORMULA_STARTS)]
    assert rows[f"'{FORMULA}"]["score"] == "20"


def test_names_that_escape_alike_get_distinct_ids(hostile_class, rows):
    _, out, _ = hostile_class
    escaped = [student for student in rows if student.startswith(LOOKALIKE)]
    assert len(escaped) == 2 and LOOKALIKE in escaped  # a name printable already keeps its id
    scores = {student: report_of(out, student)["stages"][0]["score"] for student in escaped}
    assert scores[LOOKALIKE] == 0 and sum(scores.values()) == 20  # each graded on their own files


def test_a_symbolic_link_in_the_class_folder_is_skipped_not_followed(hostile_class, rows):
    _, _, result = hostile_class
    for link in ["copier.zip", "shadow.zip", "copier-folder"]:
        assert f"skipped {link} (a symbolic link, not followed)" in result.stderr
    assert not [student for student in rows if student.startswith(("copier", "shadow"))]


def test_a_hard_linked_stage_file_is_ignored(hostile_class, rows):
    _, out, _ = hostile_class
    report = report_of(out, "borrower")
    assert "ignored: stage1_softmax.py (a hard link)" in report["flags"]
    assert [s["score"] for s in report["stages"][:2]] == [0, 20]


def test_the_ignored_flag_lists_a_few_names_and_counts_the_rest(hostile_class, rows):
    _, out, _ = hostile_class
    flags = rows["crowded"]["flags"]
    assert len(flags) < 1000 and f"stray0019.txt and {STRAYS - 20} more" in flags, flags
    assert rows["crowded"]["score"] == "20"


@given(st.text(min_size=0, max_size=300))
def test_an_id_names_one_file_in_the_out_folder_whatever_the_lms_records_say(name):
    """A Gradescope sid, an email or a name is whatever the LMS holds: an id never holds a path separator,
    never hides, never runs past a file name's length."""
    student = student_id(name)
    assert student and "/" not in student and "\0" not in student
    assert not student.startswith(".") and len(student.encode()) <= MAX_ID_BYTES
    assert (Path("out") / f"{student}.json").parent == Path("out")
    # grades.csv quotes an id a spreadsheet would run with a leading ' (inert): no id may start so itself
    assert not student.startswith("'")


def test_an_id_that_reads_as_another_quoted_in_the_gradebook_is_kept_apart(tmp_path):
    """grades.csv writes id -ada as '-ada; a folder named '-ada is another student, whose id must differ."""
    quoted = student_id("'-ada")
    assert quoted != "'-ada" and inert([quoted]) != inert(["-ada"])
    gradebook = tmp_path / "grades.csv"
    gradebook.write_text("student_id,score,max_score\n'-ada,100,100\n'-ada,4,100\n")
    with pytest.raises(ValueError, match="two rows"):
        read_grades(gradebook)


def test_a_submitter_id_that_is_a_path_writes_nothing_outside_its_own_report(tmp_path):
    """Submitters "../out/bob" and "../escaped" next to bob: each report stays in OUT under its own id."""
    cls, out = tmp_path / "class", tmp_path / "out"
    records = []
    for number, sid in enumerate(["bob", "../out/bob", "../escaped"], 1):
        learner_copy(cls / f"submission_{number}", stages=[1] if sid == "bob" else [2])
        records.append(f"submission_{number}:\n  :submitters:\n  - :sid: '{sid}'\n")
    (cls / "submission_metadata.yml").write_text("".join(records))
    batch(cls, out)
    assert not (tmp_path / "escaped.json").exists() and not (tmp_path / "escaped.txt").exists()
    assert json.loads((out / "students" / "bob.json").read_text())["stages"][0]["score"] == 20  # bob's own stage 1
    assert "Grading bob " in (out / "students" / "bob.txt").read_text()
    with (out / "grades.csv").open(newline="") as handle:
        ids = [row["student_id"] for row in csv.DictReader(handle)]
    assert len(ids) == 3 and all("/" not in i and not i.startswith(".") for i in ids)
