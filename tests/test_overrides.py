"""Grades an instructor sets by hand (OUT/overrides.csv) apply on every run, show in the gradebook and in the
student's feedback, survive regrades, and are flagged for review, never dropped, when the automatic score
they replaced changes; a row that cannot be used costs one line."""

import csv
import json

import jsonschema
import pytest

from grader.classroom.gradebook import override_cell
from grader.core.inputs_key import KEY_FILE
from tests.conftest import REPO
from tests.grading import MUTANTS, batch, batch_run, learner_copy

SCHEMA = json.loads((REPO / "grader" / "core" / "schemas" / "report.schema.json").read_text())


def gradebook(out) -> dict[str, dict]:
    with open(out / "grades.csv", newline="") as handle:
        return {row["student_id"]: row for row in csv.DictReader(handle)}


def test_a_total_override_of_a_late_hand_in_names_the_automatic_final_it_replaced():
    """A total replaces the final grade, after the late penalty: 90 for a late 90 is 18.3 points given back."""
    total = {"stage": "total", "points": 90, "automatic": 90}
    assert override_cell([total], 18.3) == "total 90 (automatic 90, 71.7 after the late penalty)"
    assert override_cell([total], 0) == "total 90 (automatic 90)"
    stage = {"stage": "stage1", "points": 15, "automatic": 20}  # a stage's is replaced before the penalty
    assert (
        override_cell([stage, total], 5)
        == "stage1 15 (automatic 20); total 90 (automatic 90, 85 after the late penalty)"
    )


def test_overrides_apply_on_every_run_and_a_changed_automatic_score_is_flagged_for_review(tmp_path):
    submissions, out = tmp_path / "class", tmp_path / "out"
    for name in ("ada", "bo", "cy"):
        learner_copy(submissions / name, stages=[1])
    batch(submissions, out)
    (out / "overrides.csv").write_text(
        "student_id,stage,points,reason\n"
        "ada,1,15,regraded by hand: the example in the docstring was copied\n"
        "bo,total,90,accommodation agreed with the department\n"
        "cy,1,25,too many\n"
        "zed,1,5,no such student\n"
        "ada,stage9,1,no such stage\n"
        "cy,1,5,\n"
    )
    result = batch(submissions, out)
    assert "0 of 3 to grade; 3 unchanged" in result.stderr  # overrides re-grade no one
    said = result.stderr
    assert "line 4: points '25' are not a number from 0 to 20; row skipped" in said
    assert "line 5: 'zed' is no student of the class; row skipped" in said
    assert "line 6: stage 'stage9' is no graded stage (write a stage number, or total); row skipped" in said
    assert "line 7: the reason is empty" in said

    rows = gradebook(out)
    assert (rows["ada"]["score"], rows["ada"]["final"]) == ("20", "15")  # the automatic score stays in view
    assert rows["ada"]["override"] == "stage1 15 (automatic 20)"
    assert rows["ada"]["override_reason"] == "stage1: regraded by hand: the example in the docstring was copied"
    assert (rows["bo"]["final"], rows["bo"]["override"]) == ("90", "total 90 (automatic 20)")
    assert (rows["cy"]["final"], rows["cy"]["override"]) == ("20", "")
    report = json.loads((out / "students" / "ada.json").read_text())
    jsonschema.validate(report, SCHEMA)
    assert report["score"] == 20 and report["overrides"][0]["points"] == 15
    assert (
        "your instructor set stage1 to 15 points (automatic: 20): regraded by hand"
        in (out / "students" / "ada.txt").read_text()
    )
    assert "your instructor set your final grade to 90 points" in (out / "students" / "bo.txt").read_text()
    assert "instructor" not in (out / "students" / "cy.txt").read_text()

    # ada hands in again with a mistake: graded again, the override still applies, and asks to be looked at
    mutant = next(m for m in MUTANTS if m.get("hint") == "softmax-wrong-dim")
    learner_copy(submissions / "ada", mutant, stages=[1])
    result = batch(submissions, out)
    rows = gradebook(out)
    assert rows["ada"]["final"] == "15" and rows["ada"]["score"] != "20"
    assert f"override-review: stage1 scores {rows['ada']['score']} now, 20 when overridden" in rows["ada"]["flags"]
    assert "1 override to review: the automatic score changed since it was written" in result.stderr
    assert "override-review" not in rows["bo"]["flags"]  # bo's total: their automatic score did not change

    # the instructor's file is theirs: taking a row out takes the override out
    (out / "overrides.csv").write_text("student_id,stage,points,reason\nbo,total,90,accommodation\n")
    batch(submissions, out)
    rows = gradebook(out)
    assert rows["ada"]["final"] == rows["ada"]["score"] and rows["ada"]["override"] == ""
    assert "instructor" not in (out / "students" / "ada.txt").read_text()


