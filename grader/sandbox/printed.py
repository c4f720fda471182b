"""What learner code printed during one check, as the report shows it: its first lines and how many more;
and apart from them, the warnings it raised (torch's own about how it was called, or the learner's).

The worker sends the text as it is printed (grader.runner.capture); the wire format has already
cut and escaped each piece (grader.runner.protocol). Nothing here takes the worker's word for a
size: the judge keeps at most SHOWN_LINES lines of at most SHOWN_LINE_CHARACTERS each, counts the
rest, and clamps the line counts it is told.
"""

SHOWN_LINES = 10
SHOWN_LINE_CHARACTERS = 200
MAX_COUNT = 10**9  # a worker's count of unsent lines is believed up to here
SHOWN_WARNINGS = 3
SHOWN_WARNING_CHARACTERS = 400


class PrintedOutput:
    """The learner's output of the current check; ``reset`` when a check starts."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._lines: list[str] = []  # the first SHOWN_LINES lines, each cut one character past the shown length
        self._newlines = 0  # in everything received: the index of the line being printed
        self._line_open = False  # the line being printed has text
        self._unsent = 0
        self.a_lot = False  # a call printed past what a worker sends: more than a screenful
        self._warnings: list[str] = []  # distinct, in the order raised

    def add(self, pieces: object, cut: object = False) -> None:
        """Text a worker sent, split at its newlines; ``cut``: the worker stopped sending, there is more.
        Raises ValueError for anything that is not a list of strings."""
        if not isinstance(pieces, list) or not all(isinstance(piece, str) for piece in pieces):
            raise ValueError("printed output is a list of strings")
        self.a_lot = self.a_lot or cut is True
        for index, piece in enumerate(pieces):
            if index:
                self._newlines += 1
                self._line_open = False
            if piece:
                self._line_open = True
                self._keep(piece)

    def add_warning(self, text: object) -> None:
        """A warning a worker sent ("file:line: UserWarning: ..."); one seen before is not kept twice.
        Raises ValueError for anything that is not a string."""
        if not isinstance(text, str):
            raise ValueError("a warning is a string")
        text = text[:SHOWN_WARNING_CHARACTERS]
        if text not in self._warnings and len(self._warnings) < SHOWN_WARNINGS:
            self._warnings.append(text)

    def warned(self) -> str:
        """The warnings, a line each; "" for none."""
        return "\n".join(self._warnings)

    def add_unsent(self, count: object) -> None:
        """A worker's count of the lines it printed but did not send; anything but a count is none."""
        if isinstance(count, int) and not isinstance(count, bool) and count > 0:
            self._unsent = min(MAX_COUNT, self._unsent + count)
            self.a_lot = True

    def text(self) -> str:
        """The first lines, each cut to its length, and "… N more lines" when there are more; "" for nothing."""
        total = self._newlines + self._line_open
        lines = self._lines + [""] * (min(total, SHOWN_LINES) - len(self._lines))
        shown = [line if len(line) <= SHOWN_LINE_CHARACTERS else line[:SHOWN_LINE_CHARACTERS] + "…" for line in lines]
        more = total - len(shown) + self._unsent
        if more > 0:
            shown.append(f"… {more} more line{'s' if more != 1 else ''}")
        elif self.a_lot and shown:
            shown.append("… and more")
        return "\n".join(shown)

    def _keep(self, piece: str) -> None:
        line = self._newlines
        if line >= SHOWN_LINES:
            return
        self._lines += [""] * (line + 1 - len(self._lines))
        room = SHOWN_LINE_CHARACTERS + 1 - len(self._lines[line])
        if room > 0:
            self._lines[line] += piece[:room]
