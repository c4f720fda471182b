"""python -m grader.cli.class_report OUT

Writes OUT/class-report.html for the class graded into OUT (`grader batch ... --out OUT`): each stage's
score distribution, the checks failed most and the hints shown most (with the students, each linked to
the feedback they read), late and missing hand-ins, overrides, and the similar pairs of
OUT/similarity.csv when `make similarity` has written one there (with a link to its similarity.html). It is
headed by the course's title ([course] title in the course file), else the folder's name. One self-contained
page: no script, nothing fetched, plots drawn inline; it names students, so keep it with the instructors.
"""

import argparse
import sys
from pathlib import Path

from grader.classroom.class_page import class_page
from grader.classroom.class_summary import summarise
from grader.classroom.outputs import CLASS_PAGE, migrate_layout
from grader.classroom.similarity import REPORT_NAME as SIMILARITY_PAGE
from grader.core.course import CourseError, course_title, read_course
from grader.core.output_files import write_atomic

PAGE = CLASS_PAGE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.cli.class_report", description=__doc__.split("\n\n")[1])
    parser.add_argument("out", type=Path, help="the folder a batch graded the class into")
    parser.add_argument(
        "--course", type=Path, help="the course settings, for its [course] title (default: course.toml beside grader/)"
    )
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        for line in migrate_layout(args.out):  # an OUT of an earlier version: its files into their folders, once
            print(f"class_report: {line}", file=sys.stderr)
        summary = summarise(args.out)
        title = course_title(read_course(args.course), args.course) or args.out.resolve().name
    except (OSError, ValueError, CourseError) as error:
        print(f"class_report: {error}", file=sys.stderr)
        return 2
    write_atomic(args.out / PAGE, class_page(summary, title, (args.out / SIMILARITY_PAGE).is_file()))
    print(
        f"class_report: {len(summary.students)} students, {len(summary.graded)} graded: {args.out / PAGE}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
