"""The public catalog of mistakes (hints.toml): ids, one sentence each, and where to read more."""

import tomllib
from functools import cache
from pathlib import Path

CATALOG_FILE = Path(__file__).with_name("hints.toml")


@cache
def catalog() -> dict[str, dict[str, str]]:
    return tomllib.loads(CATALOG_FILE.read_text(encoding="utf-8"))


def explain(hint: str, stage: int) -> str:
    """The catalog sentence for ``hint`` with its docs link, for a learner working on ``stage``."""
    return f"{catalog()[hint]['text']} (see {docs_link(hint, stage)})"


def docs_link(hint: str, stage: int) -> str:
    """Where the docs explain ``hint`` to a learner working on ``stage``: docs/<page>.md#<hint>."""
    entry = catalog()[hint]
    pages = entry.get("stages", [stage])
    return entry["docs"].format(stage=stage if stage in pages else pages[0])
