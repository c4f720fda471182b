"""The public catalog of mistakes (hints.toml): ids, one sentence each, and where to read more."""

import tomllib
from functools import cache
from pathlib import Path

CATALOG_FILE = Path(__file__).with_name("hints.toml")


@cache
def catalog() -> dict[str, dict]:
    return tomllib.loads(CATALOG_FILE.read_text(encoding="utf-8"))


def sentence(hint: str, stage: int) -> str:
    """The catalog's sentence for ``hint`` as a learner working on ``stage`` reads it: the stage's own where
    the catalog has one (``by_stage``), else the hint's."""
    entry = catalog()[hint]
    return entry.get("by_stage", {}).get(str(stage), entry["text"])


def explain(hint: str, stage: int) -> str:
    """The catalog sentence for ``hint`` with its docs link, for a learner working on ``stage``."""
    return f"{sentence(hint, stage)} (see {docs_link(hint, stage)})"


def docs_link(hint: str, stage: int) -> str:
    """Where the docs explain ``hint`` to a learner working on ``stage``: docs/<page>.md#<hint>."""
    entry = catalog()[hint]
    pages = entry.get("stages", [stage])
    return entry["docs"].format(stage=stage if stage in pages else pages[0])


def shown_by_weights(hint: str | None) -> bool:
    """A map of the attention weights shows ``hint``'s cause (its catalog entry says picture = "weights"), or no
    cause is named, so the weights map is the evidence there is."""
    return hint is None or catalog()[hint].get("picture") == "weights"
