"""What every view of a report (terminal, HTML, Gradescope, GitHub Classroom) tells a learner alike:
flags in plain words, the checks to fix with one message per cause, the next step."""

from collections.abc import Iterator
from dataclasses import dataclass

from grader.core.report import CheckReport, FlagKind, Report, StageReport, Status
from grader.core.stages import BONUS, CORE, is_note, registry

MARKS = {Status.PASSED: "✓", Status.FAILED: "✗", Status.ERROR: "✗", Status.TIMEOUT: "⧗", Status.NOT_IMPLEMENTED: "·"}
NOTE_MARK = "i"  # a note with something to say: advice, never a failure
NOTES_HEADING = "Notes (marked i above: advice beyond the book, {worth})"
STATUS_WORDS = {
    Status.PASSED: "passed",
    Status.FAILED: "failed",
    Status.ERROR: "error",
    Status.TIMEOUT: "ran out of time",
    Status.NOT_IMPLEMENTED: "not implemented yet",
}
WITHHELD = "the hidden check's inputs are not shown; see the visible checks and the stage's guide"
PRINTED_HEADING = "Your code printed:"
WARNED_HEADING = "Warnings your code raised:"


def shown_output(check: CheckReport) -> list[tuple[str, str]]:
    """What the learner's code showed during ``check``, each under its heading: its prints, then apart
    from them the warnings it raised (torch's about how it was called are clues, not the learner's words)."""
    said = [(PRINTED_HEADING, check["printed"]), (WARNED_HEADING, check.get("warned", ""))]
    return [(heading, text) for heading, text in said if text]


PROVISIONAL = (
    "Only the visible checks ran: the documents' worked examples, the behaviour any input shows (inputs "
    "left as they were, dropout on the weights and only in training, the cache, the documented errors), and "
    "the layout of parameters and buffers. When your instructor grades, hidden checks add the same functions "
    "on other inputs and shapes, further properties (rows that sum to 1, causality), and that the work is "
    "done by hand rather than by torch's own attention."
)


def flag_sentences(report: Report) -> list[str]:
    """Each flag of ``report`` as a sentence a learner understands; the flag's own words come first."""
    sentences = []
    for flag in report["flags"]:
        if flag.kind == FlagKind.PROVISIONAL:
            sentences.append(PROVISIONAL)
        elif flag.kind == FlagKind.UNSANDBOXED:
            sentences.append(f"unsandboxed: your code ran without a sandbox, because {report['sandbox']}")
        elif flag.kind == FlagKind.IGNORED:
            sentences.append(f"{flag} (only the five stage files are graded)")
        elif flag.kind == FlagKind.INCOMPLETE:
            sentences.append(f"{flag}: the grader itself failed, not your code; grade again")
        elif flag.kind == FlagKind.OUT_OF_TIME:
            sentences.append(f"{flag}: look for a loop that never ends or a slow one (docs/troubleshooting.md#timeout)")
        else:
            sentences.append(flag)
    if "record" in report:  # the record's block says the late penalty and the overrides (record_sentences)
        return sentences
    if late := late_sentence(report.get("late")):
        sentences.append(late)
    sentences += [override_sentence(change) for change in report.get("overrides", [])]
    return sentences


def override_sentence(change: dict) -> str:
    what = "your final grade" if change["stage"] == "total" else change["stage"]
    return (
        f"your instructor set {what} to {points_text(change['points'])} points "
        f"(automatic: {points_text(change['automatic'])}): {change['reason']}"
    )


RECORDED = "Grade recorded"


def recorded_score(report: Report) -> float:
    """The score an output states as the grade: the grade of record's final where a batch gave the report one,
    else the automatic score (a learner's own grading, or Gradescope's run of one submission)."""
    return report["record"]["final"] if report.get("record") else report["score"]


def record_sentences(report: Report) -> list[str]:
    """The grade of record (grader/classroom/record.py) and how it was reached, one short block: the final grade
    as grades.csv and every export hold it, then the automatic score, each override, the late penalty and which
    grading was kept. Empty for a report without one (a learner's own grading)."""
    record = report.get("record")
    if not record:
        return []
    steps = [override_sentence(change) for change in record["overrides"]]
    if late := late_sentence(record["late"]):
        steps.append(late)
    if record["place"] != record["gradings"]:
        steps.append(
            f"your latest grading, number {record['gradings']}, would give {points_text(record['latest_final'])}: "
            "the course keeps your best, and the checks below are those of the grading kept"
        )
    steps += [f"left out of the comparison: {left}" for left in record["left_out"]]
    kept = "" if record["kept"] == "latest" else f", {record['kept']}"
    if steps or record["final"] != record["automatic"]:  # how the final grade was reached, from the automatic score
        steps.insert(0, f"automatic score {score_text(record['automatic'], record['max_score'])}{kept}")
    return [f"{RECORDED}: {score_text(record['final'], record['max_score'])}", *[f"  {step}" for step in steps]]


