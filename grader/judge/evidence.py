"""The evidence a failed check carries (grader.judge.verdict.attention_evidence) as the report keeps it."""

import math

from grader.runner.escaping import printable

# Attention maps of the checks are at most 8×8 or so; a report keeps no more than this of either side.
MAX_SIDE = 16
MAX_TEXT = 700  # characters of the title and of the note: every row sum of a map and what it shows


def bounded_evidence(evidence: dict | None) -> dict | None:
    """``evidence`` for the report: both maps cut to their top-left MAX_SIDE × MAX_SIDE cells, a value
    that is not a finite number as None, ``shape`` the maps' size before the cut, the texts escaped.

    Raises ValueError when the maps are not two 2-D tables of numbers of one shape: a check's mistake.
    """
    if evidence is None:
        return None
    expected, actual = evidence["expected"], evidence["actual"]
    shape = _shape(expected)
    if shape is None or _shape(actual) != shape:
        raise ValueError(f"evidence {evidence.get('title')!r}: expected and actual must be 2-D tables of one shape")
    return {
        "title": _text(evidence["title"]),
        "expected": _cells(expected),
        "actual": _cells(actual),
        "shape": list(shape),
        "note": _text(evidence.get("note", "")),
    }


def _shape(table: object) -> tuple[int, int] | None:
    if not isinstance(table, list) or not table or not all(isinstance(row, list) for row in table):
        return None
    widths = {len(row) for row in table}
    if len(widths) != 1 or 0 in widths:
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for row in table for v in row):
        return None
    return len(table), widths.pop()


def _cells(table: list[list[float]]) -> list[list[float | None]]:
    return [[float(v) if math.isfinite(v) else None for v in row[:MAX_SIDE]] for row in table[:MAX_SIDE]]


def _text(value: object) -> str:
    text = str(value)
    return printable(text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "…", keep_newlines=False)
