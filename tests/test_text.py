"""printable: what a terminal or an editor would act on becomes a visible escape, nothing else changes."""

import pytest

from grader.runner.escaping import printable


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("\x1b[2J\x1b[HTotal: 100/100\x1b[8m", "\\x1b[2J\\x1b[HTotal: 100/100\\x1b[8m"),  # clear, home, hide
        ("\x07\x7f\x85\x9b", "\\x07\\x7f\\x85\\x9b"),  # C0, DEL, C1 (0x9b: an escape sequence's one-byte form)
        ("evil\u202etxt.py", "evil\\u202etxt.py"),  # a bidi override reverses what follows
        ("\u2066\u2069\u200b\ufeff\U000e0001", "\\u2066\\u2069\\u200b\\ufeff\\U000e0001"),  # isolates, zero widths, tag
        ("one\u2028two\u2029", "one\\u2028two\\u2029"),  # separators that editors break lines at
        ("name\udcff.py", "name\\xff.py"),  # a file name byte that is not UTF-8, as os.fsdecode keeps it
        ("a\r\nb\tc", "a\\r\\nb\\tc"),
    ],
)
def test_control_and_format_characters_become_visible_escapes(text, shown):
    assert printable(text, keep_newlines=False) == shown


def test_the_graders_own_newlines_and_tabs_can_be_kept_but_never_a_carriage_return():
    assert printable("expected\n\tx\r", keep_newlines=True) == "expected\n\tx\\r"


@pytest.mark.parametrize("text", ["", "plain ASCII", "é ü 中文 😀 λ", "a\u00a0b", "path\\x1b already escaped"])
def test_printable_text_is_unchanged_and_escaping_twice_changes_nothing(text):
    assert printable(text, keep_newlines=False) == text
    hostile = "\x1b[31m\u202e\n" + text
    once = printable(hostile, keep_newlines=False)
    assert printable(once, keep_newlines=False) == once
    assert once.startswith("\\x1b[31m\\u202e\\n")