def late_sentence(late: dict | None) -> str | None:
    """The late penalty a batch with a course file set, in one sentence, with the slip days it spent; None when
    neither was taken."""
    slip = late.get("slip_days_used", 0) if late else 0
    spent = f"{slip} slip day{'s' if slip != 1 else ''} used" if slip else ""
    if not late or not late["penalty_points"]:
        return f"on time with {spent} (due {late['due'] or 'as extended'}, UTC)" if late and slip else None
    stages = ", ".join(
        f"{s['id']} {s['hours_late']:g} h late, -{points_text(s['penalty_points'])}"
        for s in late["stages"]
        if s["penalty_points"]
    )
    return (
        f"late: handed in {late['submitted']} (UTC); penalty {points_text(late['penalty_points'])} points ({stages})"
        + (f"; {spent}" if spent else "")
    )


def student_view(report: Report) -> Report:
    """``report`` as a student may read it. A hidden check keeps its id, status, score and hint (a view
    explains the hint from the public catalog), never its message, evidence or what the learner's code
    printed or warned during it: a message, a heat map or printed output could quote the hidden inputs, shapes and
    expected values, which fixed seeds keep the same every term. Not even a message a visible check shares:
    the learner's code picks its own exception's words, and could pick them by what a hidden input holds.
    A hidden check without a hint says only its status and where to look instead."""
    stages: list[StageReport] = []
    for stage in report["stages"]:
        checks = [c if c["visibility"] == "visible" else _withheld(c) for c in stage["checks"]]
        stages.append({**stage, "checks": checks})
    return {**report, "stages": stages}


def _withheld(check: CheckReport) -> CheckReport:
    if check["hint"] or check["status"] == Status.PASSED:
        message = ""
    else:
        message = f"{STATUS_WORDS[check['status']]}: {WITHHELD}"
    withheld: CheckReport = {**check, "message": message, "evidence": None, "printed": ""}
    withheld.pop("warned", None)
    return withheld


def extra_words(report: Report, track: str) -> str:
    """What follows the bonus track's points where they are extra credit: added to the score, never to the
    maximum, up to the course's cap."""
    if track != BONUS or "extra_credit" not in report:
        return ""
    cap = report["extra_credit"].get("cap")
    return " as extra credit" + (f", {points_text(cap)} at most" if cap is not None else "")


def total_label(report: Report) -> str:
    if any(f.kind == FlagKind.PROVISIONAL for f in report["flags"]):
        return "Provisional total (visible checks only)"
    return f"Automatic score ({RECORDED.lower()} at the top)" if report.get("record") else "Total"


def checks_to_fix(report: Report) -> Iterator[tuple[int, CheckReport, str | None]]:
    """(stage number, check, the id of the check whose message it repeats, or None) for each check that
    failed, errored or timed out; notes are told apart (notes_to_read), except those a stage-wide cause (a
    file that could not be imported) failed, which are marked as failed like the rest of their stage."""
    for stage in report["stages"]:
        repeats = repeated_causes(stage)
        for check in stage["checks"]:
            if check["status"] in (Status.PASSED, Status.NOT_IMPLEMENTED):
                continue
            if not is_note(check["id"]) or _stage_wide_cause(check):
                yield stage_number(stage), check, repeats.get(check["id"])


@dataclass
class Cause:
    """Failed checks of one stage that one proven cause explains (the hint they share), or a check alone: a view
    says the cause (its hint, its evidence) once and lists the checks under it."""

    stage: int
    checks: list[tuple[CheckReport, str | None]]  # (check, the id of the check whose message it repeats, or None)

    @property
    def title(self) -> str:
        """'stage 2 · 3 checks failed for one reason', or the check's own title when it is alone."""
        alone = len(self.checks) == 1
        return f"stage {self.stage} · " + (
            check_title(self.checks[0][0]) if alone else f"{len(self.checks)} checks failed for one reason"
        )

    @property
    def hint(self) -> str | None:
        """The hint to say with it: none where its check repeats another's message, which says it."""
        check, same_as = self.checks[0]
        return None if same_as else check["hint"]

    @property
    def score(self) -> str:
        """'0/10': the points its checks earned of their worth."""
        return score_text(sum(c["score"] for c, _ in self.checks), sum(c["max_score"] for c, _ in self.checks))

    @property
    def evidences(self) -> list[dict]:
        """The distinct evidence of its checks, in their order."""
        found: list[dict] = []
        for check, _ in self.checks:
            if check["evidence"] and check["evidence"] not in found:
                found.append(check["evidence"])
        return found


def causes_to_fix(report: Report) -> list[Cause]:
    """checks_to_fix, grouped: the checks of a stage that carry one hint, or share a stage-wide cause (the
    first says it, the others repeat it), form one cause, placed where the first of them is; a check without a
    hint stands alone."""
    causes: list[Cause] = []
    by_hint: dict[tuple, Cause] = {}
    for number, check, same_as in checks_to_fix(report):
        wide = _stage_wide_cause(check)
        key = (number, wide) if wide else (number, check["hint"]) if check["hint"] else None
        if key in by_hint:
            by_hint[key].checks.append((check, same_as))
            continue
        causes.append(Cause(number, [(check, same_as)]))
        if key:
            by_hint[key] = causes[-1]
    for cause in causes:  # the check that says the cause in full comes first, the checks repeating it after
        cause.checks.sort(key=lambda pair: pair[1] is not None)
    return causes


