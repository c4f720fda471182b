"""Every report a student is given is kept (OUT/.grader/history/<id>/), and course.toml's [gradebook] keep decides
which the gradebook shows: the latest, or the best final score after each one's own late penalty."""

import csv
import json

from tests.grading import MUTANTS, batch, learner_copy
from tests.test_late_policy import batch_with_times


def rows(out) -> dict[str, dict]:
    with open(out / "grades.csv", newline="") as handle:
        return {row["student_id"]: row for row in csv.DictReader(handle)}


def test_a_resubmission_keeps_the_earlier_report_and_best_keeps_the_higher_grade(tmp_path):
    submissions, out, course = tmp_path / "class", tmp_path / "out", tmp_path / "course.toml"
    for name in ("ada", "bo"):
        learner_copy(submissions / name, stages=[1])
    batch(submissions, out)
    mutant = next(m for m in MUTANTS if m.get("hint") == "softmax-wrong-dim")
    learner_copy(submissions / "ada", mutant, stages=[1])  # ada hands in again, worse
    batch(submissions, out)
    history = sorted(p.name for p in (out / ".grader" / "history" / "ada").iterdir())
    assert history == ["001.json", "002.json"] and len(list((out / ".grader" / "history" / "bo").iterdir())) == 1
    first, second = (json.loads((out / ".grader" / "history" / "ada" / name).read_text())["score"] for name in history)
    assert first == 20 and second < 20
    latest = rows(out)["ada"]
    assert (latest["score"], latest["kept"]) == (str(second), "latest")

    course.write_text('[gradebook]\nkeep = "best"\n')
    result = batch(submissions, out, "--course", str(course))
    assert "0 of 2 to grade" in result.stderr  # which grade counts is a gradebook's choice: no one is regraded
    best = rows(out)
    assert (best["ada"]["score"], best["ada"]["final"], best["ada"]["kept"]) == ("20", "20", "best of 2: grading 1")
    assert best["bo"]["kept"] == "best of 1: grading 1 (the latest)"
    assert json.loads((out / "students" / "ada.json").read_text())["score"] == second  # the report stays the latest's

    # an earlier grading whose file cannot be read is left out of "best" by name, never silently
    (out / ".grader" / "history" / "ada" / "001.json").write_text("{broken")
    batch(submissions, out, "--course", str(course))
    ada = rows(out)["ada"]
    assert ada["kept"] == "best of 2: grading 2 (the latest)" and ada["score"] == str(second)
    assert "grading 1 (ada/001.json cannot be read as a report)" in ada["flags"]


def test_best_compares_final_scores_each_with_the_penalty_of_its_own_submission_time(tmp_path):
    """89 on time, then 93 handed in three days late at 10 % a day: best keeps the on-time grade."""
    submissions, out, course = tmp_path / "class", tmp_path / "out", tmp_path / "course.toml"
    mutant = next(m for m in MUTANTS if m.get("hint") == "softmax-wrong-dim")
    learner_copy(submissions / "ada", mutant, stages=[1])
    course.write_text(
        '[due]\nassignment = 2025-03-14T23:59:00Z\n\n[late_penalty]\npenalty = 10\n\n[gradebook]\nkeep = "best"\n'
    )
    on_time = batch_with_times({"ada": "2025-03-14T20:00:00Z"}, [], submissions, "--out", out, "--course", course)
    assert on_time.returncode == 0
    early = rows(out)["ada"]
    learner_copy(submissions / "ada", stages=[1])  # right now, and late: 20 - 30 % of 20 = 14
    batch_with_times({"ada": "2025-03-17T20:00:00Z"}, [], submissions, "--out", out, "--course", course)
    kept = rows(out)["ada"]
    assert float(early["final"]) > 14
    assert (kept["final"], kept["kept"], kept["submitted"]) == (
        early["final"],
        "best of 2: grading 1",
        early["submitted"],
    )
    assert (
        json.loads((out / "students" / "ada.json").read_text())["late"]["penalty_points"] == 6
    )  # the latest's own penalty
