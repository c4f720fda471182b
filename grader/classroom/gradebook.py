"""OUT/grades.csv from the reports on disk, and the closing lines a batch says about them."""

import csv
import io
import sys
from collections import Counter
from pathlib import Path
from typing import cast

from grader.classroom.fingerprint import INCOMPLETE, NEW, why_grade
from grader.classroom.outputs import GRADEBOOK, saved_report, write_feedback, write_report
from grader.classroom.overrides import OVERRIDE_REVIEW, TOTAL, read_overrides, read_seen, write_seen
from grader.classroom.plan import MAX_SUMMARY_IDS, counted
from grader.classroom.record import LEFT_OUT, feedback_report, grade_of_record, late_of_current
from grader.core.late_policy import MARKED_LATE_WITHOUT_TIME, NO_SUBMISSION_TIME, LatePolicy, utc_text
from grader.core.output_files import inert, write_atomic
from grader.core.points import Points, rounded
from grader.core.report import Flag, FlagKind, Report, StageReport, totals
from grader.core.stages import registry
from grader.intake.students import Student
from grader.runner.escaping import listing


def due_cell(late: dict) -> str:
    """grades.csv's ``due``: the assignment's due time, or, where a stage is due at another time (the course's
    [due] per stage), each stage's ("stage1 2025-03-07T23:59:00Z; stage2 ..."), extensions and slip days in."""
    stages = late.get("stages") or []
    if all(stage["due"] == late["due"] for stage in stages):
        return late["due"] or ""
    return "; ".join(f"{stage['id']} {stage['due'] or '-'}" for stage in stages)


def csv_columns(stages: list[int]) -> list[str]:
    """grades.csv's header: a column per graded stage (the course's tracks). Another tool reads these columns
    by name (the LMS gradebook exports read `final`): keep them."""
    return [
        "student_id",
        "score",
        "max_score",
        *[f"stage{n}" for n in stages],
        "submitted",
        "due",
        "slip_days_used",
        "late_penalty",
        "final",
        "kept",
        "override",
        "override_reason",
        "flags",
    ]


def late_of(policy: LatePolicy, student: Student, report: Report, stages: list[dict] | None = None) -> dict:
    """The late object of ``student``'s report, on its stages' scores (or ``stages``, those set by hand)."""
    # Canvas marks a submission LATE though its download gives no time: the mark is kept apart from a time.
    return late_of_current(policy, student, report)(stages or [dict(stage) for stage in report["stages"]])


def write_gradebook(
    out: Path,
    students: list[Student],
    current: dict[str, dict],
    policy: LatePolicy,
    stages_graded: list[int],
    points: Points,
    keep: str = "latest",
    extra_credit: dict | None = None,
) -> Counter:
    """grades.csv from the reports on disk whose fingerprint is ``current``'s, in student order: the same
    reports give the same bytes. Any other student's row says why they have no grade, never an old score.

    A current report whose ``late`` object no longer matches ``policy`` (a due date moved), or whose overrides
    no longer match OUT/overrides.csv, gets the new ones, and so does its feedback. ``points``: the table
    graded with (an override may not pass a stage's points possible, nor the most a total can be, with the bonus
    counted as ``extra_credit`` says: grader.core.report.totals). ``keep``: which of a
    student's reports a row shows (grader/classroom/history.py). Returns how many rows carry each late flag,
    how many were "penalised", and how many overrides are to "review".
    """
    maxima = {f"stage{n}": points.stage_total(n) for n in stages_graded}
    # the most a total can be: every stage at full marks, counted as the course counts the bonus
    full = [
        {"track": registry()[n].track, "score": points.stage_total(n), "max_score": points.stage_total(n)}
        for n in stages_graded
    ]
    overrides, seen = (
        read_overrides(
            out, {s.id for s in students}, maxima | {TOTAL: totals(cast(list[StageReport], full), extra_credit)[0]}
        ),
        read_seen(out),
    )
    columns = csv_columns(stages_graded)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)

    def write_row(**cells) -> None:
        """A row by column name; a column not named is blank."""
        writer.writerow(inert([cells.get(column, "") for column in columns]))

    flagged: Counter = Counter()
    for student in students:
        report, exists = saved_report(out, student)
        reason = why_grade(report, exists, current[student.id])
        submitted = utc_text(student.submitted) or ""
        if reason is not None or report is None:
            why = (
                "; ".join(report["flags"]) if report and reason == INCOMPLETE else f"not graded: {_row_reason(reason)}"
            )
            write_row(student_id=student.id, submitted=submitted, flags=why)
            continue
        record = grade_of_record(
            out,
            student,
            report,
            policy,
            keep,
            (points, current[student.id]["points"]),
            overrides.get(student.id, []),
            seen,
        )
        kept, latest, written = record.kept, record.latest, record.as_dict()
        if (
            report.get("late") != latest.late
            or report.get("overrides", []) != latest.records
            or report.get("record") != written
        ):
            report["late"], report["record"] = latest.late, written
            report.pop("overrides", None)
            report.update({"overrides": latest.records} if latest.records else {})
            try:
                write_report(out, student, report)
            except OSError as error:  # the row has it; the report keeps the old one until a later run
                print(
                    f"grader batch: cannot update the grade of record in the report of {student.id}: "
                    f"{error.strerror or error}",
                    file=sys.stderr,
                )
        try:  # rewritten where it changed: the grade of record, or the name in its header (--reveal)
            write_feedback(out, student, feedback_report(kept, written))
        except OSError as error:
            print(
                f"grader batch: cannot update the feedback of {student.id}: {error.strerror or error}", file=sys.stderr
            )
        if kept is not latest:  # an earlier grading, with the penalty of its own submission time
            submitted = kept.late["submitted"] or ""
        flagged.update(Flag.read(flag).kind for flag in kept.late["flags"])  # counted by kind, whatever it details
        flagged["penalised"] += kept.late["penalty_points"] > 0
        review = [
            f"{OVERRIDE_REVIEW}: {r['stage']} scores {r['automatic']:g} now, {r['automatic_then']:g} when overridden"
            for r in kept.records
            if r["review"]
        ]
        flagged["review"] += len(review)
        left_out = [f"{LEFT_OUT}: {', '.join(record.left_out)}"] if record.left_out else []
        flagged[LEFT_OUT] += bool(left_out)
        write_row(
            student_id=student.id,
            score=kept.report["score"],
            max_score=kept.report["max_score"],
            **{s["id"]: s["score"] for s in kept.report["stages"]},
            submitted=submitted,
            due=due_cell(kept.late),
            slip_days_used=kept.late["slip_days_used"],
            late_penalty=kept.late["penalty_points"],
            final=kept.final,
            kept=record.kept_words,
            override=override_cell(kept.records, kept.late["penalty_points"]),
            override_reason="; ".join(f"{r['stage']}: {r['reason']}" for r in kept.records),
            flags="; ".join([*kept.report["flags"], *kept.late["flags"], *review, *left_out]),
        )
    write_atomic(out / GRADEBOOK, buffer.getvalue())
    if seen:
        write_seen(out, seen)
    return flagged


