"""What each check is worth, as one value built once per run: the registry's points (grader/core/stages.toml),
with the notes the course prices and the stages a points file replaces.

    python -m grader.cli.points > my-points.toml     # the registry's points as a points file, to edit
"""

import json
import math
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from grader.core.stages import REGISTRY_FILE, registry
from grader.core.toml_file import read_toml

STAGE_POINTS = 20  # each core stage's total, which a test keeps

PointsTable = Mapping[str, Mapping[str, float]]  # stage id -> check id -> points


@dataclass(frozen=True)
class Points:
    """stage id -> check id -> points, read-only; ``source`` names the file an unknown check is missing from."""

    table: PointsTable
    source: Path = REGISTRY_FILE
    changes: tuple[str, ...] = ()  # what a points file sets otherwise than the course and registry, a line each

    def of(self, stage: int, check: str) -> float:
        try:
            return self.table[f"stage{stage}"][check]
        except KeyError:
            raise KeyError(f"{self.source} gives no points to stage{stage} check {check!r}") from None

    def stage_total(self, stage: int) -> float:
        return sum(self.table[f"stage{stage}"].values())

    def as_dict(self) -> dict[str, dict[str, float]]:
        return {stage: dict(checks) for stage, checks in self.table.items()}


def registry_points() -> dict[str, dict[str, float]]:
    return {stage.id: dict(stage.points) for stage in registry().values()}


def points_in_use(
    note_prices: Mapping[str, Mapping[str, float]] | None = None, points_file: Path | None = None
) -> Points:
    """The registry's points, with the notes the course prices (grader.core.course.note_prices; a note is worth
    0 otherwise), and the stages ``points_file`` lists replaced (ValueError, one line, if it cannot be used).

    Precedence, stage by stage: a stage the points file lists is priced by the file alone, note prices
    included; any other stage by the registry with the course's note prices. ``changes`` says, one line each,
    every note price and every stage maximum the file sets otherwise than the course and the registry would."""
    priced = {stage: {**checks, **(note_prices or {}).get(stage, {})} for stage, checks in registry_points().items()}
    replaced = read_points_file(points_file) if points_file else {}
    table = {stage: MappingProxyType(dict(checks)) for stage, checks in {**priced, **replaced}.items()}
    changes = tuple(points_file_changes(priced, replaced, points_file)) if points_file else ()
    return Points(MappingProxyType(table), points_file or REGISTRY_FILE, changes)


def points_file_changes(priced: PointsTable, replaced: PointsTable, source: Path) -> list[str]:
    """One line per note price, and per stage maximum, that the points file ``source`` (``replaced``) sets
    otherwise than the registry with the course's note prices (``priced``)."""
    lines = []
    for stage, checks in replaced.items():
        before = priced[stage]
        for check, worth in checks.items():
            if check.startswith("note.") and worth != before[check]:
                lines.append(
                    f"{source.name}: {stage} {check} is worth {worth:g}, where the course's note prices and the "
                    f"default points give {before[check]:g}"
                )
        if (after := sum(checks.values())) != (was := sum(before.values())):
            lines.append(
                f"{source.name}: {stage} is worth {after:g} in all, where the course's note prices and the default "
                f"points give {was:g}"
            )
    return lines


def rounded(value: float) -> float | int:
    """Points as every report and gradebook writes them: a whole number as one, else to 2 decimals."""
    return int(value) if float(value).is_integer() else round(value, 2)


def read_points_file(path: Path) -> dict[str, dict[str, float]]:
    """The stages of the points file ``path``.

    Each stage it lists ([stage<N>]) must price exactly that stage's checks, each with a number of
    points, so that no check of a grade is missing or silently priced at a typo; stages it leaves out
    keep the registry's points. ValueError (one line) says what is wrong.
    """
    table = read_toml(path)
    expected = registry_points()
    unknown = sorted(set(table) - set(expected))
    if unknown:
        raise ValueError(f"{path}: [{unknown[0]}] is no stage of {REGISTRY_FILE.name} (stages: {', '.join(expected)})")
    listed = {
        (stage, check) for stage, checks in table.items() for check in (checks if isinstance(checks, dict) else [""])
    }
    known = {(stage, check) for stage in table for check in expected[stage]}
    for what, ids in (("has no check", listed - known), ("gives no points to", known - listed)):
        if ids:
            stage, check = min(ids)
            more = f" (and {len(ids) - 1} more)" if len(ids) > 1 else ""
            raise ValueError(
                f"{path} {what} {stage} {check!r}{more}; a stage's checks must be those of "
                f"[{stage}.points] in {REGISTRY_FILE.name}"
            )
    priced = [(stage, check) for stage, check in known if not _is_points(table[stage][check])]
    if priced:
        stage, check = min(priced)
        raise ValueError(f"{path}: {stage} {check!r} = {table[stage][check]!r} is not a number of points")
    return table


def points_file_text(table: PointsTable | None = None) -> str:
    """``table`` (the registry's points by default) as a points file for --points: a [stage<N>] table per stage."""
    lines = [
        "# Points per check (python -m grader.cli.points); grade with them: grade-all GRADE_ARGS='--points FILE'.\n"
        "# A stage listed here must price each of its checks, its notes included; stages left out keep\n"
        "# grader/core/stages.toml's points with the course's [notes] prices.\n"
    ]
    for stage, checks in (table or registry_points()).items():
        lines.append(
            f"\n[{stage}]\n" + "".join(f"{json.dumps(check)} = {value:g}\n" for check, value in checks.items())
        )
    return "".join(lines)


def _is_points(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
