"""Submission times from a file beside the download, for the LMSs whose download holds none.

    python -m grader batch SUBMISSIONS --out OUT --times FILE [--times-zone ZONE]

Canvas's and Moodle's downloads say whose each file is but not when it was handed in; both say
when elsewhere. Two forms of FILE, told apart by their header row:

* Moodle's grading worksheet (the assignment's "Download grading worksheet"): the column
  ``Identifier`` (``Participant 101``: the number in the download's folder names) and
  ``Last modified (submission)`` (``Monday, 13 November 2023, 4:57 PM``: English, in the time zone
  of whoever downloaded it, which ``--times-zone`` names; ``-`` where nothing was handed in).
* Any CSV with the columns ``student_id`` and ``submitted`` (ISO 8601 with a UTC offset, e.g.
  ``2026-03-14T23:59:00-05:00``): made, for instance, from ``submitted_at`` of Canvas's
  submissions API, which Canvas's download lacks.

A time from FILE replaces what the download said. Every refusal is one line (TimesError).
"""

import csv
import io
import re
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from grader.core.late_policy import in_utc_range
from grader.intake.students import canonical_id

MAX_TIMES_BYTES = 16 * 1024 * 1024
MOODLE_ID, MOODLE_TIME = "Identifier", "Last modified (submission)"
MOODLE_PARTICIPANT = re.compile(r"\D*(\d+)")  # "Participant 101", whatever the language calls a participant
# Moodle writes userdate(): 'strftimedaydatetime' ("Monday, 13 November 2023, 4:57 PM"), or without the day
MOODLE_FORMATS = ("%A, %d %B %Y, %I:%M %p", "%d %B %Y, %I:%M %p")
PLAIN_ID, PLAIN_TIME = "student_id", "submitted"


class TimesError(ValueError):
    """FILE cannot give submission times; the message says why, in one line."""


def load_times(path: Path, zone_name: str | None = None) -> dict[str, datetime]:
    """Student id -> when they handed in (timezone-aware), as ``path`` says."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_TIMES_BYTES + 1)
    except OSError as error:
        raise TimesError(f"{path}: cannot be read ({error.strerror or error})") from None
    if len(data) > MAX_TIMES_BYTES:
        raise TimesError(f"{path}: over {MAX_TIMES_BYTES // 1024**2} MiB; no class has that many times")
    try:
        rows = list(csv.DictReader(io.StringIO(data.decode("utf-8-sig"), newline="")))
    except (UnicodeDecodeError, csv.Error) as error:
        raise TimesError(f"{path}: not a UTF-8 CSV file ({error})") from None
    header = set(rows[0]) if rows else set()
    if {MOODLE_ID, MOODLE_TIME} <= header:
        return _moodle_times(path, rows, _zone(zone_name, path))
    if {PLAIN_ID, PLAIN_TIME} <= header:
        return _plain_times(path, rows)
    raise TimesError(
        f"{path}: no columns {MOODLE_ID!r} and {MOODLE_TIME!r} (Moodle's grading worksheet), "
        f"nor {PLAIN_ID!r} and {PLAIN_TIME!r}"
    )


def _zone(name: str | None, path: Path) -> tzinfo:
    if not name:
        raise TimesError(
            f"{path} is a Moodle grading worksheet, whose times name no zone: give the zone of "
            "whoever downloaded it, e.g. --times-zone Europe/London"
        )
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise TimesError(
            f"--times-zone {name!r} is no time zone the zone database knows (e.g. Europe/London)"
        ) from None


def _moodle_times(path: Path, rows: list[dict], zone: tzinfo) -> dict[str, datetime]:
    times = {}
    for line, row in enumerate(rows, start=2):
        identifier, text = (row.get(MOODLE_ID) or "").strip(), (row.get(MOODLE_TIME) or "").strip()
        participant = MOODLE_PARTICIPANT.fullmatch(identifier)
        if participant is None:
            raise TimesError(f"{path}, line {line}: {identifier!r} is not a participant number")
        if text in ("", "-"):  # nothing handed in
            continue
        if participant[1] in times:
            raise TimesError(f"{path}, line {line}: a second time for participant {participant[1]}")
        times[participant[1]] = _moodle_time(text, zone, f"{path}, line {line} (participant {participant[1]})")
    return times


def _moodle_time(text: str, zone: tzinfo, where: str) -> datetime:
    for form in MOODLE_FORMATS:
        try:
            when = datetime.strptime(text, form).replace(tzinfo=zone)
        except ValueError:
            continue
        if not in_utc_range(when):
            raise TimesError(f"{where}: {text!r} is outside the years UTC can write (1 to 9999)")
        return _one_instant(when, text, where)
    raise TimesError(
        f"{where}: {text!r} is not a time as Moodle writes it in English "
        "('Monday, 13 November 2023, 4:57 PM'); download the worksheet with English as your language"
    )


def _one_instant(when: datetime, text: str, where: str) -> datetime:
    """``when`` (a local time in its zone) as the one instant it names. A clock time in the hour a
    change to or from daylight saving time repeats happened twice, and one in the hour it skips
    never did: which instant the student handed in at, the worksheet cannot say, so the batch
    stops rather than guess an hour either way."""
    earlier, later = when.replace(fold=0), when.replace(fold=1)
    if earlier.utcoffset() == later.utcoffset():
        return when
    fix = (
        f"give this class's times with their UTC offsets instead ({PLAIN_ID},{PLAIN_TIME} CSV, "
        "e.g. from the LMS's logs)"
    )
    zone = when.tzinfo
    if earlier.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != when.replace(tzinfo=None):
        raise TimesError(f"{where}: {text!r} never happened in {zone} (the clocks skipped that hour): {fix}")
    raise TimesError(
        f"{where}: {text!r} happened twice in {zone} (the clocks went back an hour), "
        f"{earlier.astimezone(UTC):%H:%M} or {later.astimezone(UTC):%H:%M} UTC: {fix}"
    )


def _plain_times(path: Path, rows: list[dict]) -> dict[str, datetime]:
    times = {}
    for line, row in enumerate(rows, start=2):
        student, text = canonical_id((row.get(PLAIN_ID) or "").strip()), (row.get(PLAIN_TIME) or "").strip()
        if not text:
            continue
        try:
            when = datetime.fromisoformat(text)
        except ValueError:
            when = None
        if when is None or when.tzinfo is None:
            raise TimesError(
                f"{path}, line {line}: {text!r} needs a date, a time and a UTC offset (2026-03-14T23:59:00-05:00)"
            )
        if not in_utc_range(when):
            raise TimesError(f"{path}, line {line}: {text!r} is outside the years UTC can write (1 to 9999)")
        if student in times:
            raise TimesError(f"{path}, line {line}: a second time for {student!r}")
        times[student] = when
    return times