def override_cell(records: list[dict], late_penalty: float) -> str:
    """Each override as grades.csv says it: the points set and the automatic score it replaced. A total's replaces
    the final grade, after the late penalty: where there was one, the cell says that automatic final too."""

    def said(record: dict) -> str:
        automatic = f"automatic {record['automatic']:g}"
        if record["stage"] == TOTAL and late_penalty > 0:
            automatic += f", {rounded(max(record['automatic'] - late_penalty, 0)):g} after the late penalty"
        return f"{record['stage']} {record['points']:g} ({automatic})"

    return "; ".join(said(r) for r in records)


def _row_reason(reason: str | None) -> str:
    """A reason to grade, as the reason a student stands without a grade after the run."""
    return "no report yet" if reason == NEW or reason is None else reason


def late_summary(flagged: Counter) -> list[str]:
    """What the instructor must know about the late policy's inputs: never a silent "on time"."""
    lines = []
    if flagged[NO_SUBMISSION_TIME]:
        lines.append(
            f"{flagged[NO_SUBMISSION_TIME]} without a submission time, not penalised (flag {NO_SUBMISSION_TIME})"
        )
    if flagged[MARKED_LATE_WITHOUT_TIME]:
        lines.append(
            f"{flagged[MARKED_LATE_WITHOUT_TIME]} marked late by Canvas without a time, not penalised "
            f"(flag {MARKED_LATE_WITHOUT_TIME})"
        )
    if flagged["penalised"]:
        lines.append(f"{flagged['penalised']} late, with their penalty in grades.csv (late_penalty, final)")
    if left := flagged[LEFT_OUT]:
        lines.append(
            f'{left} row{"s" if left > 1 else ""} under keep = "best" left an earlier grading out of the comparison '
            "(flag left-out in grades.csv, which says why); set a grade by hand if it should count"
        )
    if flagged["review"]:
        lines.append(
            f"{flagged['review']} override{'s' if flagged['review'] > 1 else ''} to review: the automatic score "
            "changed since it was written (flag override-review in grades.csv); the override still applies"
        )
    return lines


# Flags the batch's last lines count, each with what it means for the grade.
FILE_FLAGS = {
    FlagKind.NO_STAGE_FILES: ("had no stage file", "had no stage file"),
    FlagKind.UNREADABLE: (
        "could not be read (or two submissions claim its id), and scores nothing",
        "could not be read (or two submissions claim their ids), and score nothing",
    ),
    FlagKind.MISSING: (
        "lacks some stage files, and scores nothing for those stages",
        "lack some stage files, and score nothing for those stages",
    ),
    FlagKind.RENAMED: (
        "had a stage file under a near name, graded as the file it stands for",
        "had stage files under near names, graded as the files they stand for",
    ),
    FlagKind.OUT_OF_TIME: (
        "used up its time for all calls (--budget), and scores nothing for the calls left",
        "used up their time for all calls (--budget), and score nothing for the calls left",
    ),
}


def file_summary_lines(out: Path, students: list[Student]) -> list[str]:
    """A line for each flag of FILE_FLAGS some student's current report holds, naming them: a zero
    (or a stage's) that is no one's work on the code must not pass as one."""
    holders: dict[str, list[str]] = {flag: [] for flag in FILE_FLAGS}
    for student in students:
        report = saved_report(out, student)[0]
        for flag in report["flags"] if report else []:
            if flag.kind in holders:
                holders[flag.kind].append(student.id)
    return [
        f"grader batch: {counted(ids, 'submission')} {meaning[len(ids) > 1]}: "
        f"{listing(ids, MAX_SUMMARY_IDS)} (flag {flag})"
        for flag, meaning in FILE_FLAGS.items()
        if (ids := holders[flag])
    ]
