"""A grading's secret for its hidden checks' inputs (grader.judge.drawn_inputs), kept in a key file.

A batch keeps its class's key in OUT/.grader/inputs.key, made on the class's first run and read on every
run after, so that a regrade of the same submission draws the same inputs; it lies with the grader's state,
where no student id can name it and no sandboxed code can read it. A Gradescope autograder carries its own,
made when the zip is built. A key file that is not one is named and refused, never replaced: a new key
would silently draw new inputs for every student.
"""

import hashlib
import os
import re
import secrets
from pathlib import Path

KEY_FILE = "inputs.key"
KEY_BYTES = 32
_KEY_TEXT = re.compile(rf"[0-9a-f]{{{2 * KEY_BYTES}}}\n?")


def new_key_text() -> str:
    """A fresh key, as a key file holds it."""
    return secrets.token_bytes(KEY_BYTES).hex() + "\n"


def read_key(path: Path, make: bool = False) -> bytes:
    """The key in ``path``; with ``make``, a new one written there (readable by its owner alone) where there
    is none. ValueError naming a file that cannot be read or holds no key."""
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        if not make:
            raise ValueError(f"{path}: no such key file") from None
        text = new_key_text()
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="ascii") as file:
            file.write(text)
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"{path} cannot be read ({error}): the key of the hidden checks' inputs") from None
    if not _KEY_TEXT.fullmatch(text):
        raise ValueError(
            f"{path} is not a key of {2 * KEY_BYTES} hexadecimal digits: restore it from a backup, or delete it "
            "to draw new hidden inputs for every student (then regrade with --force)"
        )
    return bytes.fromhex(text.strip())


def key_id(key: bytes) -> str:
    """What a report's fingerprint records of ``key``: another key regrades, and the id tells nothing of it."""
    return hashlib.sha256(b"inputs key id\0" + key).hexdigest()[:16] if key else "none"
