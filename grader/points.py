"""The points table (points.toml): what each check is worth."""

import tomllib
from functools import cache
from pathlib import Path

POINTS_FILE = Path(__file__).with_name("points.toml")
STAGE_POINTS = 20


@cache
def points_table() -> dict[str, dict[str, float]]:
    return tomllib.loads(POINTS_FILE.read_text(encoding="utf-8"))


def points(stage: int, check: str) -> float:
    try:
        return points_table()[f"stage{stage}"][check]
    except KeyError:
        raise KeyError(f"grader/points.toml gives no points to stage{stage} check {check!r}") from None
