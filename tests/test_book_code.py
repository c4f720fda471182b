"""The book's own code, pasted into the stages' functions as a learner would (tests/book/), earns full marks;
what the grader knows beyond the book comes back as notes, which cost nothing unless a course prices them."""

import shutil

import pytest

from grader.core.stages import is_note
from tests.grading import REPO, grade, stage_scores

BOOK = REPO / "tests" / "book"
# The notes the chapter's code gets, each for a reason the chapter's own text shows: its exercise 3.1 answer
# assigns new parameters that view v2's memory and never mentions a bias; section 3.5.1 makes its masks with
# torch.ones inside the functions, on one (n, n) matrix.
BOOK_NOTES = {
    ("stage1", "note.fixed_device"),
    ("stage1", "note.fixed_dtype"),  # its loops sum into torch.zeros(query.shape): float32 whatever the inputs
    ("stage3", "note.in_place"),
    ("stage3", "note.bias_refused"),
    ("stage4", "note.fixed_device"),
    ("stage4", "note.batched"),
}


@pytest.fixture(scope="module")
def book_report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("book") / "submission"
    shutil.copytree(BOOK, folder)
    return grade(folder)


def test_the_books_code_scores_full_marks(book_report):
    result, report = book_report
    assert report["score"] == report["max_score"] == 100, result.stdout
    assert set(stage_scores(report).values()) == {20}


def test_the_books_code_gets_exactly_its_notes_and_no_failure(book_report):
    result, report = book_report
    failed = {(s["id"], c["id"]) for s in report["stages"] for c in s["checks"] if c["status"] != "passed"}
    assert failed == BOOK_NOTES
    assert all(is_note(check) for _, check in failed)
    assert "What to fix" not in result.stdout
    assert (
        "Notes (marked i above: advice beyond the book, no points unless your instructor counts them)" in result.stdout
    )
    for hint in ("shares-memory", "bias-dropped", "fixed-device", "fixed-dtype", "batched-inputs"):
        assert f"hint [{hint}]" in result.stdout


def test_the_html_page_shows_the_notes_apart_and_nothing_to_fix(book_report):
    result, report = book_report
    from grader.views.html import render_html

    page = render_html(report, "book", REPO / "grade-report.html")
    assert "What to fix" not in page and "<h2>Notes (marked i above: advice beyond the book" in page
    assert page.count("<section class='cause note'>") == len(BOOK_NOTES)
    assert page.count("<span class='note'") == len(BOOK_NOTES) and "<span class='failed'" not in page


def test_the_books_code_scores_full_visible_marks(tmp_path):
    folder = tmp_path / "submission"
    shutil.copytree(BOOK, folder)
    _, report = grade(folder, "--visible-only")
    assert report["score"] == report["max_score"] > 0


def test_a_course_that_prices_a_note_charges_it_and_says_so(tmp_path):
    folder = tmp_path / "submission"
    shutil.copytree(BOOK, folder)
    course = tmp_path / "course.toml"
    course.write_text('[notes]\n"stage3.in_place" = 2\n"stage4.fixed_device" = 1\n')
    result, report = grade(folder, "--course", str(course))
    scores = {s["id"]: (s["score"], s["max_score"]) for s in report["stages"]}
    assert scores["stage3"] == (20, 22) and scores["stage4"] == (20, 21) and scores["stage5"] == (20, 20)
    assert "3 points your instructor counts" in result.stdout
    assert "stage 3 · note.in_place: 0/2" in result.stdout


def test_a_note_is_priced_by_its_short_name_or_its_check_id():
    from grader.core.course import note_prices

    for key in ("stage3.in_place", "stage3.note.in_place"):
        assert note_prices({"notes": {key: 2}}) == {"stage3": {"note.in_place": 2}}


@pytest.mark.parametrize(
    "line, words",
    [
        ('"stage3.inplace" = 2', "notes.stage3.inplace is no note"),
        ('"stage3.in_place" = "two"', "is not a number of points"),
        ('"stage3.in_place" = -1', "is not a number of points"),
    ],
)
def test_a_wrong_note_price_is_refused_in_one_line(tmp_path, line, words):
    from tests.grading import grade_run

    course = tmp_path / "course.toml"
    course.write_text(f"[notes]\n{line}\n")
    result = grade_run(BOOK, "--course", str(course))
    assert result.returncode == 2 and words in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_what_is_built_for_students_carries_the_courses_note_prices():
    import tomllib

    from grader.core.course import course_text, note_prices

    prices = {"stage3": {"note.in_place": 2}, "stage4": {"note.fixed_device": 1.5}}
    written = tomllib.loads(course_text([1, 2, 3, 4, 5], prices))
    assert note_prices(written) == prices and written["stages"] == {"bonus": False}
    assert "notes" not in tomllib.loads(course_text([1, 2, 3, 4, 5]))
