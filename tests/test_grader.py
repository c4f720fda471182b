"""The grader gives the solutions full marks, the stubs zero, and names every known mistake."""

import json
import zipfile

import jsonschema
import pytest
import torch

from grader.core.hints import catalog
from grader.core.options import GradingOptions
from grader.core.points import STAGE_POINTS, points_in_use
from grader.core.stages import is_note
from grader.judge.plugin import GradingPlugin, planned_checks, run_checks
from grader.sandbox.printed import PrintedOutput
from grader.sandbox.workers import LearnerFailure
from tests.conftest import REPO
from tests.grading import MUTANTS, grade, learner_copy, stage_scores
from tests.mutation import ABOUT_THE_REPORT, truthful

SCHEMAS = REPO / "grader" / "core" / "schemas"


@pytest.fixture(scope="module")
def solutions_report(tmp_path_factory):
    folder = learner_copy(tmp_path_factory.mktemp("solutions") / "submission")
    return grade(folder)


def test_solutions_score_full_marks(solutions_report):
    result, report = solutions_report
    jsonschema.validate(report, json.loads((SCHEMAS / "report.schema.json").read_text()))
    assert report["score"] == report["max_score"] == 100
    assert all(c["status"] == "passed" for s in report["stages"] for c in s["checks"])
    assert "Total: 100/100" in result.stdout


def test_points_table_matches_the_checks(solutions_report):
    _, report = solutions_report
    for stage in report["stages"]:
        table = points_in_use().table[stage["id"]]
        assert {c["id"] for c in stage["checks"]} == set(table), stage["id"]
        assert sum(table.values()) == STAGE_POINTS == stage["max_score"]
        assert {c["visibility"] for c in stage["checks"]} == {"visible", "hidden"}
        kinds = {c["id"].split(".")[0] for c in stage["checks"]}
        assert (
            {"document", "random", "property", "structure", "shortcut"}
            <= kinds
            <= {"document", "example", "random", "property", "structure", "shortcut", "note"}
        ), stage["id"]
        # notes: advice beyond the book, shown to learners, worth nothing unless a course prices them
        assert all(c["visibility"] == "visible" and table[c["id"]] == 0 for c in stage["checks"] if is_note(c["id"]))
        # visible: the documents' values, and the small public examples that tell mistakes apart
        assert all(c["visibility"] == "visible" for c in stage["checks"] if c["id"].split(".")[0] == "example")


def test_gradescope_results_are_valid(tmp_path):
    folder = learner_copy(tmp_path / "submission", stages=[1])
    _, report = grade(folder, "--stage", "1", "--gradescope", str(tmp_path / "results.json"))
    results = json.loads((tmp_path / "results.json").read_text())
    jsonschema.validate(results, json.loads((SCHEMAS / "gradescope.schema.json").read_text()))
    assert results["score"] == report["score"] == 20
    visibility = {t["name"].split(": ")[1]: t["visibility"] for t in results["tests"]}
    assert visibility["document.attention_scores"] == "visible"
    assert visibility["random.attention_scores"] == "after_published"


def test_stubs_score_zero_and_say_where_to_start(tmp_path):
    result, report = grade(REPO / "exercises", report=tmp_path / "report.json")
    assert report["score"] == 0 and report["max_score"] == 100
    for stage in report["stages"]:
        for c in stage["checks"]:
            assert c["status"] == "not_implemented" and c["hint"] == "not-implemented", c
            assert "is not implemented yet" in c["message"]
    assert "Next step" in result.stdout and "stage1_softmax.py" in result.stdout
    assert "attention_scores is not implemented yet" in result.stdout


def test_missing_stage_files_are_not_implemented_not_errors(tmp_path):
    folder = learner_copy(tmp_path / "submission", stages=[1, 3])
    _, report = grade(folder)
    assert stage_scores(report) == {1: 20, 2: 0, 3: 20, 4: 0, 5: 0}
    missing = [c for s in report["stages"] if s["id"] == "stage2" for c in s["checks"]]
    assert all(c["status"] == "not_implemented" for c in missing)
    assert "stage2_self_attention.py is missing" in missing[0]["message"]


def test_zip_and_folder_grade_identically(tmp_path):
    mutant = next(m for m in MUTANTS if m.get("hint") == "missing-out-proj")
    folder = learner_copy(tmp_path / "work", mutant)
    archive = tmp_path / "work.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in folder.iterdir():
            zipped.write(path, f"student/attention/{path.name}")  # files may sit in a sub-folder
        zipped.writestr("student/conftest.py", "raise SystemExit")
    _, from_folder = grade(folder)
    _, from_zip = grade(archive)
    ignored = [f for f in from_zip["flags"] if f.startswith("ignored")]
    assert ignored == ["ignored: student/conftest.py"]
    assert {k: v for k, v in from_zip.items() if k != "flags"} == {k: v for k, v in from_folder.items() if k != "flags"}
    assert from_folder["score"] < 100


