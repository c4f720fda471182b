"""python -m grader.cli.similarity SUBMISSIONS --out OUT [--threshold T] [--min-tokens N] [--prior FOLDER ...]

Compares every two students' stage files with copydetect (winnowed fingerprints of the
tokenised code, names reduced to their kind, so renaming variables hides nothing) and writes
OUT/similarity.html, copydetect's report with the shared code highlighted, and
OUT/similarity.csv, the pairs of files above the threshold. Code that every learner was given
or shown is boilerplate and never counts: the stubs in exercises/, the reference in
solutions/ (the book's listings) and the code blocks of docs/stage*.md, plus any --boilerplate
folder. Only what the grader grades is compared: each student's stage files as intake reads
them, never the rest of a submission.

A high similarity is a reason to read two submissions side by side, not a verdict.
"""

import argparse
import contextlib
import sys
import tempfile
from pathlib import Path

from grader.classroom import similarity
from grader.classroom.names import read_names
from grader.classroom.similarity import (
    CSV_NAME,
    REPORT_NAME,
    offline_report,
    pair_rows,
    pairs_csv,
    write_book_code,
    write_stage_files,
)
from grader.core.output_files import write_atomic
from grader.intake.layouts import list_students
from grader.runner.escaping import printable


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m grader.cli.similarity",
        description=__doc__.split("\n\n")[1],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("submissions", type=Path, help="the class folder, as `grader batch` takes it")
    parser.add_argument("--out", type=Path, required=True, help=f"where {REPORT_NAME} and {CSV_NAME} go")
    parser.add_argument(
        "--threshold",
        type=float,
        default=0.5,
        help="list a pair of files when either one shares more than this fraction of its "
        "own (non-boilerplate) code with the other, 0 to 1",
    )
    parser.add_argument(
        "--boilerplate",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="a folder of more .py code everyone was given (repeatable)",
    )
    parser.add_argument(
        "--min-tokens",
        type=int,
        default=80,
        help="list a pair of files only when they share at least this many tokens: the same one-line slip "
        "on top of the book's code shares 30 to 50, which is no sign of copying",
    )
    parser.add_argument(
        "--prior",
        type=Path,
        action="append",
        default=[],
        metavar="FOLDER",
        help="an earlier term's class folder (repeatable): this term's students are compared with its "
        "students too, listed as 'prior N: id'; its students are not compared with each other",
    )
    parser.add_argument(
        "--noise-threshold",
        type=int,
        default=25,
        help="shortest run of matching tokenised characters that counts (copydetect's noise_t)",
    )
    parser.add_argument(
        "--guarantee-threshold",
        type=int,
        default=25,
        help="a run this long is always found (copydetect's guarantee_t; at least the noise "
        "threshold; larger is faster and misses more)",
    )
    args = parser.parse_args(argv)
    if not 0 <= args.threshold <= 1:
        parser.error("--threshold is a fraction between 0 and 1")
    if args.guarantee_threshold < args.noise_threshold:
        parser.error("--guarantee-threshold must be at least --noise-threshold")
    for option, folders in (("--boilerplate", args.boilerplate), ("--prior", args.prior)):
        for folder in folders:
            if not folder.is_dir():
                parser.error(f"{option} {folder} is not a folder")
    if args.min_tokens < 0:
        parser.error("--min-tokens is a number of tokens, 0 or more")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    try:
        from copydetect import CopyDetector
    except ImportError:
        print(
            "similarity: copydetect is not installed; `make similarity` installs it "
            "(or pip install -e '.[similarity]')",
            file=sys.stderr,
        )
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
        ours = len(student_of)
        earlier: list[str] = []  # an earlier term's files: compared with this term's, not with each other
        for number, folder in enumerate(args.prior, start=1):
            try:
                prior_students, _ = list_students(folder)
            except ValueError as error:
                print(f"similarity: --prior {folder}: {error}", file=sys.stderr)
                return 2
            their_folders, their_files = write_stage_files(prior_students, class_folder, f"prior {number}")
            student_of.update(their_folders)
            earlier += their_files
        write_book_code(similarity.REPO / "docs", book_folder)
        if ours == 0 or (ours < 2 and not earlier):
            print(f"similarity: {ours} student(s) with stage files: nothing to compare", file=sys.stderr)
            write_atomic(args.out / CSV_NAME, pairs_csv([]))
            return 0
        boilerplate = [
            str(folder.resolve())
            for folder in [similarity.REPO / "exercises", similarity.REPO / "solutions", *args.boilerplate]
        ]
        report_path = str((args.out / REPORT_NAME).resolve())  # only named in the report's settings
        # Paths relative to the class folder name the students in the report: "alice/stage1_softmax.py".
        with contextlib.chdir(class_folder):
            detector = CopyDetector(
                boilerplate_dirs=boilerplate,
                extensions=["py"],
                noise_t=args.noise_threshold,
                guarantee_t=args.guarantee_threshold,
                display_t=args.threshold,
                same_name_only=True,
                ignore_leaf=True,
                autoopen=False,
                silent=True,
                out_file=report_path,
            )
            for path in sorted(book_folder.iterdir()):  # added as files: the report names no temporary folder
                detector.add_file(str(path), type="boilerplate")
            for path in files:  # in a fixed order: copydetect lists the files it finds in a set's order
                detector.add_file(path)
            for path in sorted(earlier):
                detector.add_file(path, type="ref")
            detector.run()
            rows = pair_rows(detector.get_copied_code_list(), student_of, args.min_tokens)
            report = detector.generate_html_report(output_mode="return")
    write_atomic(args.out / REPORT_NAME, offline_report(report))
    write_atomic(args.out / CSV_NAME, pairs_csv(rows, read_names(args.out)))
    print(
        f"similarity: {ours} students compared{f' (and {len(args.prior)} earlier term(s))' if args.prior else ''}; "
        f"{len({(row[0], row[1]) for row in rows})} pair(s) above {args.threshold:g} sharing at least "
        f"{args.min_tokens} tokens in {args.out / CSV_NAME} "
        f"(one row per file); the shared code highlighted in {args.out / REPORT_NAME}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
