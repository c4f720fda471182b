"""A TOML file an instructor wrote (course.toml, a points file), read with a one-line refusal."""

import tomllib
from pathlib import Path


def read_toml(path: Path, error: type[ValueError] = ValueError) -> dict:
    """The table of ``path``; ``error`` with the path and what is wrong, in one line, if it cannot be read."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as problem:
        raise error(f"{path}: {getattr(problem, 'strerror', None) or problem}") from None
