"""The values the seed documents print (document_values.toml), parsed with their tolerances."""

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import torch

from grader.judge.tensor_diff import describe_difference

DATA_FILE = Path(__file__).with_name("document_values.toml")

# A printed number: -inf, 1., 0.9544, -1.6344e-01, 2360064.
_SEED_SECTION = re.compile(r"(\d+)\.(\d+)( .*)")  # "4.1 A simple self-attention …"
_NOTEBOOK_CELL = re.compile(r"\s*\(In \[\d+\][^)]*\)")  # "(In [60])", "(In [27]: context vectors …)"
# The chapter's headings that the notebook (004) quotes without a number, with the book's numbers.
BOOK_HEADINGS = {
    "Implementing self-attention with trainable weights": "3.4",
    "Hiding future words with causal attention": "3.5",
    "Masking additional attention weights with dropout": "3.5.2",
}
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
    def citation(self) -> str:
        """Where a learner finds this value: a section of the book, or the guide's further example.

        Learners have the book, not the seed files: the chapter's documents number its sections
        4.1 … 7.2 where the book has 3.3.1 … 3.6.2, and the retelling (002) is not theirs to read.
        """
        if self.document is None:
            return self.source or self.id
        section = _NOTEBOOK_CELL.sub("", self.section or "").strip()
        if self.document.startswith("002_"):  # its headings are not the book's: say what it computes
            heading, _, detail = section.partition(" (")
            what = detail.removesuffix(")") if detail else heading.rpartition(" / ")[2].lower()
            return f"a further example with other inputs ({what})"
        numbered = _SEED_SECTION.match(section)
        if numbered:
            return f"book section 3.{int(numbered[1]) - 1}.{numbered[2]}{numbered[3]}"
        if section in BOOK_HEADINGS:
            return f"book section {BOOK_HEADINGS[section]} {section}"
        return section

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
