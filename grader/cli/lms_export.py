"""python -m grader.cli.lms_export FORMAT --grades OUT/grades.csv --roster ROSTER.csv --out FILE
                               [--assignment NAME] [--points-possible N] [--identifier COLUMN]

Turns the class's grades.csv (and the feedback beside it, OUT/students/<id>.txt) into what an LMS imports:
canvas (Canvas's gradebook CSV), moodle (a CSV for Moodle's grade import), moodle-worksheet
(Moodle's own grading worksheet, given as --roster, with Grade and Feedback comments filled in),
moodle-feedback (a zip for Moodle's "Upload multiple feedback files in a zip"), canvas-comments
(a CSV of user_id and comment, for Canvas's submissions API). Students are found through a
roster, a CSV with the column `student_id` (the id in grades.csv) and the LMS's own columns for
them; Moodle's grading worksheet is a roster as it is (its Identifier, "Participant 101", gives
the participant number the batch names students by):

  canvas  Student, ID, SIS User ID, SIS Login ID, Section: the columns of Canvas's own gradebook
          export, of which Canvas matches a student by ID, else SIS User ID, else SIS Login ID.
          A Canvas gradebook export is a roster as it is: without a student_id column, its ID
          column (the Canvas user id a Canvas download names students by) is used.
  moodle  the column named by --identifier (default "Email address"), which the import's
          "Map from" is set to, with "Map to" the matching user field (email address,
          username, ID number or user id).

A roster student without a grade is written with a blank grade, never 0 (a blank cell is
"no grade" to both importers), and named on stderr; a graded student missing from the roster is
named on stderr, as is a roster row neither LMS could match. Formats, as the LMSs' own code reads them:
canvas-lms app/models/gradebook_importer.rb (header row, "Points Possible" row, students matched
by ID, SIS User ID, SIS Login ID, blank or "-" grades leave a grade unchanged) and
lib/gradebook_exporter.rb (the columns and their order, no byte order mark by default); Moodle
grade/import/csv/classes/load_data.php (a row whose user cannot be mapped aborts the whole
import; "" or "-" is no grade) and lib/csvlib.class.php (UTF-8, a byte order mark is dropped,
every row has the header's number of cells).
"""

import argparse
import csv
import sys
from pathlib import Path

from grader.classroom.lms_export import (
    ROSTER_ID,
    as_in_grades,
    canvas_comments_csv,
    canvas_csv,
    common_max_points,
    moodle_csv,
    moodle_feedback_zip,
    moodle_worksheet_csv,
    read_grades,
    read_roster,
)
from grader.classroom.out_folder import student_file
from grader.classroom.outputs import migrate_layout
from grader.core.output_files import write_atomic
from grader.runner.escaping import printable

FORMATS = ["canvas", "moodle", "moodle-worksheet", "moodle-feedback", "canvas-comments"]
FEEDBACK_FILE = "feedback.txt"  # its name in each participant's folder of the Moodle zip


def feedback_texts(grades: Path, ids: set[str]) -> dict[str, str]:
    """The feedback each student reads (OUT/students/<id>.txt beside grades.csv), for the ids graded."""
    texts = {}
    for student_id in ids:
        path = student_file(grades.parent, student_id, ".txt")
        if path.is_file():
            texts[student_id] = path.read_text(encoding="utf-8")
    return texts


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m grader.cli.lms_export",
        description=__doc__.split("\n\n")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("lms", choices=FORMATS, metavar="FORMAT", help=", ".join(FORMATS))
    parser.add_argument("--grades", type=Path, required=True, help="the grades.csv of `grader batch`")
    parser.add_argument("--roster", type=Path, required=True, help=f"a CSV with {ROSTER_ID} and the LMS's columns")
    parser.add_argument("--out", type=Path, required=True, help="the file to import")
    parser.add_argument(
        "--assignment",
        default="Attention exercises",
        help="the grade column's header: on Canvas, the assignment as its export names it, "
        '"Name (assignment id)", or a new assignment; on Moodle, a grade item to map it to',
    )
    parser.add_argument(
        "--points-possible",
        type=float,
        metavar="N",
        help="the assignment's points in the LMS: scores are scaled from grades.csv's max_score "
        "to N (default: max_score, unscaled)",
    )
    parser.add_argument(
        "--identifier", default="Email address", help="moodle: the roster column that identifies a student to Moodle"
    )
    args = parser.parse_args(argv)
    if args.points_possible is not None and args.points_possible <= 0:
        parser.error("--points-possible must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    try:
        for line in migrate_layout(args.grades.parent):  # an OUT of an earlier version, once
            print(f"lms_export: {line}", file=sys.stderr)
        grades = read_grades(args.grades)
        columns, roster = read_roster(args.roster)
        feedback = feedback_texts(args.grades, set(grades))
        data: str | bytes
        if args.lms == "moodle-worksheet":
            data, exported = moodle_worksheet_csv(columns, roster, grades, feedback)
        elif args.lms == "moodle-feedback":
            data, exported = moodle_feedback_zip(roster, feedback, FEEDBACK_FILE)
        elif args.lms == "canvas-comments":
            data, exported = canvas_comments_csv(roster, feedback)
        elif args.lms == "canvas":
            points_possible = args.points_possible or common_max_points(grades)
            data, exported = canvas_csv(columns, roster, grades, args.assignment, points_possible)
        else:
            points_possible = args.points_possible or common_max_points(grades)
            data, exported = moodle_csv(columns, roster, grades, args.assignment, points_possible, args.identifier)
    except (OSError, UnicodeDecodeError, csv.Error, ValueError) as error:
        print(f"lms_export: {printable(str(error), keep_newlines=False)}", file=sys.stderr)
        return 2
    graded_not_in_roster = sorted(set(grades) - {as_in_grades(student) for student in roster})
    for student_id in graded_not_in_roster:
        print(
            f"lms_export: {printable(student_id, keep_newlines=False)} is in {args.grades} but not in the roster: "
            "not exported",
            file=sys.stderr,
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        args.out.write_bytes(data)
    else:
        write_atomic(args.out, data)
    what = "grade(s)" if args.lms in ("canvas", "moodle", "moodle-worksheet") else "feedback file(s)"
    print(
        f"lms_export: {exported} {what} of {len(roster)} roster student(s) in {args.out}"
        + (f"; {len(graded_not_in_roster)} graded student(s) not in the roster" if graded_not_in_roster else ""),
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
