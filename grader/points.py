"""The points table (points.toml): what each check is worth."""

import math
import tomllib
from functools import cache
from pathlib import Path

DEFAULT_POINTS_FILE = Path(__file__).with_name("points.toml")
POINTS_FILE = DEFAULT_POINTS_FILE  # the table in use: use_points_file changes it
STAGE_POINTS = 20


@cache
def points_table() -> dict[str, dict[str, float]]:
    return tomllib.loads(POINTS_FILE.read_text(encoding="utf-8"))


def points(stage: int, check: str) -> float:
    try:
        return points_table()[f"stage{stage}"][check]
    except KeyError:
        raise KeyError(f"{POINTS_FILE} gives no points to stage{stage} check {check!r}") from None


def rounded(value: float) -> float | int:
    """Points as every report and gradebook writes them: a whole number as one, else to 2 decimals."""
    return int(value) if float(value).is_integer() else round(value, 2)


def use_points_file(path: Path) -> None:
    """Grade with the points of ``path`` from now on, here and in the processes forked from here.

    Its checks must be those of grader/points.toml, each worth a number of points, so that no check
    of a grade is missing or silently priced at a typo; ValueError (one line) says what is wrong.
    """
    global POINTS_FILE
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ValueError(f"{path}: {getattr(error, 'strerror', None) or error}") from None
    expected = tomllib.loads(DEFAULT_POINTS_FILE.read_text(encoding="utf-8"))
    listed = {(stage, check) for stage, checks in table.items()
              for check in (checks if isinstance(checks, dict) else [""])}
    known = {(stage, check) for stage, checks in expected.items() for check in checks}
    for what, ids in (("has no check", listed - known), ("gives no points to", known - listed)):
        if ids:
            stage, check = min(ids)
            more = f" (and {len(ids) - 1} more)" if len(ids) > 1 else ""
            raise ValueError(f"{path} {what} {stage} {check!r}{more}; its checks must be those of "
                             f"{DEFAULT_POINTS_FILE.name}")
    priced = [(stage, check) for stage, check in known if not _is_points(table[stage][check])]
    if priced:
        stage, check = min(priced)
        raise ValueError(f"{path}: {stage} {check!r} = {table[stage][check]!r} is not a number of points")
    POINTS_FILE = path
    points_table.cache_clear()


def _is_points(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
