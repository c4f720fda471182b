"""What learner code prints in a worker: sys.stdout and sys.stderr, caught at the Python level, and the
warnings it raises (its own, or torch's about how it called torch), kept apart from its prints.

The first lines of each request (and of the import) go to the judge as soon as they are printed,
as {"printed": [...]} frames before the answer, so that they reach the report even when the code
then hangs. The rest is only counted: once a request's share is sent, text collects in the stream's
C buffer and reaches Python once per 8 KiB, so printing a lot costs about what printing to
/dev/null does and cannot push a call past its time limit.

A warning goes as a {"warned": "stage2_self_attention.py:31: UserWarning: ..."} frame, naming the last
line of the learner's files on the stack when it was raised (torch's "(Triggered internally at ...)" left
out); each distinct warning once per request, at most SENT_WARNINGS of them. One raised where no learner
line is on the stack is the grader's own, and is not shown.
"""

import io
import re
import socket
import sys
import traceback
import warnings
from pathlib import Path

from grader.runner.protocol import send

# Per request: the report shows ten lines of a check, and sending this much costs nothing a learner
# could notice. Beyond it, lines are counted, not sent.
SENT_BYTES = 4096
SENT_LINES = 10
SENT_WARNINGS = 3
SENT_WARNING_CHARACTERS = 400
TORCH_INTERNALS = re.compile(r"\s*\(Triggered internally at [^)]*\)\.?$")


class PrintCapture:
    """Installs itself as sys.stdout, sys.stderr and warnings.showwarning; ``start`` before each request,
    ``finish`` after it. ``submission``: the folder of the learner's files, whose lines a warning names."""

    def __init__(self, sock: socket.socket, submission: Path):
        self._sock = sock
        self._folder = str(submission.resolve())
        self._warned: set[str] = set()  # this request's warnings, as sent
        # Every check sees its own warnings, not only the first check that raised one at that line.
        warnings.defaultaction = "always"
        self._stream: io.TextIOWrapper | None = None
        self._room_bytes = self._room_lines = 0
        self._unsent_newlines = 0
        self._unsent_open = False  # the unsent text ends inside a line
        self._cut = False

    def start(self) -> None:
        """A fresh share for the next request, and the capture back in place of whatever the learner's
        code left in sys.stdout and sys.stderr (another stream, or this one closed)."""
        if not self._usable():
            self._stream = io.TextIOWrapper(
                _Sink(self._write), encoding="utf-8", errors="backslashreplace", line_buffering=True
            )
        else:
            self._stream.reconfigure(line_buffering=True)  # also sends what was printed between requests
        sys.stdout = sys.stderr = self._stream
        warnings.showwarning = self._warn
        self._warned = set()
        self._room_bytes, self._room_lines = SENT_BYTES, SENT_LINES
        self._unsent_newlines, self._unsent_open, self._cut = 0, False, False

    def finish(self) -> int:
        """Send what the stream still holds; how many lines printed since ``start`` were not sent."""
        if self._usable():
            self._stream.flush()
        return self._unsent_newlines + self._unsent_open

    def _usable(self) -> bool:
        try:
            return self._stream is not None and not self._stream.closed
        except ValueError:  # detached by the learner's code
            return False

    def _write(self, data: bytes) -> None:
        sent = b""
        if self._room_lines > 0:
            sent = _first_lines(data[: self._room_bytes], self._room_lines)
            self._room_bytes -= len(sent)
            self._room_lines = self._room_lines - sent.count(b"\n") if self._room_bytes > 0 else 0
            send(self._sock, {"printed": sent.decode("utf-8", "replace").split("\n")})
        rest = data[len(sent) :]
        if not rest:
            return
        self._unsent_newlines += rest.count(b"\n")
        self._unsent_open = not rest.endswith(b"\n")
        if not self._cut:  # the first text past the share: the judge learns that much was printed, and
            self._cut = True  # the stream stops handing over each line
            send(self._sock, {"printed": [], "cut": True})
            self._stream.reconfigure(line_buffering=False)

    def _warn(self, message, category, filename, lineno, file=None, line=None) -> None:
        """warnings.showwarning: sends the warning apart from the prints, naming the learner's line."""
        where = self._learner_line(filename, lineno)
        if where is None or len(self._warned) >= SENT_WARNINGS:
            return
        said = TORCH_INTERNALS.sub("", str(message))
        text = f"{where}: {getattr(category, '__name__', 'Warning')}: {said}"[:SENT_WARNING_CHARACTERS]
        if text not in self._warned:
            self._warned.add(text)
            send(self._sock, {"warned": text})

    def _learner_line(self, filename: str, lineno: int) -> str | None:
        """file:line of the warning if it names a learner file, else of the last learner line on the stack."""
        if str(filename).startswith(self._folder):
            return f"{Path(filename).name}:{lineno}"
        return last_learner_line(traceback.extract_stack(), self._folder)


def last_learner_line(frames: traceback.StackSummary, folder: str) -> str | None:
    """file:line of the last of ``frames`` in the learner's files (under ``folder``), None if none is."""
    theirs = [frame for frame in frames if frame.filename.startswith(folder)]
    return f"{Path(theirs[-1].filename).name}:{theirs[-1].lineno}" if theirs else None


def _first_lines(data: bytes, lines: int) -> bytes:
    """``data`` up to and including its ``lines``-th newline (all of it if it has fewer)."""
    end = -1
    for _ in range(lines):
        end = data.find(b"\n", end + 1)
        if end < 0:
            return data
    return data[: end + 1]


class _Sink(io.RawIOBase):
    """The bytes under the text stream: each write goes to ``write`` (no buffer in between, so that
    the stream may be reconfigured from inside a write)."""

    def __init__(self, write):
        super().__init__()
        self._write = write

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self._write(bytes(data))
        return len(data)