def check_title(check: CheckReport) -> str:
    """The check's id, said to be hidden where it is."""
    return check["id"] + ("" if check["visibility"] == "visible" else " (hidden check)")


def notes_to_read(report: Report) -> list[tuple[int, CheckReport]]:
    """(stage number, check) for each note with something to say: its advice was not followed. A note whose
    stage could not be imported says nothing (the checks to fix say why)."""
    return [
        (stage_number(stage), check)
        for stage in report["stages"]
        for check in stage["checks"]
        if is_note(check["id"]) and check["status"] in (Status.FAILED, Status.ERROR) and not _stage_wide_cause(check)
    ]


def notes_heading(notes: list[tuple[int, CheckReport]]) -> str:
    priced = sum(check["max_score"] for _, check in notes)
    worth = (
        f"{points_text(priced)} points your instructor counts"
        if priced
        else "no points unless your instructor counts them"
    )
    return NOTES_HEADING.format(worth=worth)


def is_advice(check: CheckReport) -> bool:
    """A note that was not followed and costs nothing: shown as advice, not as a failure."""
    return (
        is_note(check["id"])
        and check["status"] in (Status.FAILED, Status.ERROR)
        and not check["max_score"]
        and not _stage_wide_cause(check)
    )


def mark(check: CheckReport) -> str:
    """The check's mark in a stage's row."""
    return NOTE_MARK if is_advice(check) else MARKS[check["status"]]


def next_step(report: Report) -> tuple[int, str] | None:
    """The stage and message of the first check whose function is not written yet, in stage order (a
    visible check's message where there is one: a student's view shows no hidden check's); a bonus stage's only
    once no chapter stage loses points, which comes first; once the chapter's stages all score full marks, the
    first bonus stage not graded yet."""
    chapter = {number for number, stage in registry().items() if stage.track == CORE}
    losing = [
        stage for stage in report["stages"] if stage_number(stage) in chapter and stage["score"] < stage["max_score"]
    ]
    for stage in report["stages"]:
        waiting = [c for c in _visible_first(stage["checks"]) if c["status"] == Status.NOT_IMPLEMENTED]
        if waiting and stage_number(stage) not in chapter and losing:  # a bonus stub, with the chapter not done
            failed = [c for c in _visible_first(losing[0]["checks"]) if c["score"] < c["max_score"]]
            return stage_number(losing[0]), (
                f"the chapter's stage {stage_number(losing[0])} still loses points in {len(failed)} check(s), "
                f"{failed[0]['id']} first: the bonus stages build on it, so fix it before them"
            )
        if waiting:
            return stage_number(stage), waiting[0]["message"]
    full = {stage_number(stage) for stage in report["stages"] if stage["score"] == stage["max_score"]}
    graded = {stage_number(stage) for stage in report["stages"]}
    bonus = [stage for number, stage in registry().items() if stage.track == BONUS and number not in graded]
    if chapter <= full and full == graded and bonus:
        return bonus[0].number, (
            f"the chapter's stages all score full marks. Past the chapter, bonus stage {bonus[0].number} "
            f"({bonus[0].title}): read docs/stage{bonus[0].number}.md, then make grade STAGE={bonus[0].number}"
        )
    return None


def stage_number(stage: StageReport) -> int:
    return int(stage["id"].removeprefix("stage"))


def points_text(value: float) -> str:
    return f"{value:g}"


def score_text(scored: float, worth: float) -> str:
    """'3/5': points earned of points possible."""
    return f"{points_text(scored)}/{points_text(worth)}"


def repeated_causes(stage: StageReport) -> dict[str, str]:
    """Check id -> the id of the first check of ``stage`` that failed for the same stage-wide cause (the
    stage file could not be imported, imported a forbidden module, or hung or crashed while importing):
    a view shows that cause once, in full, and points the other checks to it. The check shown in full is a
    visible one wherever one shares the cause, so that no view points a student at a hidden check."""
    first: dict[tuple, str] = {}
    repeats = {}
    for check in _visible_first(stage["checks"]):
        cause = _stage_wide_cause(check)
        if cause is None:
            continue
        if cause in first:
            repeats[check["id"]] = first[cause]
        else:
            first[cause] = check["id"]
    return repeats


def repeat_message(first: str) -> str:
    return f"the same problem as {first}: see its message"


def _visible_first(checks: list[CheckReport]) -> list[CheckReport]:
    return sorted(checks, key=lambda check: check["visibility"] != "visible")


def _stage_wide_cause(check: CheckReport) -> tuple | None:
    if check["hint"] in (
        "import-error",
        "forbidden-import",
    ):  # by the hint: a student's view withholds a hidden check's message
        return (check["hint"],)
    if "importing your file" in check["message"] and check["status"] in (Status.TIMEOUT, Status.ERROR):
        return "import", check["status"]
    return None
