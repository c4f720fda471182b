"""Whom a run grades: each student's submission staged and hashed by the judge, the ids an instructor
asked for (a typo answered with the ids it may have meant), and names that may be one student's twice."""

import datetime as dt
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from grader.classroom.fingerprint import ASKED, FORCED, REASONS, RunFingerprint, why_grade
from grader.classroom.outputs import saved_report
from grader.classroom.repricing import reprice_class
from grader.core.points import Points
from grader.intake.students import Student, canonical_id
from grader.intake.submission import COPY_MARK, SubmissionError, SubmissionFiles, read_submission
from grader.runner.escaping import listing, printable

MAX_SUMMARY_IDS = 50  # ids the summary line names


def second_copies(ids: list[str]) -> list[tuple[str, str]]:
    """Each id named as a browser or an operating system names a second copy of another id's file
    (``ada (1)`` beside ``ada``), with that id."""
    known = set(ids)
    return [(id, first) for id in ids if (first := COPY_MARK.sub("", id)) != id and first in known]


def case_twins(ids: list[str]) -> list[tuple[str, str]]:
    """Each id that differs from an earlier one of ``ids`` only by case (``Ada`` after ``ada``), with that
    one: file systems that ignore case (macOS's, Windows's) keep one report file for both."""
    first_of: dict[str, str] = {}
    return [(id, first) for id in ids if (first := first_of.setdefault(id.casefold(), id)) != id]


def plan(
    students: list[Student], chosen: set[str] | None, out: Path, force: bool, run: RunFingerprint, points: Points
) -> tuple[dict[str, dict], list[Student]]:
    """Each student's current fingerprint (their files staged and hashed by the judge), and who is graded:
    the ``chosen`` ones, else everyone with --force, else those whose report is not current. A report that
    only a points change made old is re-priced instead (grader/classroom/repricing.py). Says so."""
    current = {student.id: run.of(read_student(student)) for student in students}
    if not force and chosen is None:  # --student grades those asked for, and touches no one else
        moved: set[str] = set()
        if done := reprice_class(students, out, current, points, moved):
            print(
                f"grader batch: {counted(done, 'report')} re-priced for the new points table, no code run again",
                file=sys.stderr,
            )
            for line in sorted(moved):  # whatever moved it: a points file, or the course's note prices
                print(f"grader batch:   re-priced {line}", file=sys.stderr)
    reasons = {student.id: why_grade(*saved_report(out, student), current[student.id]) for student in students}
    if chosen is not None:
        todo = {student.id: ASKED for student in students if student.id in chosen}
    else:
        todo = {s.id: reason for s in students if (reason := FORCED if force else reasons[s.id])}
    print(f"grader batch: {plan_summary(len(students), list(todo.values()), chosen, reasons)}", file=sys.stderr)
    if 0 < len(todo) < len(students):  # who, when not everyone: a resubmission is checked by name
        for reason in REASONS:
            if ids := [student_id for student_id, why in todo.items() if why == reason]:
                print(f"grader batch:   {reason}: {listing(ids, MAX_SUMMARY_IDS)}", file=sys.stderr)
    return current, [student for student in students if student.id in todo]


# Characters one is typed or read for the other: a substitution between them is half a mistake
LOOK_ALIKE = [set("l1Ii|"), set("O0o"), set("S5s"), set("B8")]


def close_ids(typed: str, known: list[str], most: int = 5) -> list[str]:
    """The ids of ``known`` a mistyped ``typed`` may have meant, closest first: by edit distance
    (a swap of two neighbours is one edit; a look-alike or another case, half of one), then by id;
    none further than a third of the typed length (at least one edit)."""
    limit = max(1.0, len(typed) / 3)
    ranked = sorted(
        (distance, candidate) for candidate in known if (distance := _edit_distance(typed, candidate)) <= limit
    )
    return [candidate for _, candidate in ranked[:most]]


