"""The seeds of the numbers a check draws (its inputs, and torch's global generator while it runs).

A visible check draws from its name alone: the student release ships it, and a learner reruns it at will.
A hidden check of a keyed grading (``GradingOptions.inputs_key``: a class's secret, kept in the grader's
state) draws from its name, the key and the bytes of the submission it grades. What one submission's code
learns of its hidden inputs, and could carry out of its sandbox (the kernel's caches outlive a student), then
fits no other submission: not a classmate's, not its own next one, whose bytes differ. The same submission
draws the same inputs on every run, so a regrade gives the same grade. Unkeyed (one submission graded by
its learner, the repository's tests), hidden checks draw from their names as visible ones do.
"""

import hashlib
import hmac
import zlib

from grader.intake.submission import SubmissionFiles

_salt = b""  # the current check's: empty for a visible check or an unkeyed grading


def student_salt(key: bytes, staged: SubmissionFiles) -> bytes:
    """What the hidden checks of ``staged`` draw from under ``key`` (empty: unkeyed)."""
    return hmac.new(key, staged.digest().encode(), hashlib.sha256).digest() if key else b""


def use(salt: bytes) -> None:
    """Draw the current check's numbers from ``salt`` (set before each check by the grading plugin)."""
    global _salt
    _salt = salt


def seed(name: str) -> int:
    """The seed of the numbers named ``name`` in the current check."""
    if not _salt:
        return zlib.crc32(name.encode())
    return int.from_bytes(hmac.new(_salt, name.encode(), hashlib.sha256).digest()[:8], "big") >> 1
