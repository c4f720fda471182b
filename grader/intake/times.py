"""Times as an LMS writes them into a download (Gradescope's metadata, nbgrader's timestamp.txt), read as
timezone-aware datetimes, or not at all."""

import re
from datetime import datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

from grader.runner.escaping import printable

TIME_TEXT = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[Tt ](?P<clock>\d{2}:\d{2}(?::\d{2})?)(?:\.(?P<fraction>\d+))?"
    r"\s*(?P<zone>\S*)"
)
OFFSET = re.compile(r"(?P<sign>[+-])(?P<hours>\d{2}):?(?P<minutes>\d{2})")
UTC_NAMES = {"Z", "UTC", "GMT"}
TIME_SHOWN = 40  # characters of a recorded time that is no time, shown in its flag


def parse_time(text: str, assumed: tzinfo | None) -> datetime | None:
    """The time ``text`` gives (``2024-03-01 12:00:00.123456 UTC``, ISO 8601, or with an offset),
    timezone-aware; ``assumed`` is its zone where it names none, or one no zone database knows
    (None: the time is unknown then). Anything else is None."""
    match = TIME_TEXT.fullmatch(text.strip())
    if match is None:
        return None
    fraction = f".{match['fraction'][:6]:0<6}" if match["fraction"] else ""  # Ruby writes nanoseconds
    try:
        when = datetime.fromisoformat(f"{match['date']}T{match['clock']}{fraction}")
    except ValueError:
        return None
    zone = _zone(match["zone"]) or assumed
    return when.replace(tzinfo=zone) if zone else None


def _zone(name: str) -> tzinfo | None:
    if name.upper() in UTC_NAMES:
        return timezone.utc
    if offset := OFFSET.fullmatch(name):
        minutes = int(offset["hours"]) * 60 + int(offset["minutes"])
        return timezone(timedelta(minutes=-minutes if offset["sign"] == "-" else minutes))
    try:
        return ZoneInfo(name) if name else None
    except (KeyError, ValueError, OSError):  # no such zone (ZoneInfoNotFoundError is a KeyError)
        return None


def not_a_time(text: str) -> str:
    """How a recorded time that is none begins, for its flag: the start of it, escaped."""
    return f'it begins "{printable(text.strip()[:TIME_SHOWN], keep_newlines=False)}"'
