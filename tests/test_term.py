"""A term, as an instructor runs it on a Moodle class: an extension, a student who spends slip days, an
override, a late resubmission under keep = "best", a points change (re-priced, no code run), the class
report opened in a browser, Moodle's worksheet and feedback zip, and similarity against an earlier term.
Every number that ends in grades.csv and the exports is checked against the policy's arithmetic."""

import csv
import json
import zipfile
from pathlib import Path

import pytest

from grader.cli import class_report
from grader.cli import lms_export as lms_export_command
from grader.cli import similarity as similarity_command
from tests.grading import MUTANTS, batch, learner_copy
from tests.test_html_in_browser import CHROMEDRIVER, CHROMIUM, browser, opened  # noqa: F401 - a fixture
from tests.test_repricing import points_file
from tests.test_similarity import ADA, stubs_filled_in

SLIP = next(m for m in MUTANTS if m.get("hint") == "missing-scaling" and m["stage"] == 2)
STUDENTS = {  # participant number: full name
    "101": "Ada Ng",  # the solutions, on time
    "102": "Bo Li",  # the solutions, two days late under a three-day extension
    "103": "Cy Wu",  # the solutions, a day and a half late: two slip days
    "104": "Di Po",  # a mistake in stage 2, which the instructor overrides
    "105": "Ed Yu",  # a mistake on time, then right but three days late: best keeps the first
    "106": "Fy Ro",  # code of their own, which last term's zoe handed in too
}
DUE = "Friday, 14 March 2025, 11:59 PM"
TIMES = {
    "101": "Friday, 14 March 2025, 9:00 PM",
    "102": "Sunday, 16 March 2025, 10:00 PM",
    "103": "Sunday, 16 March 2025, 11:00 AM",
    "104": "Friday, 14 March 2025, 8:00 PM",
    "105": "Friday, 14 March 2025, 7:00 PM",
    "106": "Friday, 14 March 2025, 6:00 PM",
}
COLUMNS = ["Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade"]
COLUMNS += ["Grade can be changed", "Last modified (submission)", "Last modified (grade)", "Feedback comments"]


def folder_of(root: Path, number: str) -> Path:
    return root / f"{STUDENTS[number]}_{number}_assignsubmission_file_"


def worksheet(path: Path, times: dict[str, str]) -> Path:
    with path.open("w", newline="", encoding="utf-8-sig") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        for number, name in STUDENTS.items():
            writer.writerow([f"Participant {number}", name, f"{number}@example.edu", "Submitted for grading", "",
                             "100.00", "Yes", times[number], "-", ""])  # fmt: skip
    return path


def gradebook(out: Path) -> dict[str, dict[str, str]]:
    with open(out / "grades.csv", newline="") as handle:
        return {row["student_id"]: row for row in csv.DictReader(handle)}


@pytest.fixture(scope="module")
def term(tmp_path_factory):
    root = tmp_path_factory.mktemp("term")
    moodle, out = root / "moodle", root / "out"
    for number in ("101", "102", "103"):
        learner_copy(folder_of(moodle, number))
    learner_copy(folder_of(moodle, "104"), SLIP)
    learner_copy(folder_of(moodle, "105"), SLIP)
    stubs_filled_in(folder_of(moodle, "106"), ADA)
    course = root / "course.toml"
    course.write_text(
        "[due]\nassignment = 2025-03-14T23:59:00Z\n\n"
        '[late_penalty]\nper = "day"\npenalty = 20\nslip_days = 2\n\n'
        '[extensions]\n"102" = 2025-03-17T23:59:00Z\n\n[gradebook]\nkeep = "best"\n'
    )
    options = ["--layout", "moodle", "--course", str(course), "--times-zone", "UTC", "--workers", "2"]
    sheet = worksheet(root / "worksheet.csv", TIMES)
    batch(moodle, out, *options, "--times", str(sheet))
    first = gradebook(out)

    # the instructor sets Di's stage 2 by hand; Ed hands in again, right but three days late
    (out / "overrides.csv").write_text("student_id,stage,points,reason\n104,2,20,scaling checked by hand\n")
    learner_copy(folder_of(moodle, "105"))
    late = worksheet(root / "worksheet-2.csv", {**TIMES, "105": "Monday, 17 March 2025, 11:00 PM"})
    batch(moodle, out, *options, "--times", str(late))
    second = gradebook(out)

    points = points_file(root / "points.toml", **{"document.softmax_naive": 4})  # stage 1 now 22
    repriced = batch(moodle, out, *options, "--times", str(late), "--points", str(points))
    third = gradebook(out)
    return root, out, first, second, third, repriced.stderr


