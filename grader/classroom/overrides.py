"""OUT/overrides.csv: grades the instructor sets by hand, applied on every run of the batch.

The file is the instructor's: the grader reads it and never writes it. Each row is
``student_id, stage, points, reason``, ``stage`` a stage number (``3`` or ``stage3``) or ``total``.
A stage's override replaces that stage's automatic score before the late penalty; a total's replaces
the final grade outright. Overrides survive regrades and points changes because the file does; the
automatic score each one replaced is remembered (OUT/.grader/overrides-seen.json, the grader's), so that an
override whose stage scores otherwise than when it was written is flagged for review, never dropped.
A row that cannot be used is named on one line and skipped; the rest are applied.
"""

import csv
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from grader.classroom.out_folder import state_file, written
from grader.core.output_files import write_atomic
from grader.core.points import rounded
from grader.runner.escaping import printable

OVERRIDES_FILE = "overrides.csv"
SEEN_FILE = "overrides-seen.json"
COLUMNS = ("student_id", "stage", "points", "reason")
TOTAL = "total"
OVERRIDE_REVIEW = "override-review"  # grades.csv's flag of an override whose automatic score moved since


@dataclass(frozen=True)
class Override:
    student_id: str
    stage: str  # "stage3", or "total"
    points: float
    reason: str

    @property
    def key(self) -> str:
        return json.dumps([self.student_id, self.stage, self.points, self.reason])


def read_overrides(out: Path, students: set[str], maxima: dict[str, float]) -> dict[str, list[Override]]:
    """The usable rows of OUT/overrides.csv by student (none without the file); ``students``: the class's ids;
    ``maxima``: each graded stage's points possible, and the total's. A row that cannot be used is said on
    a line of its own, and a later row for the same student and stage wins, as in a spreadsheet."""
    path = out / OVERRIDES_FILE
    if not path.is_file():
        return {}
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            rows = list(csv.DictReader(handle))
            header = list(rows[0].keys()) if rows else []
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        _say(f"{path} cannot be read ({error}): no override applied")
        return {}
    if rows and not set(COLUMNS) <= set(header or ()):
        _say(f"{path} needs the columns {', '.join(COLUMNS)}: no override applied")
        return {}
    chosen: dict[tuple[str, str], Override] = {}
    for line, row in enumerate(rows, start=2):
        override = _override(row, students, maxima, f"{path}, line {line}")
        if override is not None:
            chosen[override.student_id, override.stage] = override
    by_student: dict[str, list[Override]] = {}
    for override in chosen.values():
        by_student.setdefault(override.student_id, []).append(override)
    return by_student


def _override(row: dict, students: set[str], maxima: dict[str, float], where: str) -> Override | None:
    student, stage, points, reason = ((row.get(column) or "").strip() for column in COLUMNS)
    stage = stage.lower()
    stage = f"stage{stage}" if stage.isdigit() else stage
    problem = None
    if student not in students:
        problem = f"{_plain(student)!r} is no student of the class"
    elif stage not in maxima:
        problem = f"stage {_plain(stage)!r} is no graded stage (write a stage number, or total)"
    elif not reason:
        problem = "the reason is empty: say why, for the student and for whoever reads the gradebook next"
    else:
        try:
            value = float(points)
        except ValueError:
            value = float("nan")
        if not 0 <= value <= maxima[stage]:
            problem = f"points {_plain(points)!r} are not a number from 0 to {maxima[stage]:g}"
    if problem:
        _say(f"{where}: {problem}; row skipped")
        return None
    return Override(student, stage, rounded(value), _plain(reason))


def applied(overrides: list[Override], report: dict, seen: dict[str, float]) -> list[dict]:
    """The report's ``overrides``: each with the automatic score it replaces now, and ``review`` when that is
    not the score it replaced when it was first applied (recorded in ``seen``, which this fills)."""
    automatic = {stage["id"]: stage["score"] for stage in report["stages"]}
    automatic[TOTAL] = report["score"]
    records = []
    for override in sorted(overrides, key=lambda o: (o.stage == TOTAL, o.stage)):
        now = automatic.get(override.stage, 0)
        was = seen.setdefault(override.key, now)
        record = {key: value for key, value in asdict(override).items() if key != "student_id"}
        records.append({**record, "automatic": now, "automatic_then": was, "review": now != was})
    return records


def overridden_stages(report: dict, records: list[dict]) -> list[dict]:
    """The report's stages with their overridden scores, for the late penalty to follow them."""
    set_by_hand = {r["stage"]: r["points"] for r in records}
    return [{**stage, "score": set_by_hand.get(stage["id"], stage["score"])} for stage in report["stages"]]


SEEN_SCHEMA = Path(__file__).parents[1] / "core" / "schemas" / "overrides-seen.schema.json"


def read_seen(out: Path) -> dict[str, float]:
    """What each override replaced when first applied (empty before the first); ValueError (one line) naming
    the file where it is not what the grader writes: it is never replaced unread, or every override's review
    flag would be lost without a word."""
    import jsonschema  # an instructor's dependency, as this module is

    path = state_file(out, SEEN_FILE)
    if not path.exists():
        return {}
    try:
        seen = json.loads(path.read_text(encoding="utf-8"))
        jsonschema.validate(seen, json.loads(SEEN_SCHEMA.read_text(encoding="utf-8")))
    except (OSError, ValueError, jsonschema.ValidationError) as error:
        said = error.message if isinstance(error, jsonschema.ValidationError) else str(error)
        raise ValueError(
            f"{path} is not the grader's memory of overrides ({_plain(said)[:160]}): restore it, or move it away "
            "to start that memory again (an override whose automatic score has moved since is then not flagged)"
        ) from None
    return seen


def write_seen(out: Path, seen: dict[str, float]) -> None:
    write_atomic(written(state_file(out, SEEN_FILE)), json.dumps(seen, indent=1, sort_keys=True) + "\n")


def _plain(text: str) -> str:
    """A cell's text, one line of it: the instructor's reason reaches the student's feedback and the gradebook."""
    return printable(text, keep_newlines=False)


def _say(line: str) -> None:
    print(f"grader batch: {line}", file=sys.stderr)
