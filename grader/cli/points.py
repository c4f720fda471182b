"""python -m grader.cli.points [--course course.toml] [--points FILE] > my-points.toml: the points in force
(the registry's, the course's note prices, a points file's stages) as a points file, to edit and give to the
batch with --points FILE (or grade-all GRADE_ARGS='--points FILE')."""

import argparse
import sys
from pathlib import Path

from grader.core.course import CourseError, note_prices, read_course
from grader.core.points import points_file_text, points_in_use


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.cli.points", description=__doc__)
    parser.add_argument("--course", type=Path, help="course.toml: its [notes] prices are written as in force")
    parser.add_argument("--points", type=Path, help="a points file whose stages replace the registry's")
    args = parser.parse_args(argv)
    try:
        points = points_in_use(note_prices(read_course(args.course), args.course), args.points)
    except (CourseError, ValueError, OSError) as error:
        print(f"grader.cli.points: {error}", file=sys.stderr)
        return 2
    for line in points.changes:
        print(f"grader.cli.points: {line}", file=sys.stderr)
    sys.stdout.write(points_file_text({stage: dict(checks) for stage, checks in points.table.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
