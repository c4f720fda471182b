"""A points change re-prices the verdicts the reports store, running no code, and gives what a regrade with
the new points gives; where it could not (a check that was free gets a price), the student is graded again."""

import json
import subprocess
import sys

from tests.conftest import REPO
from tests.grading import MUTANTS, batch, learner_copy

STUDENTS = ("ada", "bo", "cy")


def points_file(path, **changes: float):
    """The registry's points (python -m grader.cli.points) with some of stage 1's checks priced otherwise."""
    text = subprocess.run(
        [sys.executable, "-m", "grader.cli.points"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    for check, points in changes.items():
        old = next(line for line in text.splitlines() if line.startswith(f'"{check}" = '))
        text = text.replace(old, f'"{check}" = {points:g}', 1)
    path.write_text(text)
    return path


def scores(out) -> dict[str, list]:
    """Each student's report as grades compare: every check's status, score and points possible."""
    reports = {name: json.loads((out / f"{name}.json").read_text()) for name in STUDENTS}
    return {
        name: [(c["id"], c["status"], c["score"], c["max_score"]) for s in r["stages"] for c in s["checks"]]
        + [r["score"], r["max_score"], r["fingerprint"]]
        for name, r in reports.items()
    }


def test_a_points_change_re_prices_without_grading_and_agrees_with_a_regrade(tmp_path):
    submissions = tmp_path / "class"
    learner_copy(submissions / "ada", stages=[1])
    learner_copy(submissions / "bo", next(m for m in MUTANTS if m.get("hint") == "softmax-wrong-dim"), stages=[1])
    learner_copy(submissions / "cy", next(m for m in MUTANTS if m.get("hint") == "softmax-not-exponentiated"), [1])
    repriced, fresh = tmp_path / "repriced", tmp_path / "fresh"
    batch(submissions, repriced)
    heavier = points_file(tmp_path / "points.toml", **{"document.softmax_naive": 5, "random.softmax_naive": 0.5})
    result = batch(submissions, repriced, "--points", str(heavier))
    assert "3 reports re-priced for the new points table, no code run again" in result.stderr
    assert "0 of 3 to grade; 3 unchanged" in result.stderr
    batch(submissions, fresh, "--points", str(heavier))
    assert scores(repriced) == scores(fresh)  # what a regrade with the new points writes
    assert (repriced / "grades.csv").read_bytes() == (fresh / "grades.csv").read_bytes()
    assert "Grade recorded: 21.5/101.5" in (repriced / "ada.txt").read_text()  # 20 - 2 + 5 - 2 + 0.5, of 100 + 1.5
    for name in STUDENTS:  # and the feedback the student reads
        assert (repriced / f"{name}.txt").read_text() == (fresh / f"{name}.txt").read_text()

    # a note that was free gets a price: voiding could judge it otherwise, so the class is graded again
    priced_note = points_file(tmp_path / "note.toml", **{"note.fixed_device": 1})
    result = batch(submissions, repriced, "--points", str(priced_note))
    assert "re-priced" not in result.stderr, result.stderr
    assert "3 of 3 to grade (points table changed: all 3)" in result.stderr
