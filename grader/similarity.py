"""python -m grader.similarity SUBMISSIONS --out OUT [--threshold T] [--boilerplate DIR ...]

Compares every two students' stage files with copydetect (winnowed fingerprints of the
tokenised code, names reduced to their kind, so renaming variables hides nothing) and writes
OUT/similarity.html, copydetect's report with the shared code highlighted, and
OUT/similarity.csv, the pairs of files above the threshold. Code that every learner was given
or shown is boilerplate and never counts: the stubs in exercises/, the reference in
solutions/ (the book's listings) and the code blocks of docs/stage*.md, plus any --boilerplate
folder. Only what the grader grades is compared: each student's stage files as staging reads
them, never the rest of a submission.

A high similarity is a reason to read two submissions side by side, not a verdict.
"""

import argparse
import contextlib
import csv
import html
import io
import re
import sys
import tempfile
from pathlib import Path

from grader.output_files import inert, write_atomic
from grader.intake import Student, list_students
from grader.runner.text import printable
from grader.submission import SubmissionError, stage_submission

REPO = Path(__file__).resolve().parents[1]
CSV_COLUMNS = ["student_a", "student_b", "file", "similarity_a", "similarity_b", "tokens_overlap"]
REPORT_NAME = "similarity.html"
CSV_NAME = "similarity.csv"
# A fenced block of a guide, as the learners read it (CommonMark: ``` or ~~~, an info string after).
FENCED_PYTHON = re.compile(r"^(?P<fence>```|~~~)[ \t]*(?:python|py)[^\n]*\n(?P<code>.*?)^(?P=fence)[ \t]*$",
                           re.MULTILINE | re.DOTALL)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m grader.similarity", description=__doc__.split("\n\n")[1],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("submissions", type=Path, help="the class folder, as `grader batch` takes it")
    parser.add_argument("--out", type=Path, required=True, help=f"where {REPORT_NAME} and {CSV_NAME} go")
    parser.add_argument("--threshold", type=float, default=0.5,
                        help="list a pair of files when either one shares more than this fraction of its "
                             "own (non-boilerplate) code with the other, 0 to 1")
    parser.add_argument("--boilerplate", type=Path, action="append", default=[], metavar="DIR",
                        help="a folder of more .py code everyone was given (repeatable)")
    parser.add_argument("--noise-threshold", type=int, default=25,
                        help="shortest run of matching tokenised characters that counts (copydetect's noise_t)")
    parser.add_argument("--guarantee-threshold", type=int, default=25,
                        help="a run this long is always found (copydetect's guarantee_t; at least the noise "
                             "threshold; larger is faster and misses more)")
    args = parser.parse_args(argv)
    if not 0 <= args.threshold <= 1:
        parser.error("--threshold is a fraction between 0 and 1")
    if args.guarantee_threshold < args.noise_threshold:
        parser.error("--guarantee-threshold must be at least --noise-threshold")
    for folder in args.boilerplate:
        if not folder.is_dir():
            parser.error(f"--boilerplate {folder} is not a folder")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    try:
        from copydetect import CopyDetector
    except ImportError:
        print("similarity: copydetect is not installed; `make similarity` installs it "
              "(or pip install -e '.[similarity]')", file=sys.stderr)
        return 2
    try:
        students, skipped = list_students(args.submissions)
    except ValueError as error:
        print(f"similarity: {error}", file=sys.stderr)
        return 2
    for name, why in skipped:
        print(f"similarity: skipped {printable(name, keep_newlines=False)} ({why})", file=sys.stderr)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="similarity-") as scratch:
        class_folder, book_folder = Path(scratch, "class"), Path(scratch, "book")
        student_of, files = write_stage_files(students, class_folder)
        write_book_code(REPO / "docs", book_folder)
        if len(student_of) < 2:
            print(f"similarity: {len(student_of)} student(s) with stage files: nothing to compare", file=sys.stderr)
            write_atomic(args.out / CSV_NAME, pairs_csv([]))
            return 0
        boilerplate = [str(folder.resolve()) for folder in [REPO / "exercises", REPO / "solutions", *args.boilerplate]]
        report_path = str((args.out / REPORT_NAME).resolve())  # only named in the report's settings
        # Paths relative to the class folder name the students in the report: "alice/stage1_softmax.py".
        with contextlib.chdir(class_folder):
            detector = CopyDetector(
                boilerplate_dirs=boilerplate, extensions=["py"], noise_t=args.noise_threshold,
                guarantee_t=args.guarantee_threshold, display_t=args.threshold, same_name_only=True,
                ignore_leaf=True, autoopen=False, silent=True, out_file=report_path)
            for path in sorted(book_folder.iterdir()):  # added as files: the report names no temporary folder
                detector.add_file(str(path), type="boilerplate")
            for path in files:  # in a fixed order: copydetect lists the files it finds in a set's order
                detector.add_file(path)
            detector.run()
            rows = pair_rows(detector.get_copied_code_list(), student_of)
            report = detector.generate_html_report(output_mode="return")
    write_atomic(args.out / REPORT_NAME, report)
    write_atomic(args.out / CSV_NAME, pairs_csv(rows))
    print(f"similarity: {len(student_of)} students compared; "
          f"{len({(row[0], row[1]) for row in rows})} pair(s) above {args.threshold:g} in {args.out / CSV_NAME} "
          f"(one row per file); the shared code highlighted in {args.out / REPORT_NAME}", file=sys.stderr)
    return 0


