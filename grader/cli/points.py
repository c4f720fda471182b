"""python -m grader.cli.points > my-points.toml: the registry's points as a points file, to edit and give
to grade-all with GRADE_ARGS='--points FILE'."""

import sys

from grader.core.points import points_file_text


def main(argv: list[str] | None = None) -> int:
    sys.stdout.write(points_file_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