def _edit_distance(a: str, b: str) -> float:
    """Damerau-Levenshtein distance (optimal string alignment), look-alike substitutions costing 0.5."""
    rows = [[float(j) for j in range(len(b) + 1)]]
    for i, x in enumerate(a, 1):
        row = [float(i)]
        for j, y in enumerate(b, 1):
            swap = 0 if x == y else 0.5 if x.lower() == y.lower() or any({x, y} <= group for group in LOOK_ALIKE) else 1
            row.append(min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + swap))
            if i > 1 and j > 1 and x == b[j - 2] and a[i - 2] == y:
                row[j] = min(row[j], rows[-2][j - 2] + 1)
        rows.append(row)
    return rows[-1][-1]


def chosen_ids(students: list[Student], ids: list[str] | None, folder: Path) -> set[str] | None:
    """The ids --student asked for (None: not given), in the form ids take (canonical_id: typed é is
    a folder's e and U+0301); ValueError names an id that is no student's."""
    if ids is None:
        return None
    known = [student.id for student in students]
    ids = [canonical_id(student_id) for student_id in ids]
    for student_id in ids:
        if student_id not in known:
            close = close_ids(student_id, known)
            hint = f"close: {', '.join(close)}" if close else "no id is close; grades.csv lists them all"
            raise ValueError(f"no student {printable(student_id, keep_newlines=False)} in {folder} ({hint})")
    return set(ids)


def read_student(student: Student) -> SubmissionFiles:
    """``student``'s stage files, read by the judge. Never raises: what cannot be read is graded as an
    empty submission flagged with why, and the class goes on."""
    if student.conflict:
        return SubmissionFiles(problem=student.conflict)
    try:
        return read_submission(student.source)
    except SubmissionError as error:
        return SubmissionFiles(problem=str(error))
    except Exception as error:  # reading raises only SubmissionError: this is the last line of defence
        return SubmissionFiles(problem=printable(f"{type(error).__name__}: {error}", keep_newlines=False))


def plan_summary(total: int, todo_reasons: list[str], chosen: set[str] | None, reasons: dict[str, str | None]) -> str:
    """How many students a run grades and why, e.g. "2 of 9 to grade (1 new, 1 resubmitted); 7 unchanged"."""
    counts = Counter(todo_reasons)
    line = f"{len(todo_reasons)} of {total} to grade"
    if len(counts) == 1 and len(todo_reasons) == total:
        line += f" ({todo_reasons[0]}: all {total})"
    elif counts:
        line += f" ({', '.join(f'{counts[reason]} {reason}' for reason in REASONS if counts[reason])})"
    rest = total - len(todo_reasons)
    if chosen is not None:  # why the others would be graded, in the words above: new is not changed
        waiting = Counter(reason for student_id, reason in reasons.items() if reason and student_id not in chosen)
        why = ", ".join(f"{waiting[reason]} {reason}" for reason in REASONS if waiting[reason])
        line += f"; {rest} not asked for" + (f" ({why}: run without --student to grade them)" if why else "")
    elif rest:
        line += f"; {rest} unchanged"
    return line


def with_times(students: list[Student], times: dict[str, dt.datetime], source: Path) -> list[Student]:
    """``students`` with the times ``source`` gives them; an id there that is no student here is named, not dropped."""
    name_strangers(times, students, f"{source} gives times")
    return [replace(s, submitted=times[s.id]) if s.id in times else s for s in students]


def name_strangers(given: Iterable[str], students: list[Student], what: str) -> None:
    """Say on a line which ids of ``given`` are no student of the class (``what`` gives them something): a
    misspelt id must not pass for a student without a time or an extension."""
    strangers = sorted(set(given) - {s.id for s in students})
    if strangers:
        print(
            f"grader batch: {what} to {counted(strangers, 'id')} of no student of the class: "
            f"{listing(strangers, MAX_SUMMARY_IDS)}",
            file=sys.stderr,
        )


def counted(items: list, noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"