def write_stage_files(students: list[Student], folder: Path) -> tuple[dict[str, str], list[str]]:
    """Each student's stage files, as staging reads them, in a folder of ``folder`` named after them;
    the student id by folder name, and the files' paths relative to ``folder``, sorted. A student with
    nothing to compare costs one line on stderr.

    The folder's name is the id HTML-escaped: copydetect's report shows file paths in places
    without escaping them, and an id comes from a name a student may have chosen."""
    student_of, files = {}, []
    for student in students:
        try:
            staged = stage_submission(student.source)
        except SubmissionError as error:
            print(f"similarity: skipped {student.id} (unreadable: {error})", file=sys.stderr)
            continue
        if staged.problem or not staged.files:
            print(f"similarity: skipped {student.id} ({staged.problem or 'no stage files'})", file=sys.stderr)
            continue
        escaped = html.escape(student.id)  # one to one: every & is escaped too
        (folder / escaped).mkdir(parents=True)
        for name, data in staged.files.items():
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                print(f"similarity: left out {student.id}/{name} (not UTF-8 text)", file=sys.stderr)
                continue
            (folder / escaped / name).write_text(text, encoding="utf-8")
            student_of[escaped] = student.id
            files.append(f"{escaped}/{name}")
    return student_of, sorted(files)


def write_book_code(docs: Path, folder: Path) -> None:
    """The Python code blocks of the guides, one .py file each in ``folder``."""
    folder.mkdir(parents=True)
    for guide in sorted(docs.glob("stage*.md")):
        for number, block in enumerate(FENCED_PYTHON.finditer(guide.read_text(encoding="utf-8")), start=1):
            (folder / f"{guide.stem}_block{number}.py").write_text(block["code"], encoding="utf-8")


def pairs_csv(rows: list[list]) -> str:
    """similarity.csv: the header, then ``rows`` with any text a spreadsheet would run quoted."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    writer.writerows(inert(row) for row in rows)
    return buffer.getvalue()


def pair_rows(pairs: list[list], student_of: dict[str, str]) -> list[list]:
    """copydetect's [test share, reference share, test path, reference path, ..., overlap] entries as
    [student a, student b, file, a's share, b's share, overlap], a before b; the most similar first, then
    by id, so the same pairs give the same rows. ``student_of``: the id of each student's folder."""
    rows = []
    for test_share, reference_share, test_path, reference_path, *_, overlap in pairs:
        (a, a_share), (b, b_share) = sorted([(student_of[Path(test_path).parent.name], test_share),
                                             (student_of[Path(reference_path).parent.name], reference_share)])
        rows.append([a, b, Path(test_path).name, round(float(a_share), 4), round(float(b_share), 4), int(overlap)])
    return sorted(rows, key=lambda row: (-max(row[3], row[4]), row[0], row[1], row[2]))


if __name__ == "__main__":
    sys.exit(main())