def test_visible_only_is_provisional(tmp_path):
    folder = learner_copy(tmp_path / "submission", stages=[1])
    result, report = grade(folder, "--visible-only", "--stage", "1")
    assert "provisional" in report["flags"]
    assert {c["visibility"] for s in report["stages"] for c in s["checks"]} == {"visible"}
    assert (
        report["max_score"]
        == sum(c.points for c in planned_checks([1], points_in_use()) if c.visibility == "visible")
        > sum(v for k, v in points_in_use().table["stage1"].items() if k.startswith("document."))
    )
    assert "Provisional total (visible checks only)" in result.stdout


@pytest.mark.parametrize(
    "arguments", [["no/such/folder"], ["README.md"], ["exercises", "--stage", "9"], ["exercises", "--device", "tpu"]]
)
def test_grader_refuses_what_it_cannot_run_in_one_line(arguments):
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "grader", *arguments], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert result.stderr.strip() and "Traceback" not in result.stderr


CODE_HINTS = set(catalog()) - {"not-implemented", "forbidden-import"} - ABOUT_THE_REPORT  # tests/test_credit.py


def test_every_code_hint_is_true_of_some_mutant():
    assert CODE_HINTS - {hint for m in MUTANTS for hint in truthful(m)} == set()


def test_tampering_in_learner_code_changes_no_verdict(tmp_path):
    mutant = next(m for m in MUTANTS if m.get("hint") == "softmax-not-exponentiated")
    folder = learner_copy(tmp_path / "submission", mutant, stages=[1])
    stage1 = folder / "stage1_softmax.py"
    tamper = (
        "import torch, torch.testing\n"
        "torch.allclose = torch.equal = lambda *a, **k: True\n"
        "torch.testing.assert_close = lambda *a, **k: None\n"
        "print('Total: 100/100')\n"
    )
    stage1.write_text(tamper + stage1.read_text())
    result, report = grade(folder, "--stage", "1")
    assert report["score"] < 20
    assert "Total: 100/100" not in result.stdout
    assert "softmax-not-exponentiated" in {c["hint"] for s in report["stages"] for c in s["checks"]}


def test_terminal_report_reads_without_colour_and_colours_on_request(solutions_report):
    from grader.views.terminal import render_text

    _, report = solutions_report
    plain, coloured = render_text(report, "work", color=False), render_text(report, "work", color=True)
    assert "\033[" not in plain and "stage 5  multi-head attention" in plain and "Total: 100/100" in plain
    assert "\033[32m✓\033[0m" in coloured


def test_a_broken_check_module_is_reported_with_its_traceback(tmp_path):
    # A lane's session lists its failures a line each; the grader's own errors keep their detail.
    (tmp_path / "test_stage9.py").write_text("def test_broken(:\n    pass\n")
    exit_code, output = run_checks(GradingPlugin(None, "cpu", GradingOptions((1,), points_in_use())), str(tmp_path))
    assert exit_code == pytest.ExitCode.INTERRUPTED
    assert "SyntaxError" in output and "test_stage9.py" in output


class _FirstDraws:
    """Records each check's first draw from torch's global generator, then draws ``extra`` more: as checks
    before a student's, or an earlier student's in a batch lane, draw more or fewer."""

    def __init__(self, extra: int):
        self.extra, self.first = extra, {}

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_setup(self, item):
        self.first[item.nodeid] = torch.rand(1).item()
        torch.rand(self.extra)


class _NothingWritten:
    """A learner whose every function is a stub: each check ends at its first request."""

    def __init__(self):
        self.printed = PrintedOutput()

    def request(self, *args, **kwargs):
        raise LearnerFailure("not_implemented", "not written yet")


def test_each_check_draws_the_same_numbers_whatever_was_drawn_before_it():
    runs = []
    for extra in (1, 7):
        draws = _FirstDraws(extra)
        run_checks(GradingPlugin(_NothingWritten(), "cpu", GradingOptions((4,), points_in_use())), plugins=[draws])
        runs.append(draws.first)
    assert len(runs[0]) > 5 and runs[0] == runs[1]
    assert len(set(runs[0].values())) == len(runs[0])  # each check its own numbers


def test_a_check_whose_evidence_fails_keeps_its_verdict_and_says_the_picture_was_lost():
    from types import SimpleNamespace

    from grader.judge.plugin import EVIDENCE_FAULT, _classify, grader_faults
    from grader.judge.verdict import CheckFailed

    try:
        try:
            raise CheckFailed("3 of 6 values differ", "mask-not-causal")
        except CheckFailed:
            [][1]  # the picture's own bug, met while the verdict was in hand
    except IndexError as error:
        status, message, hint = _classify(SimpleNamespace(value=error))
    assert (status, hint) == ("failed", "mask-not-causal")
    assert message.startswith("3 of 6 values differ") and EVIDENCE_FAULT in message
    report = {"stages": [{"checks": [{"id": "x", "status": status, "message": message}]}]}
    assert grader_faults(report) == [f"x: {message}"]  # the tests still see it
    status, message, hint = _classify(SimpleNamespace(value=IndexError("no verdict")))
    assert status == "error" and hint is None  # a fault before any verdict is the grader's error, as before
