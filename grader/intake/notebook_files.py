"""The files a Jupyter notebook's ``%%writefile`` cells write, read from the notebook without running it.

nbgrader's course (and any Jupyter course) has each stage's answer cell start with
``%%writefile stage<N>_<topic>.py``: a notebook handed in unexecuted, or with the file not handed
in beside it, still holds the stage file, as the cell's text. Cells are taken top to bottom, as
running the notebook would write them: a later ``%%writefile`` of a name replaces an earlier one,
``%%writefile -a`` appends to it.

Notebooks come from submissions: the JSON is parsed with the standard library, never executed,
and anything that is not a notebook is a NotANotebook with a one-line reason.
"""

import json
import shlex
from pathlib import PurePosixPath

WRITEFILE_MAGICS = {"%%writefile", "%%file"}  # IPython's %%file is an alias of %%writefile
APPEND_OPTIONS = {"-a", "--append"}
MAGIC_LINE_CHARS = 4096  # a %%writefile line longer than this names no file a learner writes


class NotANotebook(ValueError):
    """The bytes are not a Jupyter notebook; the message says why, in one line."""


def written_files(notebook: bytes) -> dict[str, str]:
    """The text each ``%%writefile`` code cell of ``notebook`` writes, by file name (its last path part)."""
    try:
        document = json.loads(notebook)
    except RecursionError:
        raise NotANotebook("not a notebook: nested too deep") from None
    except ValueError as error:  # JSONDecodeError and UnicodeDecodeError alike
        raise NotANotebook(f"not a notebook: {_first_line(error)}") from None
    cells = document.get("cells") if isinstance(document, dict) else None
    if not isinstance(cells, list):
        raise NotANotebook("not a notebook: no list of cells")
    parts: dict[str, list[str]] = {}  # each file's texts in order, joined once: appends stay linear
    for cell in cells:
        if isinstance(cell, dict) and cell.get("cell_type") == "code" and (text := _source(cell)) is not None:
            if (write := cell_write(text)) is not None:
                name, body, appends = write
                if not appends or name not in parts:
                    parts[name] = []
                parts[name].append(body)
    return {name: "".join(texts) for name, texts in parts.items()}


def _source(cell: dict) -> str | None:
    """A cell's text: nbformat stores it as one string or as a list of lines."""
    source = cell.get("source")
    if isinstance(source, str):
        return source
    if isinstance(source, list) and all(isinstance(line, str) for line in source):
        return "".join(source)
    return None


def cell_write(text: str) -> tuple[str, str, bool] | None:
    """What a code cell's ``%%writefile`` writes, as IPython would: (file name, text, appends); None
    if the cell writes no file."""
    magic, _, body = text.lstrip("\n").partition("\n")  # IPython drops leading blank lines
    # the magic's own word first, and a line a file name fits in: shlex's time grows with a word's length squared
    first = magic.split(None, 1)
    if len(magic) > MAGIC_LINE_CHARS or not first or first[0] not in WRITEFILE_MAGICS:
        return None
    try:
        words = shlex.split(magic)
    except ValueError:  # an unclosed quote: IPython refuses the cell too
        return None
    if not words or words[0] not in WRITEFILE_MAGICS:
        return None
    options = [word for word in words[1:] if word in APPEND_OPTIONS]
    names = [word for word in words[1:] if word not in APPEND_OPTIONS]
    if len(names) != 1:
        return None
    if body and not body.endswith("\n"):
        body += "\n"  # IPython ends every cell it runs with a newline
    return PurePosixPath(names[0]).name, body, bool(options)


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__
