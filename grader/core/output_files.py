"""What the instructor's tools write: whole files, and spreadsheet cells that stay text."""

import os
from pathlib import Path

# A text cell starting with one of these is a formula to a spreadsheet (OWASP, CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def write_atomic(path: Path, text: str) -> None:
    """Write a temporary file beside ``path``, then rename it: readers see all of it or none."""
    temporary = path.with_name(f".{path.name}.partial")
    try:
        with open(temporary, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)  # left only when writing failed


def inert(row: list) -> list:
    """``row`` with every text cell a spreadsheet would run as a formula quoted as text; numbers as they are."""
    return [f"'{cell}" if isinstance(cell, str) and cell.startswith(FORMULA_STARTS) else cell for cell in row]
