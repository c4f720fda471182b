"""Regrades that know what changed: each report's fingerprint, who a re-run grades and why, --student,
and a gradebook built only from reports of this run's grader and points table."""

import csv
import json
import shutil
import subprocess
import sys

import jsonschema
import pytest

from grader.classroom import fingerprint
from grader.classroom.fingerprint import RunFingerprint, grader_hash, points_hash, submission_hash, why_grade
from grader.classroom.plan import close_ids
from grader.core.points import points_file_text
from grader.intake.submission import SubmissionFiles
from tests.conftest import REPO
from tests.grading import MUTANTS, batch, batch_run, learner_copy

SCHEMA = json.loads((REPO / "grader" / "core" / "schemas" / "report.schema.json").read_text())
STAGE1_MUTANT = next(m for m in MUTANTS if m["file"] == "stage1_softmax.py")
STUDENTS = ["ada", "bo", "cy"]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Three students, stage 1 only (the other stages are missing, which grades in no time), graded once."""
    root = tmp_path_factory.mktemp("regrade")
    learner_copy(root / "class" / "ada", stages=[1])
    learner_copy(root / "class" / "bo", stages=[1])
    learner_copy(root / "class" / "cy", STAGE1_MUTANT, stages=[1])
    result = batch(root / "class", root / "out", "--workers", "2")
    return root, result


@pytest.fixture
def term(graded, tmp_path):
    """A copy of the graded class and its output folder, for a test to change."""
    root, _ = graded
    shutil.copytree(root / "class", tmp_path / "class")
    shutil.copytree(root / "out", tmp_path / "out", copy_function=shutil.copy2)
    return tmp_path / "class", tmp_path / "out"


def rows(out) -> dict[str, dict]:
    with open(out / "grades.csv", newline="") as handle:
        return {row["student_id"]: row for row in csv.DictReader(handle)}


def written(out) -> dict[str, int]:
    return {name: (out / "students" / f"{name}.json").stat().st_mtime_ns for name in STUDENTS}


def test_every_report_records_its_fingerprint_and_when_it_was_graded(graded):
    root, result = graded
    assert "3 of 3 to grade (new: all 3)" in result.stderr
    reports = {name: json.loads((root / "out" / "students" / f"{name}.json").read_text()) for name in STUDENTS}
    for report in reports.values():
        jsonschema.validate(report, SCHEMA)
        assert report["graded_at"].endswith("+00:00") and "graded_at" not in report["fingerprint"]
    assert reports["ada"]["fingerprint"]["submission"] == reports["bo"]["fingerprint"]["submission"]  # same files
    assert reports["ada"]["fingerprint"]["submission"] != reports["cy"]["fingerprint"]["submission"]
    assert {r["fingerprint"]["grader"] for r in reports.values()} == {grader_hash()}
    assert reports["ada"]["fingerprint"]["device"] == "cpu"


def test_a_second_run_grades_no_one_and_says_so(term):
    submissions, out = term
    before, gradebook = written(out), (out / "grades.csv").read_bytes()
    result = batch(submissions, out, "--workers", "2")
    assert "0 of 3 to grade; 3 unchanged" in result.stderr
    assert written(out) == before and (out / "grades.csv").read_bytes() == gradebook


def test_a_changed_file_regrades_exactly_its_student(term):
    submissions, out = term
    before = written(out)
    learner_copy(submissions / "bo", STAGE1_MUTANT, stages=[1])
    result = batch(submissions, out, "--workers", "2")
    assert "1 of 3 to grade (1 resubmitted); 2 unchanged" in result.stderr
    assert "grader batch:   resubmitted: bo\n" in result.stderr
    after = written(out)
    assert after["bo"] != before["bo"] and {n: after[n] for n in ("ada", "cy")} == {n: before[n] for n in ("ada", "cy")}
    assert rows(out)["bo"]["score"] == rows(out)["cy"]["score"] != rows(out)["ada"]["score"]


def test_a_new_points_table_re_prices_everyone_and_the_gradebook_never_mixes_tables(term, tmp_path):
    submissions, out = term
    points = tmp_path / "points.toml"
    default = points_file_text()
    points.write_text(default.replace('"document.attention_scores" = 2', '"document.attention_scores" = 4'))

    result = batch(submissions, out, "--points", str(points), "--student", "ada")
    assert "1 of 3 to grade (1 asked for); 2 not asked for (2 points table changed: run without --student" in (
        result.stderr
    )
    graded = rows(out)
    assert (graded["ada"]["score"], graded["ada"]["max_score"], graded["ada"]["final"]) == ("22", "102", "22")
    for name in ("bo", "cy"):  # their reports are of the old table: no score of theirs is listed
        assert graded[name]["flags"] == "not graded: points table changed"
        assert not any(graded[name][column] for column in ("score", "max_score", "stage1", "final"))

    result = batch(submissions, out, "--points", str(points), "--workers", "2")
    assert "2 reports re-priced for the new points table, no code run again" in result.stderr
    assert "0 of 3 to grade; 3 unchanged" in result.stderr
    assert {row["max_score"] for row in rows(out).values()} == {"102"}

    gradebook = (out / "grades.csv").read_bytes()
    forgot = batch_run(submissions, out)
    assert forgot.returncode == 2 and forgot.stderr.count("\n") == 1, forgot.stderr
    assert f"{out} was last graded with --points {points.resolve()}: give --points" in forgot.stderr
    assert "graded again with the default points and the course's note prices" in forgot.stderr
    assert (out / "grades.csv").read_bytes() == gradebook  # nothing regraded with points nobody chose

    registry = tmp_path / "registry-points.toml"  # back to the registry's points, said in so many words
    registry.write_text(default)
    result = batch(submissions, out, "--points", str(registry), "--workers", "2")
    assert "3 reports re-priced for the new points table" in result.stderr and "0 of 3 to grade" in result.stderr
    assert {row["max_score"] for row in rows(out).values()} == {"100"}


def test_a_points_table_that_prices_other_checks_is_refused_in_one_line(term, tmp_path):
    submissions, out = term
    points = tmp_path / "points.toml"
    points.write_text(points_file_text().replace('"document.attention_scores"', '"document.atention"'))
    result = subprocess.run(
        [sys.executable, "-m", "grader", "batch", str(submissions), "--out", str(out), "--points", str(points)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "has no check stage1 'document.atention'" in result.stderr


def test_student_regrades_only_that_student_and_an_unknown_id_names_close_ones(term):
    submissions, out = term
    before = written(out)
    result = batch(submissions, out, "--student", "bo")
    assert "1 of 3 to grade (1 asked for); 2 not asked for" in result.stderr and "changed" not in result.stderr
    after = written(out)
    assert after["bo"] != before["bo"] and {n: after[n] for n in ("ada", "cy")} == {n: before[n] for n in ("ada", "cy")}

    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "grader",
            "batch",
            str(submissions),
            "--out",
            str(out),
            "--student",
            "bo",
            "--student",
            "ad",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and result.stderr == f"grader batch: no student ad in {submissions} (close: ada)\n"
    assert written(out) == after


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("s0l", ["s01", "s02", "s03", "s04", "s05"]),  # l for 1: the look-alike first, then the rest by id
        ("sO3", ["s03"]),  # O for 0 is half a mistake; a second mistake is too far
        ("s30", ["s03"]),  # two neighbours swapped: one edit
        ("S07", ["s07"]),
        ("zzz", []),
    ],
)
def test_close_ids_put_the_likeliest_first(typed, meant):
    assert close_ids(typed, [f"s0{n}" for n in range(8, 0, -1)]) == meant


def test_a_report_edited_by_hand_or_left_by_an_older_grader_is_graded_again(term):
    submissions, out = term
    reference = rows(out)
    edited = json.loads((out / "students" / "cy.json").read_text())
    edited["score"] = edited["stages"][0]["score"] = 20  # a better score, under an old grader's fingerprint
    edited["fingerprint"]["grader"] = "sha256:" + "0" * 64
    (out / "students" / "cy.json").write_text(json.dumps(edited))
    older = json.loads((out / "students" / "bo.json").read_text())
    del older["fingerprint"]
    (out / "students" / "bo.json").write_text(json.dumps(older))
    broken = json.loads((out / "students" / "ada.json").read_text())
    broken["stages"] = "all passed"  # its fingerprint is current, but no row can be made of it
    (out / "students" / "ada.json").write_text(json.dumps(broken))
    result = batch(submissions, out, "--workers", "2")
    assert "3 of 3 to grade (1 report unreadable, 1 report without a fingerprint, 1 grader changed)" in result.stderr
    assert rows(out) == reference
    assert json.loads((out / "students" / "cy.json").read_text())["fingerprint"]["grader"] == grader_hash()


def test_a_report_of_another_device_or_options_or_an_incomplete_one_is_not_current():
    run = RunFingerprint("sha256:g", "sha256:p", "cpu", {"visible_only": False, "timeout": 1.0, "sandboxed": True})
    current = run.of(SubmissionFiles(files={"stage1_softmax.py": b"x"}))
    report = {"complete": True, "fingerprint": current}
    assert why_grade(report, True, current) is None
    assert why_grade(None, False, current) == "new" and why_grade(None, True, current) == "report unreadable"
    assert why_grade({**report, "complete": False}, True, current) == "incomplete"
    for part, changed, reason in [
        ("device", "cuda", "device changed"),
        ("options", {**current["options"], "visible_only": True}, "grading options changed"),
        ("points", "sha256:q", "points table changed"),
    ]:
        assert why_grade({**report, "fingerprint": {**current, part: changed}}, True, current) == reason


def test_a_submission_hash_covers_names_bytes_and_what_staging_left_out():
    base = SubmissionFiles(files={"stage1_softmax.py": b"a", "stage2_self_attention.py": b"b"})
    variants = [
        SubmissionFiles(files={"stage1_softmax.py": b"a", "stage2_self_attention.py": b"c"}),
        SubmissionFiles(files={"stage1_softmax.py": b"a", "stage3_weight_transfer.py": b"b"}),
        SubmissionFiles(files={"stage1_softmax.py": b"ab", "stage2_self_attention.py": b""}),
        SubmissionFiles(files=dict(base.files), ignored=["notes.txt"]),
        SubmissionFiles(files=dict(base.files), problem="truncated or damaged zip"),
    ]
    hashes = {submission_hash(staged) for staged in [base, *variants]}
    assert len(hashes) == 1 + len(variants)
    assert submission_hash(SubmissionFiles(files=dict(reversed(base.files.items())))) == submission_hash(base)


def test_the_grader_hash_follows_the_grading_files_and_not_the_release_tools(monkeypatch, tmp_path):
    copy = tmp_path / "grader"
    shutil.copytree(fingerprint.GRADER_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(fingerprint, "GRADER_DIR", copy)
    original = grader_hash()
    (copy / "authoring" / "release.py").write_text("# the release builder grades nothing\n")
    registry = (copy / "core" / "stages.toml").read_text()
    (copy / "core" / "stages.toml").write_text(
        registry.replace('"document.attention_scores" = 2', '"document.attention_scores" = 3')
    )
    assert grader_hash() == original  # the points are hashed apart, from the table in use
    (copy / "core" / "stages.toml").write_text(registry.replace('title = "weight transfer', 'title = "copying weights'))
    assert grader_hash() != original
    (copy / "core" / "stages.toml").write_text(registry)
    (copy / "core" / "hints.toml").write_text((copy / "core" / "hints.toml").read_text() + "\n# a hint reworded\n")
    assert grader_hash() != original


def test_the_points_hash_is_of_the_table_not_its_layout():
    table = {"stage1": {"document.softmax_naive": 2, "random.softmax_naive": 2}}
    reordered = {"stage1": {"random.softmax_naive": 2, "document.softmax_naive": 2}}
    assert points_hash(table) == points_hash(reordered)
    assert points_hash(table) != points_hash({"stage1": {"document.softmax_naive": 3, "random.softmax_naive": 2}})


def test_one_out_folder_holds_one_class_and_a_fresh_download_of_it_regrades_there(tmp_path):
    """A Gradescope SID that is also a Canvas user id must not replace the Canvas student's report."""
    canvas = tmp_path / "canvas"
    learner = learner_copy(tmp_path / "files", stages=[1])
    canvas.mkdir()
    for path in learner.iterdir():
        shutil.copy(path, canvas / f"smithjane_12345_67890_{path.name}")
    graded = batch(canvas, tmp_path / "out")
    assert "layout canvas, 1 student (" in graded.stderr and "1 student in" in graded.stderr
    report = (tmp_path / "out" / "students" / "12345.json").read_bytes()
    gradescope = tmp_path / "gradescope"
    shutil.copytree(learner, gradescope / "submission_5001")
    (gradescope / "submission_metadata.yml").write_text("submission_5001:\n  :submitters:\n  - :sid: '12345'\n")
    refused = subprocess.run(
        [sys.executable, "-m", "grader", "batch", str(gradescope), "--out", str(tmp_path / "out")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert refused.stderr == (
        f"grader batch: {tmp_path / 'out'} holds the reports of a canvas class (graded from "
        f"{canvas}), and {gradescope} is a gradescope class: give each class its own --out\n"
    )
    assert (tmp_path / "out" / "students" / "12345.json").read_bytes() == report
    fresh = shutil.copytree(canvas, tmp_path / "canvas (2)")  # the same class, downloaded again
    again = batch(fresh, tmp_path / "out")
    assert "0 of 1 to grade; 1 unchanged" in again.stderr
    assert f"{tmp_path / 'out'} was graded from {canvas} before, from {fresh} now" in again.stderr
    assert "was graded from" not in batch(fresh, tmp_path / "out").stderr  # said once, when it changed


def test_a_rerun_that_forgets_the_times_or_course_file_of_the_last_run_is_refused_and_another_file_is_taken(term):
    """Without them, every student's submission time and late penalty would be wiped."""
    folder, out = term
    times = folder.parent / "times.csv"
    times.write_text("student_id,submitted\nada,2025-03-17T12:00:00Z\nbo,2025-03-14T12:00:00Z\n")
    course = folder.parent / "course.toml"
    course.write_text("[due]\nassignment = 2025-03-14T23:59:00-05:00\n[late_penalty]\npenalty = 10\n")
    batch(folder, out, "--times", times, "--course", course)
    assert rows(out)["ada"]["late_penalty"] == "6"
    gradebook = (out / "grades.csv").read_bytes()
    for given, forgotten in ((["--course", course], f"--times {times}"), (["--times", times], f"--course {course}")):
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "grader",
                "batch",
                str(folder),
                "--out",
                str(out),
                "--student",
                "bo",
                *map(str, given),
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        assert f"{out} was last graded with {forgotten}: give {forgotten} again" in result.stderr
        assert (out / "grades.csv").read_bytes() == gradebook
    moved = folder.parent / "moved.toml"  # the instructor may move a due date
    moved.write_text("[due]\nassignment = 2025-03-20T23:59:00-05:00\n[late_penalty]\npenalty = 10\n")
    batch(folder, out, "--times", times, "--course", moved)
    assert rows(out)["ada"]["late_penalty"] == "0" and rows(out)["ada"]["submitted"] == "2025-03-17T12:00:00+00:00"


def test_students_not_asked_for_are_counted_by_why_they_wait():
    from grader.classroom.plan import plan_summary

    # a first run with --student: the others were never graded, which is not "changed"
    line = plan_summary(19, ["asked for"], {"ada"}, {"ada": "asked for", **{f"s{i}": "new" for i in range(18)}})
    assert line == "1 of 19 to grade (1 asked for); 18 not asked for (18 new: run without --student to grade them)"
    assert plan_summary(3, ["asked for"], {"ada"}, {"ada": "asked for", "bo": None, "cy": None}).endswith(
        "2 not asked for"
    )
