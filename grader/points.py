"""What each check is worth: the registry's points (grader/stages.toml), or a points file's.

    python -m grader.points > my-points.toml     # the registry's points as a points file, to edit
"""

import json
import math
import sys
from functools import cache
from pathlib import Path

from grader.stages import REGISTRY_FILE, registry
from grader.toml_file import read_toml

STAGE_POINTS = 20  # each core stage's total, which a test keeps
POINTS_FILE: Path | None = None  # a table given with --points: use_points_file sets it and _POINTS_FILE_TABLE
_POINTS_FILE_TABLE: dict[str, dict[str, float]] = {}  # that file's stages, as use_points_file checked them
_NOTE_PRICES: dict[str, dict[str, float]] = {}  # the course's [notes] (grader.course.note_prices): use_note_prices


def registry_points() -> dict[str, dict[str, float]]:
    return {stage.id: dict(stage.points) for stage in registry().values()}


@cache
def points_table() -> dict[str, dict[str, float]]:
    """stage id -> check id -> points: the registry's, with the notes the course prices, and the stages a
    points file lists replaced."""
    priced = {stage: {**checks, **_NOTE_PRICES.get(stage, {})} for stage, checks in registry_points().items()}
    return {**priced, **_POINTS_FILE_TABLE}


def points(stage: int, check: str) -> float:
    try:
        return points_table()[f"stage{stage}"][check]
    except KeyError:
        raise KeyError(f"{POINTS_FILE or REGISTRY_FILE} gives no points to stage{stage} check {check!r}") from None


def rounded(value: float) -> float | int:
    """Points as every report and gradebook writes them: a whole number as one, else to 2 decimals."""
    return int(value) if float(value).is_integer() else round(value, 2)


def use_note_prices(prices: dict[str, dict[str, float]]) -> None:
    """Grade with the notes the course prices (stage id -> note id -> points), here and in processes forked
    from here; a note is worth 0 otherwise."""
    global _NOTE_PRICES
    _NOTE_PRICES = prices
    points_table.cache_clear()


def use_points_file(path: Path) -> None:
    """Grade with the points of ``path`` from now on, here and in the processes forked from here.

    Each stage it lists ([stage<N>]) must price exactly that stage's checks, each with a number of
    points, so that no check of a grade is missing or silently priced at a typo; stages it leaves out
    keep the registry's points. ValueError (one line) says what is wrong.
    """
    global POINTS_FILE, _POINTS_FILE_TABLE
    table = read_toml(path)
    expected = registry_points()
    unknown = sorted(set(table) - set(expected))
    if unknown:
        raise ValueError(f"{path}: [{unknown[0]}] is no stage of {REGISTRY_FILE.name} "
                         f"(stages: {', '.join(expected)})")
    listed = {(stage, check) for stage, checks in table.items()
              for check in (checks if isinstance(checks, dict) else [""])}
    known = {(stage, check) for stage in table for check in expected[stage]}
    for what, ids in (("has no check", listed - known), ("gives no points to", known - listed)):
        if ids:
            stage, check = min(ids)
            more = f" (and {len(ids) - 1} more)" if len(ids) > 1 else ""
            raise ValueError(f"{path} {what} {stage} {check!r}{more}; a stage's checks must be those of "
                             f"[{stage}.points] in {REGISTRY_FILE.name}")
    priced = [(stage, check) for stage, check in known if not _is_points(table[stage][check])]
    if priced:
        stage, check = min(priced)
        raise ValueError(f"{path}: {stage} {check!r} = {table[stage][check]!r} is not a number of points")
    POINTS_FILE, _POINTS_FILE_TABLE = path, table
    points_table.cache_clear()


def points_file_text() -> str:
    """The registry's points as a points file for --points: a [stage<N>] table of its checks per stage."""
    lines = ["# Points per check (python -m grader.points); grade with them: grade-all GRADE_ARGS='--points FILE'.\n"
             "# A stage listed here must price each of its checks; stages left out keep grader/stages.toml's.\n"]
    for stage, checks in registry_points().items():
        lines.append(f"\n[{stage}]\n" + "".join(f"{json.dumps(check)} = {value:g}\n" for check, value in checks.items()))
    return "".join(lines)


def _is_points(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


if __name__ == "__main__":
    sys.stdout.write(points_file_text())
