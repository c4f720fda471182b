"""Text from a submission made safe to show a person: what a terminal or an editor would act on
(colour, cursor moves, a cleared screen, reordered or hidden characters) becomes a visible escape.

It lives in runner/ because both sides use it: the judge where learner text enters a report,
and the wire format (protocol.py), which the sandbox sees. Standard library only.
"""

import unicodedata

# Control characters (C0, DEL, C1), format characters (bidi overrides and isolates, zero-width
# characters), lone surrogates (bytes of a file name that is not valid UTF-8), and the Unicode
# line and paragraph separators, which start a new line in editors.
ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
KEPT_IN_MULTILINE_TEXT = frozenset("\n\t")
SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# os.fsdecode turns each undecodable byte of a file name into one of these surrogates
SURROGATE_ESCAPED_BYTES = range(0xDC80, 0xDD00)


def printable(text: str, *, keep_newlines: bool) -> str:
    """``text`` with every control or format character written as an escape (``\\x1b``, ``\\u202e``).

    ``keep_newlines`` keeps newlines and tabs: for the grader's own multi-line text. Text that came
    from a submission (a message, a repr, a file name) passes False, so it cannot start a line of
    the report. Backslashes are kept, so escaping twice changes nothing.
    """
    if text.isprintable():  # the usual case, and a fast one
        return text
    return "".join(_escape(character, keep_newlines) for character in text)


def _escape(character: str, keep_newlines: bool) -> str:
    if keep_newlines and character in KEPT_IN_MULTILINE_TEXT:
        return character
    if unicodedata.category(character) not in ESCAPED_CATEGORIES:
        return character
    if character in SHORT_ESCAPES:
        return SHORT_ESCAPES[character]
    code = ord(character)
    if code in SURROGATE_ESCAPED_BYTES:
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def listing(names: list[str], shown: int, width: int = 200) -> str:
    """The first ``shown`` of ``names``, each escaped and cut at ``width`` characters, and how many
    more: a submission may hold thousands of files, a class thousands of ids, and the line ends up
    in a terminal or a cell of the gradebook."""
    cut = [printable(name if len(name) <= width else name[:width] + "…", keep_newlines=False) for name in names[:shown]]
    more = len(names) - len(cut)
    return ", ".join(cut) + (f" and {more} more" if more else "")
