"""A check's evidence (grader.judge.evidence) as shaded text: the expected attention map and the learner's,
side by side, two characters a cell. Shades, not colours, so that it reads the same without colour."""

import math

SHADES = "░▒▓█"  # quarters of the expected map's largest value; an empty cell is 0
ABOVE = "++"  # larger than anything expected: shades scaled to it would flatten the expected map
SHOWN_SIDE = 8  # rows and columns a terminal shows
GAP = "    "


def heat_map_lines(evidence: dict) -> list[str]:
    """The evidence's title, both maps with row and column indices, the scale and the note."""
    rows, columns = evidence["shape"]
    shown_rows, shown_columns = min(rows, SHOWN_SIDE), min(columns, SHOWN_SIDE)
    expected, actual = ([row[:shown_columns] for row in evidence[side][:shown_rows]] for side in ("expected", "actual"))
    cells = [v for table in (expected, actual) for row in table for v in row]
    expected_cells = [v for row in expected for v in row if v is not None and v > 0]
    peak = max(expected_cells or [v for v in cells if v is not None and v > 0], default=0.0)
    title = evidence["title"]
    if (shown_rows, shown_columns) != (rows, columns):
        title += f" (the top-left {shown_rows}×{shown_columns} of {rows}×{columns})"
    width = 3 + 2 * shown_columns  # a row index, a space, two characters a cell
    header = "   " + "".join(f"{j:<2}" for j in range(shown_columns))
    lines = [title, f"{'expected':<{width}}{GAP}yours", f"{header:<{width}}{GAP}{header}".rstrip()]
    for i, (expected_row, actual_row) in enumerate(zip(expected, actual)):
        left = f"{i:>2} " + "".join(_cell(v, peak) for v in expected_row)
        right = f"{i:>2} " + "".join(_cell(v, peak) for v in actual_row)
        lines.append(f"{left:<{width}}{GAP}{right}".rstrip())
    lines.append(_scale(peak, cells))
    if evidence["note"]:
        lines.append(evidence["note"])
    return lines


def _cell(value: float | None, peak: float) -> str:
    if value is None:
        return "??"
    if value < 0:
        return "--"
    if value == 0:
        return "  "
    if value > peak * (1 + 1e-6):
        return ABOVE
    return SHADES[min(len(SHADES), math.ceil(len(SHADES) * value / peak)) - 1] * 2


def _scale(peak: float, cells: list[float | None]) -> str:
    steps = ", ".join(f"{shade} up to {peak * (k + 1) / len(SHADES):.3g}" for k, shade in enumerate(SHADES))
    scale = f"shades: blank 0, {steps}" if peak else "shades: blank 0"
    if any(v is not None and v > peak * (1 + 1e-6) for v in cells):
        scale += f", {ABOVE} above {peak:.3g}"
    if any(v is not None and v < 0 for v in cells):
        scale += ", -- below 0"
    if None in cells:
        scale += ", ?? not a number"
    return scale