def automatic(out: Path, number: str, grading: int = -1) -> dict:
    """A student's automatic report: the latest, or their ``grading``-th from OUT/.grader/history (1 = the first)."""
    files = sorted((out / ".grader" / "history" / number).glob("*.json"))
    return json.loads(files[grading if grading < 0 else grading - 1].read_text())


def test_the_gradebook_follows_each_policy_and_rule(term):
    _, out, first, second, third, repriced = term
    row = lambda book, n, *cols: tuple(book[n][c] for c in cols)  # noqa: E731
    # on time, and Bo on time under the extension: 100
    assert row(first, "101", "final", "late_penalty", "slip_days_used") == ("100", "0", "0")
    assert row(first, "102", "final", "late_penalty", "due") == ("100", "0", "2025-03-17T23:59:00+00:00")
    # Cy: 1.5 days late, two slip days bring the due time past the hand-in: no penalty
    assert row(first, "103", "final", "late_penalty", "slip_days_used") == ("100", "0", "2")
    assert row(first, "103", "due") == ("2025-03-16T23:59:00+00:00",)
    di = automatic(out, "104")["score"]
    stage2 = next(s["score"] for s in automatic(out, "104")["stages"] if s["id"] == "stage2")
    assert di < 100 and row(first, "104", "final") == (f"{di:g}",)
    assert row(second, "104", "score", "final", "override") == (
        f"{di:g}",
        f"{di - stage2 + 20:g}",
        f"stage2 20 (automatic {stage2:g})",
    )
    # Ed: the first grading (on time, a mistake) beats the second (right, but 3 started days late, of which
    # the two slip days take two: -20 % of 100 = 80)
    ed_first = automatic(out, "105", 1)["score"]
    assert automatic(out, "105", 2)["score"] == 100 and ed_first > 80
    assert row(second, "105", "final", "kept", "slip_days_used") == (f"{ed_first:g}", "best of 2: grading 1", "0")
    # the points change re-priced everyone: no code ran, stage 1 is worth 22, overrides and best still apply
    assert "6 reports re-priced for the new points table, no code run again" in repriced
    assert "0 of 6 to grade" in repriced
    assert row(third, "101", "score", "max_score", "final") == ("102", "102", "102")
    assert row(third, "104", "final") == (f"{di - stage2 + 20 + 2:g}",)


def test_moodle_gets_the_grades_and_the_feedback_back(term, capsys):
    root, out, _, _, third, _ = term
    graded = root / "graded.csv"
    args = ["--grades", str(out / "grades.csv"), "--roster", str(root / "worksheet-2.csv")]
    assert lms_export_command.main(["moodle-worksheet", *args, "--out", str(graded)]) == 0
    with graded.open(newline="", encoding="utf-8") as handle:
        rows = {row["Identifier"]: row for row in csv.DictReader(handle)}
    for number, row in third.items():  # the final, out of 102, as the worksheet's 100
        assert rows[f"Participant {number}"]["Grade"] == f"{float(row['final']) / 102 * 100:.2f}".rstrip("0").rstrip(
            "."
        )
        assert rows[f"Participant {number}"]["Feedback comments"].startswith("<pre>")
    feedback = root / "feedback.zip"
    assert lms_export_command.main(["moodle-feedback", *args, "--out", str(feedback)]) == 0
    with zipfile.ZipFile(feedback) as archive:
        folders = {name.split("/")[0] for name in archive.namelist()}
    assert folders == {f"{name}_{number}_assignfeedback_file" for number, name in STUDENTS.items()}
    capsys.readouterr()


def test_similarity_against_last_term_and_the_class_report_in_a_browser(term, capsys, browser):  # noqa: F811
    root, out, *_ = term
    last_term = root / "last-term"
    stubs_filled_in(last_term / "zoe", ADA)
    assert similarity_command.main([str(root / "moodle"), "--out", str(out), "--prior", str(last_term)]) == 0
    with open(out / "similarity.csv", newline="") as handle:
        pairs = {(row["student_a"], row["student_b"]) for row in csv.DictReader(handle)}
    assert pairs == {("106", "prior 1: zoe")}  # the book's code and one-line slips make no pair
    assert class_report.main([str(out)]) == 0
    page = (out / "class-report.html").read_text()
    assert "prior 1: zoe" in page and "scaling checked by hand" in page
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("Debian's chromium and chromium-driver are not installed")
    view = opened(browser, out / "class-report.html", 1200, 900)
    assert [entry for entry in view.get_log("browser") if entry["level"] == "SEVERE"] == []
    assert view.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
    capsys.readouterr()
