"""The values the seed documents print (document_values.toml), parsed with their tolerances."""

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import torch

from grader.tensor_diff import describe_difference

DATA_FILE = Path(__file__).with_name("document_values.toml")

# A printed number: -inf, 1., 0.9544, -1.6344e-01, 2360064.
_TOKEN = re.compile(r"\[|\]|-?inf|-?\d+(?:\.(\d*))?(?:e([+-]\d+))?")


@dataclass(frozen=True)
class DocumentValue:
    """One printed value: where it is quoted from, how to rebuild it, and what was printed."""

    id: str
    stage: int
    recipe: str
    uses: tuple[str, ...]
    printed: str
    document: str | None = None
    section: str | None = None
    source: str | None = None
    cpu_only: bool = False
    mistake: str | None = None
    agrees: str | None = None

    @property
    def expected(self) -> torch.Tensor:
        return parse_printed(self.printed)[0]

    @property
    def tolerance(self) -> torch.Tensor:
        return parse_printed(self.printed)[1]

    def check(self, actual: object) -> str | None:
        """None when ``actual`` reproduces the printed value, else what differs."""
        expected, tolerance = parse_printed(self.printed)
        return describe_difference(actual, expected, tolerance)


@cache
def parse_printed(printed: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The values of a printed tensor, and per value one unit in its last printed digit.

    A value printed without decimals (``2.``, ``2360064``) must match exactly; -inf must be -inf.
    """
    stack: list[list] = [[]]
    for match in _TOKEN.finditer(printed):
        token = match.group(0)
        if token == "[":
            stack.append([])
        elif token == "]":
            closed = stack.pop()
            stack[-1].append(closed)
        else:
            stack[-1].append((float(token), _last_digit_unit(match)))
    if len(stack) != 1 or len(stack[0]) != 1:
        raise ValueError(f"unbalanced or empty printed tensor: {printed!r}")
    root = stack[0][0]
    values = _map(root, lambda pair: pair[0])
    units = _map(root, lambda pair: pair[1])
    return torch.tensor(values, dtype=torch.float64), torch.tensor(units, dtype=torch.float64)


def _last_digit_unit(match: re.Match) -> float:
    decimals = len(match.group(1) or "")
    exponent = int(match.group(2) or 0)
    if decimals == 0 and exponent == 0:
        return 1e-6  # printed as a whole number: only float32 rounding is allowed
    return 10.0 ** (exponent - decimals)


def _map(tree, leaf):
    return [_map(node, leaf) for node in tree] if isinstance(tree, list) else leaf(tree)


@cache
def _load() -> tuple[tuple[DocumentValue, ...], tuple[DocumentValue, ...]]:
    data = tomllib.loads(DATA_FILE.read_text(encoding="utf-8"))

    def build(entry: dict) -> DocumentValue:
        return DocumentValue(**{**entry, "uses": tuple(entry["uses"])})

    return tuple(map(build, data["value"])), tuple(map(build, data["erratum"]))


def document_values(stage: int | None = None) -> tuple[DocumentValue, ...]:
    """The values correct code must reproduce, optionally of one stage only."""
    return tuple(v for v in _load()[0] if stage is None or v.stage == stage)


def errata() -> tuple[DocumentValue, ...]:
    """Values printed from code that differs from the book (kept out of document_values)."""
    return _load()[1]
