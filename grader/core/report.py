"""The report of one submission: its model, built here and nowhere else, written as
grader/core/schemas/report.schema.json says and read back through the same model.

A report is a JSON object; in memory it is that object, typed (``Report``, ``StageReport``,
``CheckReport``), with its statuses and flags as values that are their own JSON text: ``Status`` and
``FlagKind`` are string enums, a ``Flag`` is the string ``"kind: detail"`` that also knows its kind and
detail. Every view (grader/views/) is a function of a ``Report``.
"""

import json
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, NotRequired, TypedDict, cast

from grader.core.points import Points, rounded
from grader.core.stages import BONUS, registry


class Status(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    TIMEOUT = "timeout"
    NOT_IMPLEMENTED = "not_implemented"


class FlagKind(StrEnum):
    """What a reader of a score must know about how it was made: never a silently weaker grade."""

    UNSANDBOXED = "unsandboxed"  # the learner's code ran without a sandbox
    INCOMPLETE = "incomplete"  # the grader itself could not finish: complete is false, graded again next run
    PROVISIONAL = "provisional"  # the visible checks alone ran
    UNREADABLE = "unreadable"  # the submission could not be read (or two claim one id)
    NO_STAGE_FILES = "no-stage-files"
    MISSING = "missing"  # some graded stages have no file
    RENAMED = "renamed"  # a stage file under a near name, graded as the file it stands for
    IGNORED = "ignored"  # files that are no stage file
    OUT_OF_TIME = "out-of-time"  # the student's code used up its time for all calls: later ones got less or none


class Flag(str):
    """A flag as its JSON text, ``kind`` or ``kind: detail``, with both parts kept: nothing parses it back."""

    kind: str
    detail: str | None

    def __new__(cls, kind: str, detail: str | None = None) -> "Flag":
        flag = super().__new__(cls, f"{kind}: {detail}" if detail is not None else kind)
        flag.kind, flag.detail = kind, detail
        return flag

    @classmethod
    def read(cls, text: str) -> "Flag":
        """The flag a report file holds as ``text``: the one place a flag's text is taken apart."""
        kind, colon, detail = text.partition(": ")
        return cls(kind, detail if colon else None)


class VisibleVerdict(TypedDict):
    status: Status
    score: float
    message: str
    hint: str | None


class CheckReport(TypedDict):
    id: str
    visibility: str  # "visible" or "hidden"
    status: Status
    score: float
    max_score: float
    message: str
    hint: str | None
    evidence: dict | None  # grader.judge.evidence.bounded_evidence: two attention maps for the heat maps
    printed: str  # what the learner's code printed during the check, "" if nothing
    warned: NotRequired[str]  # the warnings it raised during the check, a line each, where it raised any
    target: NotRequired[str | None]
    from_source: NotRequired[bool]
    some_right: NotRequired[bool]
    own: NotRequired[dict]
    visible_verdict: NotRequired[
        VisibleVerdict
    ]  # what a visible check's own inputs earned, where a hidden one voided it


class StageReport(TypedDict):
    id: str
    title: str
    track: str
    score: float
    max_score: float
    checks: list[CheckReport]


class Report(TypedDict):
    score: float
    max_score: float
    device: str
    torch: str
    sandbox: str
    stages: list[StageReport]
    flags: list[Flag]
    complete: bool
    # what a batch adds: the fingerprint it was graded from, when, and the course's late penalty
    fingerprint: NotRequired[dict]
    graded_at: NotRequired[str]
    late: NotRequired[dict]
    overrides: NotRequired[list[dict]]  # the instructor's own grades (grader/classroom/overrides.py)
    record: NotRequired[dict]  # the grade of record (grader/classroom/record.py): what every output shows
    extra_credit: NotRequired[dict]  # the bonus stages as extra credit, {"cap": points or None} (totals)


@dataclass
class CheckResult:
    """One check's verdict, as the judge records it; a stage's results become its StageReport."""

    stage: int
    id: str
    visibility: str
    target: str | None
    status: Status
    score: float
    max_score: float
    message: str
    hint: str | None
    evidence: dict | None
    printed: str
    warned: str = ""  # warnings raised during the check, a line each
    from_source: bool = False  # the verdict rests on the source alone (CheckFailed.from_source)
    some_right: bool = False  # failed, with some of its cases right (CheckFailed.some_right): for voiding alone
    visible_verdict: VisibleVerdict | None = None  # set where a hidden input's shortcut voided a visible check
    own: dict | None = None  # the check's own verdict where voiding replaced it (grader.judge.voiding)


def build(
    results: Iterable[CheckResult],
    stages: list[int],
    device: str,
    torch_version: str,
    flags: list[Flag],
    sandbox: str,
    extra_credit: dict | None = None,
) -> Report:
    """The report of a graded submission; ``extra_credit``: the bonus stages as extra credit (totals)."""
    results = list(results)
    report_stages = []
    for stage in stages:
        checks = [r for r in results if r.stage == stage]
        report_stages.append(
            _stage(
                stage, sum(c.score for c in checks), sum(c.max_score for c in checks), [check_report(c) for c in checks]
            )
        )
    return _report(report_stages, device, torch_version, sandbox, flags, extra_credit)


def failed(stages: list[int], points: Points, device: str, reason: str, extra_credit: dict | None = None) -> Report:
    """A zero marked incomplete, for a submission whose grading did not finish: graded again next run."""
    report_stages = [_stage(n, 0, points.stage_total(n), []) for n in stages]
    flags = [Flag(FlagKind.INCOMPLETE, f"not graded: {reason}")]
    return _report(report_stages, device, "", "", flags, extra_credit)


def is_complete(flags: Iterable[Flag]) -> bool:
    return not any(flag.kind == FlagKind.INCOMPLETE for flag in flags)


def counts_as_extra(tracks: set[str], extra_credit: dict | None) -> bool:
    """The bonus stages among those graded (of ``tracks``) are extra credit: the course says so, and core stages
    were graded beside them (a bonus stage graded alone is scored out of its own points)."""
    return extra_credit is not None and BONUS in tracks and len(tracks) > 1


def totals(stages: list[StageReport], extra_credit: dict | None) -> tuple[float, float]:
    """(score, max_score) of a report's ``stages``: the sums of the stages', except where the bonus stages are
    extra credit (counts_as_extra): their points add to the score, up to the cap, and never to the maximum."""
    if not counts_as_extra({s["track"] for s in stages}, extra_credit):
        return rounded(sum(s["score"] for s in stages)), rounded(sum(s["max_score"] for s in stages))
    core = [s for s in stages if s["track"] != BONUS]
    bonus = sum(s["score"] for s in stages if s["track"] == BONUS)
    cap = cast(dict, extra_credit).get("cap")
    added = bonus if cap is None else min(bonus, cap)
    return rounded(sum(s["score"] for s in core) + added), rounded(sum(s["max_score"] for s in core))


def retotalled(report: Report, extra_credit: dict | None) -> Report:
    """``report`` with its totals made by ``extra_credit`` (totals): an earlier grading weighed beside one graded
    after the course changed how its bonus stages count."""
    score, max_score = totals(report["stages"], extra_credit)
    again: Report = {**report, "score": score, "max_score": max_score}
    again.pop("extra_credit", None)
    if counts_as_extra({s["track"] for s in report["stages"]}, extra_credit):
        again["extra_credit"] = cast(dict, extra_credit)
    return again


def _report(
    stages: list[StageReport],
    device: str,
    torch_version: str,
    sandbox: str,
    flags: list[Flag],
    extra_credit: dict | None = None,
) -> Report:
    untotalled: Report = {
        "score": 0,
        "max_score": 0,
        "device": device,
        "torch": torch_version,
        "sandbox": sandbox,
        "stages": stages,
        "flags": flags,
        "complete": is_complete(flags),
    }
    return retotalled(untotalled, extra_credit)


def _stage(number: int, score: float, max_score: float, checks: list[CheckReport]) -> StageReport:
    stage = registry()[number]
    return {
        "id": stage.id,
        "title": stage.title,
        "track": stage.track,
        "score": rounded(score),
        "max_score": rounded(max_score),
        "checks": checks,
    }


def check_report(c: CheckResult) -> CheckReport:
    check: CheckReport = {
        "id": c.id,
        "visibility": c.visibility,
        "status": c.status,
        "score": rounded(c.score),
        "max_score": rounded(c.max_score),
        "message": c.message,
        "hint": c.hint,
        "evidence": c.evidence,
        "printed": c.printed,
    }
    if c.warned:
        check["warned"] = c.warned
    if c.visible_verdict:
        check["visible_verdict"] = c.visible_verdict
    # what voiding rests on, kept so that re-pricing voids as grading did (grader.classroom.repricing)
    check["target"] = c.target
    check["some_right"] = c.some_right
    if c.from_source:
        check["from_source"] = True
    if c.own is not None:
        check["own"] = c.own
    return check


# Writing and reading ----------------------------------------------------------------------------


def to_json(report: Report) -> str:
    return json.dumps(report, indent=2) + "\n"


def read(path: Path) -> Report | None:
    """The report ``path`` holds, through the model (flags and statuses as values); None when it cannot be
    read or lacks what a gradebook row is made of (a report edited by hand may)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return from_json(data) if _well_formed(data) else None


def from_json(data: Any) -> Report:
    """``data`` (a report as JSON gives it) as a Report."""
    data["flags"] = [Flag.read(flag) for flag in data["flags"]]
    for stage in data["stages"]:
        for check in stage.get("checks", []):
            if check.get("status") in Status.__members__.values():
                check["status"] = Status(check["status"])
    return data


def _well_formed(report: Any) -> bool:
    def number(value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    try:
        return (
            number(report["score"])
            and number(report["max_score"])
            and isinstance(report["flags"], list)
            and all(isinstance(flag, str) for flag in report["flags"])
            and all(
                isinstance(s["id"], str) and number(s["score"]) and number(s["max_score"]) for s in report["stages"]
            )
        )
    except (KeyError, TypeError):
        return False
