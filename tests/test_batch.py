"""Grading a class: one report per student, a gradebook, resumable and deterministic."""

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile

import jsonschema
import pytest

from grader.core import report as report_model
from grader.views.terminal import render_text
from tests.conftest import REPO
from tests.grading import MUTANTS, batch, keep_key, learner_copy

SCHEMA = json.loads((REPO / "grader" / "core" / "schemas" / "report.schema.json").read_text())


@pytest.fixture(scope="module")
def classroom(tmp_path_factory):
    """Eight students: correct, stub, partly wrong, zipped, damaged, and a stray file."""
    root = tmp_path_factory.mktemp("class") / "submissions"
    learner_copy(root / "ada")
    shutil.copytree(REPO / "exercises", root / "bo", ignore=shutil.ignore_patterns("__pycache__"))
    for name, mutant in zip(["cy", "di", "ed"], MUTANTS[::9]):
        learner_copy(root / name, mutant)
    zipped = learner_copy(root.parent / "fay-files")
    with zipfile.ZipFile(root / "fay.zip", "w") as archive:
        for path in zipped.iterdir():
            archive.write(path, f"fay/{path.name}")
    (root / "gus.zip").write_bytes(b"PK\x03\x04 not really a zip")
    learner_copy(root / "hal", stages=[1, 2])
    (root / "README.txt").write_text("not a submission")
    return root


@pytest.fixture(scope="module")
def graded(classroom, tmp_path_factory):
    out = tmp_path_factory.mktemp("graded")
    result = batch(classroom, out, "--workers", "2")
    return result, out


def graded_as(path) -> dict:
    """A report without the time it was written: all that a grading run decides."""
    report = json.loads(path.read_text())
    del report["graded_at"]
    return report


def gradebook(out) -> list[dict]:
    with open(out / "grades.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def test_every_student_gets_a_report_a_feedback_file_and_a_row(graded):
    result, out = graded
    rows = {row["student_id"]: row for row in gradebook(out)}
    assert list(rows) == ["ada", "bo", "cy", "di", "ed", "fay", "gus", "hal"]
    for student in rows:
        report = report_model.read(out / "students" / f"{student}.json")
        jsonschema.validate(report, SCHEMA)
        feedback = render_text(report, student, color=False, student_facing=True, folder="")
        assert (out / "students" / f"{student}.txt").read_text() == feedback + "\n"
        assert f"open {student}/" not in feedback  # the id names no folder of the student's
        assert float(rows[student]["score"]) == report["score"]
        assert [float(rows[student][f"stage{n}"]) for n in range(1, 6)] == [s["score"] for s in report["stages"]]
    assert rows["ada"]["score"] == rows["fay"]["score"] == "100"
    assert rows["bo"]["score"] == "0" and rows["hal"]["score"] == "40"
    assert all(0 < float(rows[s]["score"]) < 100 for s in ("cy", "di", "ed"))
    assert rows["gus"]["score"] == "0" and "unreadable" in rows["gus"]["flags"]
    assert "skipped README.txt" in result.stderr
    assert "8/8 graded" in result.stderr and "/s, ETA" in result.stderr  # plain progress lines in a log
    assert not list(out.rglob("*.partial")), "temporary files left behind"


def test_the_gradebook_is_byte_identical_across_runs_and_lane_counts(graded, classroom, tmp_path):
    _, out = graded
    keep_key(out, tmp_path)
    batch(classroom, tmp_path, "--workers", "1")
    assert (tmp_path / "grades.csv").read_bytes() == (out / "grades.csv").read_bytes()
    for report in (out / "students").glob("*.json"):
        assert graded_as(tmp_path / "students" / report.name) == graded_as(report), report.name


def test_a_killed_batch_resumes_without_losing_or_redoing_work(graded, classroom, tmp_path):
    _, reference = graded
    command = [sys.executable, "-m", "grader", "batch", str(classroom), "--out", str(tmp_path), "--workers", "1"]
    process = subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + 300
    while len(list(tmp_path.glob("students/*.json"))) < 3 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    # written whole or not at all; when the judge graded each (the gradebook may add the grade of record later)
    kept = {p.name: json.loads(p.read_text())["graded_at"] for p in tmp_path.glob("students/*.json")}
    assert 3 <= len(kept) < 8, kept

    result = batch(classroom, tmp_path, "--workers", "1")
    assert f"{8 - len(kept)} of 8 to grade ({8 - len(kept)} new); {len(kept)} unchanged" in result.stderr
    assert {
        name: json.loads((tmp_path / "students" / name).read_text())["graded_at"] for name in kept
    } == kept  # not graded again
    assert (tmp_path / "grades.csv").read_bytes() == (reference / "grades.csv").read_bytes()

    batch(classroom, tmp_path, "--workers", "1", "--force")
    assert all(
        json.loads((tmp_path / "students" / name).read_text())["graded_at"] != then for name, then in kept.items()
    )


def test_two_submissions_for_one_student_grade_neither_as_theirs_and_the_class_goes_on(tmp_path):
    learner_copy(tmp_path / "class" / "ada", stages=[1])
    shutil.make_archive(str(tmp_path / "class" / "ada"), "zip", tmp_path / "class" / "ada")
    learner_copy(tmp_path / "class" / "bob", stages=[1])
    result = batch(tmp_path / "class", tmp_path / "out")
    with (tmp_path / "out" / "grades.csv").open(newline="") as handle:
        rows = {row["student_id"]: row for row in csv.DictReader(handle)}
    assert rows["bob"]["score"] == "20"
    assert rows["ada"]["score"] == "0"
    assert "unreadable: 2 submissions claim this id (ada and ada.zip)" in rows["ada"]["flags"]
    assert (
        "ada" in result.stderr.split("two submissions claim its id), and scores nothing:")[-1]
    )  # the closing summary names her


def test_an_incomplete_report_is_graded_again_and_a_complete_one_is_not(graded, classroom, tmp_path):
    _, reference = graded
    keep_key(reference, tmp_path)
    (tmp_path / "students").mkdir()
    for report in (reference / "students").glob("*.json"):
        shutil.copy(report, tmp_path / "students" / report.name)
    disrupted = json.loads((tmp_path / "students" / "ada.json").read_text())
    disrupted.update(
        score=0, complete=False, flags=["incomplete: the process that runs the submitted code has stopped"]
    )
    (tmp_path / "students" / "ada.json").write_text(json.dumps(disrupted))
    kept = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "students").glob("*.json") if p.name != "ada.json"}
    result = batch(classroom, tmp_path, "--workers", "1")
    assert "1 of 8 to grade (1 incomplete); 7 unchanged" in result.stderr
    assert {name: (tmp_path / "students" / name).stat().st_mtime_ns for name in kept} == kept
    assert graded_as(tmp_path / "students" / "ada.json") == graded_as(reference / "students" / "ada.json")  # complete


