"""Pairs of students whose stage files are alike, found with copydetect, boilerplate left out
(python -m grader.cli.similarity; its help says what is compared)."""

import csv
import html
import io
import re
import sys
from pathlib import Path

from grader.core.output_files import inert
from grader.intake.students import Student
from grader.intake.submission import SubmissionError, read_submission

REPO = Path(__file__).resolve().parents[2]
CSV_COLUMNS = ["student_a", "student_b", "file", "similarity_a", "similarity_b", "tokens_overlap"]
NAME_COLUMNS = ["name_a", "name_b"]  # where the students are named (not under anonymous grading)
REPORT_NAME = "similarity.html"
CSV_NAME = "similarity.csv"
# A fenced block of a guide, as the learners read it (CommonMark: ``` or ~~~, an info string after).
FENCED_PYTHON = re.compile(
    r"^(?P<fence>```|~~~)[ \t]*(?:python|py)[^\n]*\n(?P<code>.*?)^(?P=fence)[ \t]*$", re.MULTILINE | re.DOTALL
)


def write_stage_files(students: list[Student], folder: Path, term: str = "") -> tuple[dict[str, str], list[str]]:
    """Each student's stage files, as intake reads them, in a folder of ``folder`` named after them;
    the student id by folder name, and the files' paths relative to ``folder``, sorted. A student with
    nothing to compare costs one line on stderr. ``term``: an earlier term's label ("prior 1"), which
    starts their folder's name and their id as the pairs show it ("prior 1: ada").

    The folder's name is the id HTML-escaped: copydetect's report shows file paths in places
    without escaping them, and an id comes from a name a student may have chosen."""
    student_of, files = {}, []
    for student in students:
        try:
            staged = read_submission(student.source)
        except SubmissionError as error:
            print(f"similarity: skipped {student.id} (unreadable: {error})", file=sys.stderr)
            continue
        if staged.problem or not staged.files:
            print(f"similarity: skipped {student.id} ({staged.problem or 'no stage files'})", file=sys.stderr)
            continue
        escaped = html.escape(f"{term}: {student.id}" if term else student.id)  # one to one: every & is escaped
        (folder / escaped).mkdir(parents=True)
        for name, data in staged.files.items():
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                print(f"similarity: left out {student.id}/{name} (not UTF-8 text)", file=sys.stderr)
                continue
            (folder / escaped / name).write_text(text, encoding="utf-8")
            student_of[escaped] = f"{term}: {student.id}" if term else student.id
            files.append(f"{escaped}/{name}")
    return student_of, sorted(files)


def write_book_code(docs: Path, folder: Path) -> None:
    """The Python code blocks of the guides, one .py file each in ``folder``."""
    folder.mkdir(parents=True)
    for guide in sorted(docs.glob("stage*.md")):
        for number, block in enumerate(FENCED_PYTHON.finditer(guide.read_text(encoding="utf-8")), start=1):
            (folder / f"{guide.stem}_block{number}.py").write_text(block["code"], encoding="utf-8")


# copydetect's report fetches Bootstrap from a CDN, for its table styles and its collapsible lists: a page of
# students' code then loads a third party's files, and shows unstyled, every list open, where there is no network.
# In their place, the little it uses, written here: the page needs nothing but itself.
CDN_TAG = re.compile(r"<(link|script)[^>]*https://cdn\.jsdelivr\.net/[^>]*>(\s*</script>)?")
OFFLINE_STYLE = """<style>
  body { font-family: system-ui, sans-serif; margin: 0 1em; }
  .collapse:not(.show) { display: none; }
  .btn { border: 1px solid #888; border-radius: 4px; background: #eee; padding: 0.2em 0.6em; cursor: pointer; }
  .table { border-collapse: collapse; width: 100%; }
  .table td, .table th { border-top: 1px solid #ddd; padding: 0.25em 0.5em; vertical-align: top; }
  .table-striped tr:nth-child(odd) { background: #f6f6f6; }
  .row { display: flex; flex-wrap: wrap; }
  .col { flex: 1; }
  pre { white-space: pre-wrap; overflow-x: auto; }
</style>"""
OFFLINE_SCRIPT = """<script>
  document.querySelectorAll('[data-bs-toggle="collapse"]').forEach(function (button) {
    button.addEventListener('click', function () {
      var target = document.querySelector(button.getAttribute('data-bs-target'));
      var shown = target.classList.toggle('show');
      button.setAttribute('aria-expanded', shown ? 'true' : 'false');
    });
  });
</script>"""


def offline_report(page: str) -> str:
    """copydetect's HTML report with no file fetched from elsewhere: its CDN tags out, a few styles and the
    collapsible lists' toggle in."""
    page = CDN_TAG.sub("", page)
    return page.replace("</head>", f"{OFFLINE_STYLE}\n</head>", 1).replace("</body>", f"{OFFLINE_SCRIPT}\n</body>", 1)


def pairs_csv(rows: list[list], names: dict[str, str] | None = None) -> str:
    """similarity.csv: the header, then ``rows`` with any text a spreadsheet would run quoted; with ``names``
    (OUT/.grader/names.csv, grader/classroom/names.py: none under anonymous grading), each student's name at the end."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS + (NAME_COLUMNS if names else []))
    for row in rows:
        writer.writerow(inert(row + ([names.get(row[0], ""), names.get(row[1], "")] if names else [])))
    return buffer.getvalue()


def pair_rows(pairs: list[list], student_of: dict[str, str], min_tokens: int = 0) -> list[list]:
    """copydetect's [test share, reference share, test path, reference path, ..., overlap] entries as
    [student a, student b, file, a's share, b's share, overlap], a before b; the most similar first, then
    by id, so the same pairs give the same rows. ``student_of``: the id of each student's folder. A pair
    sharing fewer than ``min_tokens`` tokens is left out: two students who make the same small change to
    the book's code share a line, which any share of a short file makes look like copying."""
    rows = []
    for test_share, reference_share, test_path, reference_path, *_, overlap in pairs:
        if int(overlap) < min_tokens:
            continue
        (a, a_share), (b, b_share) = sorted(
            [
                (student_of[Path(test_path).parent.name], test_share),
                (student_of[Path(reference_path).parent.name], reference_share),
            ]
        )
        rows.append([a, b, Path(test_path).name, round(float(a_share), 4), round(float(b_share), 4), int(overlap)])
    return sorted(rows, key=lambda row: (-max(row[3], row[4]), row[0], row[1], row[2]))