def test_a_student_whose_id_spells_the_grader_state_is_graded_as_any_and_the_override_memory_holds(tmp_path):
    # issue 36: a folder named overrides-seen (a valid GitHub user name) wrote OUT/overrides-seen.json, where the
    # grader remembers what each override replaced; the next run lost every override-review flag. Students' files
    # now live in OUT/students/ and the grader's state in OUT/.grader/: no id can name either
    submissions, out = tmp_path / "class", tmp_path / "out"
    learner_copy(submissions / "ada", stages=[1])
    batch(submissions, out)
    (out / "overrides.csv").write_text("student_id,stage,points,reason\nada,1,15,regraded by hand\n")
    batch(submissions, out)
    seen = (out / ".grader" / "overrides-seen.json").read_bytes()
    namesakes = ("overrides-seen", "Class-Report", "grades", "history", "students", "class.toml", "names")
    for namesake in namesakes:
        learner_copy(submissions / namesake, stages=[1])
    mutant = next(m for m in MUTANTS if m.get("hint") == "softmax-wrong-dim")
    learner_copy(submissions / "ada", mutant, stages=[1])
    result = batch(submissions, out)
    assert "refused" not in result.stderr
    for namesake in namesakes:
        assert json.loads((out / "students" / f"{namesake}.json").read_text())["stages"][0]["score"] == 20
    assert json.loads((out / ".grader" / "overrides-seen.json").read_text()) == json.loads(seen)  # the grader's own
    rows = gradebook(out)
    assert set(rows) == {"ada", *namesakes}
    assert "override-review" in rows["ada"]["flags"]  # the victim's moved automatic score is still flagged


def test_an_out_folder_of_the_earlier_layout_moves_into_its_folders_once(tmp_path):
    """Reports, feedback and the grader's state at OUT's top (before OUT/students/ and OUT/.grader/) are moved
    once, and the class graded on as if nothing had changed: nobody graded again, the override memory kept."""
    submissions, out = tmp_path / "class", tmp_path / "out"
    learner_copy(submissions / "ada", stages=[1])
    batch(submissions, out)
    (out / "overrides.csv").write_text("student_id,stage,points,reason\nada,1,15,regraded by hand\n")
    batch(submissions, out)
    graded_at = json.loads((out / "students" / "ada.json").read_text())["graded_at"]
    # as an earlier version wrote it, but for the key of hidden inputs, which the first keyed run makes in .grader/
    for entry in [*(out / "students").iterdir(), *(out / ".grader").iterdir()]:
        if entry.name != KEY_FILE:
            entry.rename(out / entry.name)
    (out / "students").rmdir()
    result = batch(submissions, out)
    assert "moved 2 students' files into students/ and the grader's state into .grader/ (once)" in result.stderr
    assert "1 unchanged" in result.stderr or "0 to grade" in result.stderr, result.stderr
    assert json.loads((out / "students" / "ada.json").read_text())["graded_at"] == graded_at
    assert sorted(p.name for p in (out / ".grader").iterdir()) == [
        "class.toml",
        "history",
        KEY_FILE,
        "overrides-seen.json",
    ]
    assert not (out / "ada.json").exists() and (out / "grades.csv").exists() and (out / "overrides.csv").exists()
    assert "moved" not in batch(submissions, out).stderr  # once


# Each state file of the grader's, and what it may not be: read against its schema, named, never replaced.
BROKEN_STATE = [
    ("overrides-seen.json", broken, "is not the grader's memory of overrides")
    for broken in ("{not json", '{"ada 1": "fifteen"}', "[1, 2]")
] + [
    ("class.toml", broken, "is not the grader's record of a class")
    for broken in (
        'layout = "folders"\nfolder = 3\n',
        'folder = "x"\n',
        'layout = "folders"\nfolder = "x"\nextra = 1\n',
    )
]


@pytest.mark.parametrize(("name", "broken", "words"), BROKEN_STATE)
def test_a_state_file_that_fails_its_schema_is_named_and_never_replaced(tmp_path, name, broken, words):
    """issue 36: the override memory read as empty where it could not be read was then written over, and every
    override's review flag was lost without a word; a class record that is not the grader's could mix two classes.
    Now the batch stops before grading and names the file, and keeps it as it was."""
    submissions, out = tmp_path / "class", tmp_path / "out"
    learner_copy(submissions / "ada", stages=[1])
    batch(submissions, out)
    (out / ".grader" / name).write_text(broken)
    result = batch_run(submissions, out)
    assert result.returncode == 2, result.stderr
    said = [line for line in result.stderr.splitlines() if name in line]
    assert len(said) == 1 and words in said[0], result.stderr
    assert (out / ".grader" / name).read_text() == broken  # kept as it was
