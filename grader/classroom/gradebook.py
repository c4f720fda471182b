"""OUT/grades.csv from the reports on disk, and the closing lines a batch says about them."""

import csv
import io
import sys
from collections import Counter
from pathlib import Path

from grader.classroom.fingerprint import INCOMPLETE, NEW, why_grade
from grader.classroom.history import best_report, history, submitted_at
from grader.classroom.outputs import saved_report, write_feedback, write_report
from grader.classroom.overrides import TOTAL, applied, overridden_stages, read_overrides, read_seen, write_seen
from grader.classroom.plan import MAX_SUMMARY_IDS, counted
from grader.classroom.repricing import repriced
from grader.core.late_policy import MARKED_LATE_WITHOUT_TIME, NO_SUBMISSION_TIME, LatePolicy, late_record, utc_text
from grader.core.output_files import inert, write_atomic
from grader.core.points import Points, rounded
from grader.core.report import Flag, FlagKind, Report
from grader.intake.students import Student
from grader.runner.escaping import listing


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
    return late_record(
        policy, student.submitted, student.late_marked, stages or report["stages"], student.time_unread, student.id
    )


def write_gradebook(
    out: Path,
    students: list[Student],
    current: dict[str, dict],
    policy: LatePolicy,
    stages_graded: list[int],
    points: Points,
    keep: str = "latest",
) -> Counter:
    """grades.csv from the reports on disk whose fingerprint is ``current``'s, in student order: the same
    reports give the same bytes. Any other student's row says why they have no grade, never an old score.

    A current report whose ``late`` object no longer matches ``policy`` (a due date moved), or whose overrides
    no longer match OUT/overrides.csv, gets the new ones, and so does its feedback. ``points``: the table
    graded with (an override may not pass a stage's points possible, nor the total's). ``keep``: which of a
    student's reports a row shows (grader/classroom/history.py). Returns how many rows carry each late flag,
    how many were "penalised", and how many overrides are to "review".
    """
    maxima = {f"stage{n}": points.stage_total(n) for n in stages_graded}
    overrides, seen = (
        read_overrides(out, {s.id for s in students}, maxima | {TOTAL: sum(maxima.values())}),
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
        kept, kept_words = _kept(out, student, report, policy, keep, (points, current[student.id]["points"]))
        records = applied(overrides.get(student.id, []), kept, seen)  # the row's: the one that records what it saw
        own = records if kept is report else applied(overrides.get(student.id, []), report, dict(seen))
        late = late_of(policy, student, report, overridden_stages(report, own))
        if report.get("late") != late or report.get("overrides", []) != own:
            report["late"] = late
            report.pop("overrides", None)
            report.update({"overrides": own} if own else {})
            try:
                write_feedback(out, student, report)
                write_report(out, student, report)
            except OSError as error:  # the row has it; the report keeps the old one until a later run
                print(
                    f"grader batch: cannot update the late penalty in the report of {student.id}: "
                    f"{error.strerror or error}",
                    file=sys.stderr,
                )
        if kept is not report:  # an earlier grading, with the penalty of its own submission time
            late = late_record(policy, submitted_at(kept), False, overridden_stages(kept, records), student=student.id)
            submitted = late["submitted"] or ""
        flagged.update(Flag.read(flag).kind for flag in late["flags"])  # counted by kind, whatever it details
        flagged["penalised"] += late["penalty_points"] > 0
        review = [
            f"override-review: {r['stage']} scores {r['automatic']:g} now, {r['automatic_then']:g} when overridden"
            for r in records
            if r["review"]
        ]
        flagged["review"] += len(review)
        by_hand = {r["stage"]: r for r in records}
        scored = sum(s["score"] for s in overridden_stages(kept, records))
        final = by_hand[TOTAL]["points"] if TOTAL in by_hand else rounded(max(0, scored - late["penalty_points"]))
        write_row(
            student_id=student.id,
            score=kept["score"],
            max_score=kept["max_score"],
            **{s["id"]: s["score"] for s in kept["stages"]},
            submitted=submitted,
            due=late["due"] or "",
            slip_days_used=late["slip_days_used"],
            late_penalty=late["penalty_points"],
            final=final,
            kept=kept_words,
            override="; ".join(f"{r['stage']} {r['points']:g} (automatic {r['automatic']:g})" for r in records),
            override_reason="; ".join(f"{r['stage']}: {r['reason']}" for r in records),
            flags="; ".join([*kept["flags"], *late["flags"], *review]),
        )
    write_atomic(out / "grades.csv", buffer.getvalue())
    if seen:
        write_seen(out, seen)
    return flagged


def _kept(
    out: Path, student: Student, report: Report, policy: LatePolicy, keep: str, priced: tuple[Points, str]
) -> tuple[Report, str]:
    """The report a row shows for ``student``, whose current report is ``report``, and the row's words for it.
    ``priced``: the points table of this run and its fingerprint, which an earlier grading is re-priced with
    to be compared (one that only a regrade could re-price is left out), so that a row never mixes tables."""
    if keep != "best":
        return report, "latest"
    graded = history(out, student) or [report]
    earlier = [(place, _in_table(grading, *priced)) for place, grading in enumerate(graded[:-1], start=1)]
    candidates = [(place, grading) for place, grading in earlier if grading is not None] + [(len(graded), report)]

    def final(grading: Report) -> float:
        late = late_record(policy, submitted_at(grading), False, grading["stages"], student=student.id)
        return grading["score"] - late["penalty_points"]

    best, index = best_report([grading for _, grading in candidates], final)  # the latest as it stands now
    place = candidates[index - 1][0]
    return best, f"best of {len(graded)}: grading {place}" + (" (the latest)" if best is report else "")


def _in_table(grading: Report, points: Points, fingerprint: str) -> Report | None:
    """``grading`` priced by ``points`` (whose fingerprint is ``fingerprint``); None where only a regrade could."""
    if (grading.get("fingerprint") or {}).get("points") == fingerprint:
        return grading
    return repriced(grading, points, fingerprint) if grading.get("fingerprint") else None


def _row_reason(reason: str | None) -> str:
    """A reason to grade, as the reason a student stands without a grade after the run."""
    return "no report yet" if reason == NEW else reason


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