def test_a_sandbox_that_dies_marks_its_student_incomplete_and_the_next_is_graded_in_a_fresh_one(tmp_path):
    import threading

    from grader.core.options import GradingOptions
    from grader.core.points import points_in_use
    from grader.intake.submission import read_submission
    from grader.judge.session import grade_each
    from grader.sandbox.zygote import Sandbox

    slow = learner_copy(tmp_path / "slow", stages=[1])
    path = slow / "stage1_softmax.py"
    path.write_text(
        path.read_text().replace(
            "def softmax_naive(x: torch.Tensor) -> torch.Tensor:\n",
            "def softmax_naive(x: torch.Tensor) -> torch.Tensor:\n    __import__('time').sleep(0.3)\n",
        )
    )
    honest = learner_copy(tmp_path / "honest", stages=[1])
    reports = []
    with Sandbox() as sandbox:
        sandbox.device  # noqa: B018 - the zygote is up
        threading.Timer(1.5, sandbox._zygote.kill).start()  # the grader's own failure, mid-student
        grade_each(
            sandbox,
            iter([read_submission(slow), read_submission(honest)]),
            reports.append,
            GradingOptions((1,), points_in_use(), timeout=5.0),
        )
    first, second = reports
    assert not first["complete"] and any(flag.startswith("incomplete: ") for flag in first["flags"]), first["flags"]
    assert second["complete"] and second["score"] == 20, second["flags"]


def test_a_check_the_judge_could_not_finish_marks_its_student_incomplete(tmp_path, monkeypatch):
    """A failure of the judge's own inside a check (its memory, a fault of its code) leaves the report incomplete,
    so that the batch grades the student again, and the next student is graded as usual."""
    import torch

    from grader.core.options import GradingOptions
    from grader.core.points import points_in_use
    from grader.intake.submission import read_submission
    from grader.judge.plugin import grader_faults
    from grader.judge.session import grade_each
    from grader.sandbox.zygote import Sandbox

    equal, calls = torch.equal, []

    def out_of_memory_once(*args, **kwargs):  # the judge's first comparison fails: the grader's fault
        calls.append(1)
        if len(calls) == 1:
            raise MemoryError("the judge ran out of memory")
        return equal(*args, **kwargs)

    monkeypatch.setattr(torch, "equal", out_of_memory_once)
    first, second = learner_copy(tmp_path / "first", stages=[1]), learner_copy(tmp_path / "second", stages=[1])
    reports: list[dict] = []
    with Sandbox() as sandbox:
        grade_each(
            sandbox,
            iter([read_submission(first), read_submission(second)]),
            reports.append,
            GradingOptions((1,), points_in_use()),
        )
    assert len(calls) > 1, "the judge never compared with torch.equal: the test provokes nothing"
    disrupted, graded = reports
    assert grader_faults(disrupted) and not disrupted["complete"], disrupted["flags"]
    assert any("MemoryError" in flag for flag in disrupted["flags"] if flag.startswith("incomplete: ")), disrupted
    assert graded["complete"] and not grader_faults(graded) and graded["score"] == 20, graded["flags"]


