"""A points change re-prices the verdicts the reports store, running no code, and gives what a regrade with
the new points gives; where it could not (a check that was free gets a price), the student is graded again."""

import json
import subprocess
import sys

from tests.conftest import REPO
from tests.grading import MUTANTS, batch, keep_key, learner_copy

STUDENTS = ("ada", "bo", "cy", "dee", "eve")


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
    reports = {name: json.loads((out / "students" / f"{name}.json").read_text()) for name in STUDENTS}
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
    # dee computes every function wrong: the checks of how it computes are voided (results first) once priced
    wrong = (learner_copy(submissions / "dee", stages=[1]) / "stage1_softmax.py").read_text()
    for right in ("inputs @ query  #", "exp_x / exp_x.sum(dim=0)", "attn_weights @ inputs  #"):
        wrong = wrong.replace(right, right.replace(right.split()[0], "1.5 * " + right.split()[0], 1))
    (submissions / "dee" / "stage1_softmax.py").write_text(wrong)
    # eve's softmax is wrong on two scores alone: its random check fails with some cases right, which keeps the
    # checks of how it computes (voiding reads that from the report when re-pricing)
    some = (learner_copy(submissions / "eve", stages=[1]) / "stage1_softmax.py").read_text()
    right = "    return exp_x / exp_x.sum(dim=0)"
    some = some.replace(right, f"    if x.shape[0] == 2:\n        return exp_x / (exp_x.sum(dim=0) + 1.0)\n{right}")
    (submissions / "eve" / "stage1_softmax.py").write_text(some)
    repriced, fresh = tmp_path / "repriced", tmp_path / "fresh"
    batch(submissions, repriced)
    heavier = points_file(tmp_path / "points.toml", **{"document.softmax_naive": 5, "random.softmax_naive": 0.5})
    result = batch(submissions, repriced, "--points", str(heavier))
    assert "5 reports re-priced for the new points table, no code run again" in result.stderr
    assert "0 of 5 to grade; 5 unchanged" in result.stderr
    keep_key(repriced, fresh)  # one class, one key: the same hidden inputs in both
    batch(submissions, fresh, "--points", str(heavier))
    assert scores(repriced) == scores(fresh)  # what a regrade with the new points writes
    assert (repriced / "grades.csv").read_bytes() == (fresh / "grades.csv").read_bytes()
    assert (
        "Grade recorded: 21.5/101.5" in (repriced / "students" / "ada.txt").read_text()
    )  # 20 - 2 + 5 - 2 + 0.5, of 100 + 1.5
    for name in STUDENTS:  # and the feedback the student reads
        assert (repriced / "students" / f"{name}.txt").read_text() == (fresh / "students" / f"{name}.txt").read_text()

    # a free note gets a price and a priced check becomes free: each report keeps what voiding rests on (the
    # checks' targets, and their own verdicts where voiding replaced them), so voiding is applied anew, no code
    # runs, and the result is still what a regrade writes
    crossing = points_file(
        tmp_path / "note.toml", **{"note.fixed_device": 1, "property.inputs_kept": 0, "random.softmax_naive": 3.5}
    )
    result = batch(submissions, repriced, "--points", str(crossing))
    assert "5 reports re-priced for the new points table, no code run again" in result.stderr, result.stderr
    voided = {
        c["id"]
        for c in json.loads((repriced / "students" / "dee.json").read_text())["stages"][0]["checks"]
        if "own" in c
    }
    assert {"note.fixed_device"} <= voided and "property.inputs_kept" not in voided  # voided now, and no longer
    again = tmp_path / "again"
    keep_key(repriced, again)
    batch(submissions, again, "--points", str(crossing))
    assert scores(repriced) == scores(again)
    assert (repriced / "grades.csv").read_bytes() == (again / "grades.csv").read_bytes()
    for name in STUDENTS:
        assert (repriced / "students" / f"{name}.txt").read_text() == (again / "students" / f"{name}.txt").read_text()
        assert (
            json.loads((repriced / "students" / f"{name}.json").read_text())["stages"]
            == json.loads((again / "students" / f"{name}.json").read_text())["stages"]
        )  # every verdict, voided or not, as the regrade judged it


def test_a_report_that_does_not_keep_what_voiding_rests_on_is_graded_again_across_zero(tmp_path):
    """Reports written before the checks kept their targets cannot be voided anew: a price that crosses zero
    grades them again, as before."""
    submissions, out = tmp_path / "class", tmp_path / "out"
    learner_copy(submissions / "ada", stages=[1])
    batch(submissions, out)
    report = json.loads((out / "students" / "ada.json").read_text())
    for stage in report["stages"]:
        for check in stage["checks"]:
            check.pop("target"), check.pop("own", None), check.pop("from_source", None)
    (out / "students" / "ada.json").write_text(json.dumps(report))
    priced_note = points_file(tmp_path / "note.toml", **{"note.fixed_device": 1})
    result = batch(submissions, out, "--points", str(priced_note))
    assert "re-priced" not in result.stderr, result.stderr
    assert "1 of 1 to grade (points table changed: all 1)" in result.stderr


def test_a_note_price_moved_in_course_toml_is_re_priced_and_said_a_line_per_check(tmp_path):
    """The course's [notes] prices move points as a points file does: the batch re-prices and names each price
    that moved, whatever moved it."""
    submissions, out, course = tmp_path / "class", tmp_path / "out", tmp_path / "course.toml"
    learner_copy(submissions / "ada", stages=[1])
    course.write_text('[notes]\n"stage1.fixed_device" = 1\n')
    batch(submissions, out, "--course", str(course))
    course.write_text('[notes]\n"stage1.fixed_device" = 2\n')
    result = batch(submissions, out, "--course", str(course))
    assert "1 report re-priced for the new points table" in result.stderr, result.stderr
    assert "re-priced stage1 note.fixed_device: 1 -> 2" in result.stderr
