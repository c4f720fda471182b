"""A course's due dates and what lateness costs (course.toml, grader/core/course.py), and the late penalty of
one report.

The judge computes the penalty from the time the LMS says the work was handed in and from this
file: never from anything a submission holds. A penalty is a percentage of a late stage's points
possible (as Canvas's late policy takes it), for each started day or hour after its due time, up
to a cap; a late stage never loses more than it earned, and on-time stages lose nothing.

A student may have an extension ([extensions]: a due date for every stage, or one per stage), which
never moves a due date earlier, and every student a budget of slip days ([late_penalty] slip_days):
whole days added to each of their due dates, as many as lower their penalty, and no more.
"""

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

from grader.core.course import COURSE_FILE, CourseError, course_title, gradebook_keeps, read_course, tracks
from grader.core.points import rounded
from grader.core.stages import STAGES

UNITS = {"day": dt.timedelta(days=1), "hour": dt.timedelta(hours=1)}
MAX_SLIP_DAYS = 366
STAGE_KEYS = {f"stage{n}" for n in STAGES}
NO_SUBMISSION_TIME = "no-submission-time"
MARKED_LATE_WITHOUT_TIME = "late (marked by Canvas, no time)"


@dataclass(frozen=True)
class LatePolicy:
    """Defaults: no due date, no penalty."""

    due: dt.datetime | None = None
    stage_due: dict[str, dt.datetime] = field(default_factory=dict)  # "stage1" -> its own due time
    per: str = "day"
    penalty: float = 0  # percent of a late stage's points possible, per started unit
    cap: float = 100  # percent, at most
    grace: dt.timedelta = dt.timedelta(0)
    # student id -> "assignment" (every stage) or "stage<N>" -> the due time of their extension
    extensions: dict[str, dict[str, dt.datetime]] = field(default_factory=dict)
    slip_days: int = 0  # whole days each student may hand in late without penalty

    def due_of(self, stage_id: str, student: str | None = None) -> dt.datetime | None:
        """When ``stage_id`` is due, for ``student`` if given: their extension where it is later."""
        due = self.stage_due.get(stage_id, self.due)
        own = self.extensions.get(student, {}) if student is not None else {}
        extended = own.get(stage_id, own.get("assignment"))
        return extended if extended is not None and (due is None or extended > due) else due

    @property
    def has_due_date(self) -> bool:
        return self.due is not None or bool(self.stage_due) or bool(self.extensions)

    def percent(self, submitted: dt.datetime, due: dt.datetime) -> float:
        """The percentage a stage due at ``due`` loses when handed in at ``submitted``: nothing up to the
        end of the grace period; after it, ``penalty`` for each started unit since ``due``, to ``cap``."""
        lateness = submitted - due
        if lateness <= self.grace:
            return 0
        started_units = -(-lateness // UNITS[self.per])  # exact, in microseconds: no float at a boundary
        return min(self.cap, self.penalty * started_units)


def load_course(path: Path | None) -> LatePolicy:
    """The late policy of the course file at ``path`` (None: this tree's course.toml, if any; without
    one, the defaults). CourseError says what is wrong."""
    course = read_course(path)
    path = path or COURSE_FILE
    tracks(course, path)  # the file's other settings are checked here too: one bad line, one message
    gradebook_keeps(course, path)
    course_title(course, path)
    _known_keys(path, "", course, {"course", "due", "late_penalty", "stages", "notes", "extensions", "gradebook"})
    due = course.get("due", {})
    rule = course.get("late_penalty", {})
    _known_keys(path, "due.", due, {"assignment", *STAGE_KEYS})
    _known_keys(path, "late_penalty.", rule, {"per", "penalty", "cap", "grace", "slip_days"})
    times = {key: _due_time(path, f"due.{key}", value) for key, value in due.items()}
    per = rule.get("per", "day")
    if not isinstance(per, str) or per not in UNITS:
        raise CourseError(f'{path}: late_penalty.per = {per!r}; write "day" or "hour"')
    penalty = _number(path, "late_penalty.penalty", rule.get("penalty", 0))
    cap = _number(path, "late_penalty.cap", rule.get("cap", 100))
    if cap > 100:
        raise CourseError(f"{path}: late_penalty.cap = {cap!r} is over 100 percent")
    grace = _number(path, "late_penalty.grace", rule.get("grace", 0))
    try:
        grace_period = dt.timedelta(minutes=grace)
    except OverflowError:
        raise CourseError(f"{path}: late_penalty.grace = {grace!r} minutes is longer than any term") from None
    slip_days = rule.get("slip_days", 0)
    if isinstance(slip_days, bool) or not isinstance(slip_days, int) or not 0 <= slip_days <= MAX_SLIP_DAYS:
        raise CourseError(f"{path}: late_penalty.slip_days = {slip_days!r} must be a whole number of days, 0 to 366")
    extensions = _extensions(path, course.get("extensions", {}))
    if "late_penalty" in course and not times and not extensions:
        raise CourseError(
            f"{path}: [late_penalty] with no [due]: a penalty never applies without a due date; "
            "add [due] assignment = 2025-03-14T23:59:00-05:00 (or stage<N> = ...)"
        )
    return LatePolicy(times.pop("assignment", None), times, per, penalty, cap, grace_period, extensions, slip_days)


def _extensions(path: Path, table) -> dict[str, dict[str, dt.datetime]]:
    """[extensions]: a student id = a due time for every stage, or = { stage<N> = a due time, ... }."""
    if not isinstance(table, dict):
        raise CourseError(f"{path}: [extensions] is a table of student id = due time (or = {{ stage<N> = ... }})")
    extensions = {}
    for student, value in table.items():
        if isinstance(value, dict):
            _known_keys(path, f"extensions.{student}.", value, STAGE_KEYS)
            extensions[student] = {
                stage: _due_time(path, f"extensions.{student}.{stage}", time) for stage, time in value.items()
            }
        else:
            extensions[student] = {"assignment": _due_time(path, f"extensions.{student}", value)}
    return extensions


def late_record(
    policy: LatePolicy,
    submitted: dt.datetime | None,
    late_marked: bool,
    stages: list[dict],
    time_unread: str | None = None,
    student: str | None = None,
) -> dict:
    """The report's ``late`` object for ``student`` graded ``stages`` (the report's) who handed in at
    ``submitted`` (None: the LMS gave no time; ``late_marked``: it said "late" all the same;
    ``time_unread``: why a time the download holds could not be read, which the flag then says). Their
    extension and the slip days that lower their penalty most are taken into account."""
    flags = []
    if submitted is None and late_marked:
        flags.append(MARKED_LATE_WITHOUT_TIME)
    elif submitted is None and policy.has_due_date:
        flags.append(f"{NO_SUBMISSION_TIME}: {time_unread}" if time_unread else NO_SUBMISSION_TIME)
    dues = {stage["id"]: policy.due_of(stage["id"], student) for stage in stages}
    charged = {days: _penalties(policy, submitted, stages, dues, days) for days in range(policy.slip_days + 1)}
    slip = min(charged, key=lambda days: (sum(charged[days]), days))  # the fewest days that lower it most
    per_stage = [
        {
            "id": stage["id"],
            "due": utc_text(due := _later(dues[stage["id"]], slip)),
            "hours_late": _hours_late(submitted, due),
            "penalty_percent": rounded(policy.percent(submitted, due) if submitted and due else 0),
            "penalty_points": rounded(lost),
        }
        for stage, lost in zip(stages, charged[slip])
    ]
    assignment = _later(policy.due_of("assignment", student), slip)
    return {
        "submitted": utc_text(submitted),
        "due": utc_text(assignment),
        "hours_late": _hours_late(submitted, assignment),
        "penalty_percent": rounded(policy.percent(submitted, assignment) if submitted and assignment else 0),
        "penalty_points": rounded(sum(s["penalty_points"] for s in per_stage)),
        "slip_days_used": slip,
        "extended": student in policy.extensions,
        "stages": per_stage,
        "flags": flags,
    }


def _penalties(
    policy: LatePolicy, submitted: dt.datetime | None, stages: list[dict], dues: dict, days: int
) -> list[float]:
    """What each stage loses with ``days`` slip days added to its due time: a late stage loses at most what
    it earned, never the points of another stage."""
    lost = []
    for stage in stages:
        due = _later(dues[stage["id"]], days)
        percent = policy.percent(submitted, due) if submitted and due else 0
        lost.append(min(stage["score"], stage["max_score"] * percent / 100))
    return lost


def _later(due: dt.datetime | None, days: int) -> dt.datetime | None:
    return None if due is None else due + dt.timedelta(days=days)


def _hours_late(submitted: dt.datetime | None, due: dt.datetime | None) -> float | None:
    """Hours from ``due`` to ``submitted``, rounded *up* to the hundredth (36 s): the penalty charges
    every started unit, so work handed in a fraction of a second late never shows 0 hours late."""
    if submitted is None or due is None:
        return None
    started_hundredths = -(-max(submitted - due, dt.timedelta(0)) // dt.timedelta(seconds=36))  # exact
    return rounded(started_hundredths / 100)


def utc_text(moment: dt.datetime | None) -> str | None:
    """``moment`` in UTC, to the second, and to the microsecond when it holds a fraction of a second
    (0.4 s after the due time is late, and shows so): the same time gives the same text, whatever
    offset it came with."""
    return None if moment is None else moment.astimezone(dt.UTC).isoformat(timespec="auto")


def in_utc_range(moment: dt.datetime) -> bool:
    """Whether ``moment`` has a UTC time (utc_text): 9999-12-31 west of UTC, or year 1 east of it, has none."""
    try:
        moment.astimezone(dt.UTC)
    except OverflowError:
        return False
    return True


def _known_keys(path: Path, prefix: str, table, known: set[str]) -> None:
    if not isinstance(table, dict):
        raise CourseError(
            f"{path}: {prefix.rstrip('.')} must be a table, [{prefix.rstrip('.')}], holding {', '.join(sorted(known))}"
        )
    unknown = sorted(set(table) - known)
    if unknown:
        raise CourseError(f"{path}: unknown setting {prefix}{unknown[0]} (known: {', '.join(sorted(known))})")


def _due_time(path: Path, key: str, value) -> dt.datetime:
    if not isinstance(value, dt.datetime) or value.utcoffset() is None:
        shown = value.isoformat() if isinstance(value, (dt.date, dt.time)) else repr(value)  # as it was written
        unquoted = " (unquoted: a TOML date-time, not text)" if isinstance(value, str) else ""
        raise CourseError(
            f"{path}: {key} = {shown} needs a date, a time and a UTC offset{unquoted}, "
            "e.g. 2025-03-14T23:59:00-05:00 or 2025-03-15T04:59:00Z"
        )
    if not in_utc_range(value):
        raise CourseError(
            f"{path}: {key} = {value.isoformat()} is past the last (or before the first) time UTC can "
            "write; give a real due date, or leave the key out for none"
        )
    return value


def _number(path: Path, key: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
        raise CourseError(f"{path}: {key} = {value!r} must be a number, 0 or more")
    return value