def test_a_student_asked_for_is_found_whatever_unicode_form_the_id_was_typed_in(tmp_path):
    from grader.classroom.plan import chosen_ids as _chosen
    from grader.intake.students import Student

    students = [Student("Jos\u00e9", tmp_path), Student("ada", tmp_path)]
    assert _chosen(students, ["Jose\u0301"], tmp_path) == {"Jos\u00e9"}
    with pytest.raises(ValueError, match="no student bo"):
        _chosen(students, ["bo"], tmp_path)


def refused(*argv, lines: int = 1) -> str:
    """The last line of the batch's stderr, where it must refuse (exit 2) with no traceback, in ``lines`` lines."""
    result = subprocess.run(
        [sys.executable, "-m", "grader", "batch", *map(str, argv)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.count("\n") == lines, result.stderr
    return result.stderr.splitlines()[-1]


@pytest.fixture
def immutable():
    """chattr +i on what a test names (root writes past any mode), undone after it."""
    held = []

    def hold(path):
        subprocess.run(["chattr", "+i", str(path)], check=True)
        held.append(path)

    yield hold
    for path in held:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_an_out_that_is_a_file_or_cannot_be_written_is_refused_in_one_line(tmp_path, immutable):
    learner_copy(tmp_path / "class" / "ada", stages=[1])
    (tmp_path / "grades.csv").write_text("x\n")
    assert "is a file, not a folder" in refused(tmp_path / "class", "--out", tmp_path / "grades.csv")
    assert (tmp_path / "grades.csv").read_text() == "x\n"
    (tmp_path / "locked").mkdir()
    immutable(tmp_path / "locked")
    said = refused(tmp_path / "class", "--out", tmp_path / "locked", lines=2)  # after the line that counts the class
    assert said.startswith(f"grader batch: {tmp_path / 'locked'} cannot be written"), said


def test_a_gradebook_that_cannot_be_replaced_keeps_the_reports_and_says_to_close_it(tmp_path):
    learner_copy(tmp_path / "class" / "ada", stages=[1])
    (tmp_path / "out" / "grades.csv").mkdir(parents=True)  # as a spreadsheet holding it open on Windows refuses
    said = refused(tmp_path / "class", "--out", tmp_path / "out", lines=4)  # after the class, its plan and progress
    assert (
        said.startswith(f"grader batch: {tmp_path / 'out' / 'grades.csv'} cannot be replaced")
        and "close grades.csv" in said
        and "run again" in said
    ), said
    assert json.loads((tmp_path / "out" / "students" / "ada.json").read_text())["score"] == 20


@pytest.mark.parametrize("inside", [".", "grades", "ada"])
def test_an_out_in_the_class_folder_is_refused_before_anything_is_written(tmp_path, inside):
    learner_copy(tmp_path / "class" / "ada", stages=[1])
    before = sorted(tmp_path.rglob("*"))
    said = refused(tmp_path / "class", "--out", tmp_path / "class" / inside)
    assert "is inside the class folder" in said and "give an --out outside it" in said, said
    assert sorted(tmp_path.rglob("*")) == before


def test_a_class_of_no_student_is_refused_in_one_line_and_nothing_is_written(tmp_path):
    (tmp_path / "empty").mkdir()
    said = refused(tmp_path / "empty", "--out", tmp_path / "out")
    assert said.startswith(f"grader batch: no student found in {tmp_path / 'empty'} as layout ") and "--layout" in said
    moodle = tmp_path / "moodle"  # a Moodle download read as another LMS's
    learner_copy(moodle / "Ada Lovelace_101_assignsubmission_file_", stages=[1])
    said = refused(moodle, "--out", tmp_path / "out", "--layout", "canvas")
    assert said.startswith(f"grader batch: no student found in {moodle} as layout canvas"), said
    assert not (tmp_path / "out").exists()


def test_ids_that_differ_only_by_case_are_named_in_one_line():
    from grader.classroom.plan import case_twins

    assert case_twins(["Ada", "ada", "bo", "ADA", "Straße", "STRASSE"]) == [
        ("ada", "Ada"),
        ("ADA", "Ada"),
        ("STRASSE", "Straße"),
    ]
    assert case_twins(["ada", "ada (1)", "bo"]) == []


def test_a_class_with_ids_that_differ_only_by_case_is_told_so(tmp_path):
    learner_copy(tmp_path / "class" / "Ada", stages=[1])
    learner_copy(tmp_path / "class" / "ada", stages=[1])
    result = batch(tmp_path / "class", tmp_path / "out")
    assert (
        "grader batch: 1 submission named as another but for case, graded apart: ada beside Ada; on a macOS or "
        "Windows disk their reports are one file: check whether they are one student's\n"
    ) in result.stderr
