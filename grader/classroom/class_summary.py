"""What a class's folder says of the class as a whole: the facts the class page (class_page.py) draws, read
from the batch's OUT: grades.csv (its rows, in student order), each student's report, similarity.csv."""

import csv
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from grader.classroom.names import read_names
from grader.classroom.out_folder import student_file
from grader.classroom.outputs import GRADEBOOK
from grader.classroom.overrides import OVERRIDE_REVIEW
from grader.core import report as report_model
from grader.core.output_files import FORMULA_STARTS
from grader.core.report import Flag, FlagKind, Report, Status
from grader.core.stages import STAGE_MODULES, is_note

SIMILARITY_FILE = "similarity.csv"
# Flags that say a student handed in less than the stages graded
NOT_HANDED_IN = (FlagKind.NO_STAGE_FILES.value, FlagKind.MISSING.value, FlagKind.UNREADABLE.value)


@dataclass
class ClassSummary:
    students: list[str]  # in grades.csv's order
    graded: list[str] = field(default_factory=list)  # those with a current grade
    stage_scores: dict[str, list[float]] = field(default_factory=dict)  # stage id -> each graded student's score
    stage_max: dict[str, float] = field(default_factory=dict)
    stage_titles: dict[str, str] = field(default_factory=dict)
    failed_checks: Counter = field(default_factory=Counter)  # "stage2 · document.X" -> how many students
    failed_by: dict[str, list[str]] = field(default_factory=dict)  # the same -> the students
    hints: Counter = field(default_factory=Counter)  # hint id -> how many students were shown it
    hinted: dict[str, list[str]] = field(default_factory=dict)
    late: list[tuple[str, str]] = field(default_factory=list)  # student, their penalty, slip days, extension
    final_max: float = 0  # the points possible of the final grades (grades.csv's max_score)
    missing: list[tuple[str, str]] = field(default_factory=list)  # student, why (flags, or "not graded")
    overrides: list[tuple[str, str, str, str]] = field(default_factory=list)  # student, override, reason, review
    similar: list[dict[str, str]] = field(default_factory=list)  # similarity.csv's rows
    finals: list[float] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)  # id -> name, from names.csv (none if graded anonymously)


def summarise(out: Path) -> ClassSummary:
    """The summary of the class graded into ``out``; ValueError (one line) when it holds no grades.csv."""
    gradebook = out / GRADEBOOK
    if not gradebook.is_file():
        raise ValueError(f"{out} holds no grades.csv: grade the class there first (make grade-all ... OUT={out})")
    with gradebook.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    summary = ClassSummary([r["student_id"] for r in rows], names=read_names(out))
    for row in rows:
        student = row["student_id"]
        flags = row.get("flags") or ""
        flagged = [Flag.read(flag.strip()) for flag in flags.split(";") if flag.strip()]
        kinds = {flag.kind for flag in flagged}
        if kinds & set(NOT_HANDED_IN) or not row["score"]:
            summary.missing.append((student, flags or "not graded"))
        if row.get("override"):
            review = "; ".join(f for f in flags.split("; ") if Flag.read(f).kind == OVERRIDE_REVIEW)
            summary.overrides.append((student, row["override"], row.get("override_reason", ""), review))
        if not row["score"]:
            continue
        summary.finals.append(float(row.get("final") or row["score"]))
        summary.final_max = max(summary.final_max, float(row["max_score"]))
        report = report_model.read(student_file(out, file_id(student), ".json"))
        late = ((report.get("record") if report else None) or {}).get("late") or {}
        slip, extended = int(row.get("slip_days_used") or 0), bool(late.get("extended"))
        if float(row.get("late_penalty") or 0) > 0 or slip or extended:
            handed, due = row.get("submitted") or "?", row.get("due") or "?"
            said = [f"-{row.get('late_penalty') or 0} (handed in {handed}, due {due})"]
            said += [f"{slip} slip day{'s' if slip != 1 else ''} spent"] if slip else []
            said += ["extension granted"] if extended else []
            summary.late.append((student, "; ".join(said)))
        if report is None:
            continue
        summary.graded.append(student)
        # a chapter stage handed in as the stub (every check waits for code) is missing too; a bonus one is not;
        # a stage whose file was never handed in (the flags say so) is missing, not the stub
        unsent = " ".join(f.detail or "" for f in flagged if f.kind == FlagKind.MISSING)
        stubs = [
            stage["id"]
            for stage in report["stages"]
            if stage.get("track") == "core"
            and all(c["status"] == Status.NOT_IMPLEMENTED for c in stage["checks"])
            and not kinds & {FlagKind.NO_STAGE_FILES.value, FlagKind.UNREADABLE.value}
            and f"{STAGE_MODULES[int(stage['id'].removeprefix('stage'))]}.py" not in unsent
        ]
        if stubs:
            left = f"left as the stub: {', '.join(stubs)}"
            summary.missing = [(s, f"{why}; {left}" if s == student else why) for s, why in summary.missing]
            if student not in dict(summary.missing):
                summary.missing.append((student, left))
        # each stage's score as the row holds it: the grading the course keeps (grader/classroom/record.py)
        for stage in report["stages"]:
            summary.stage_scores.setdefault(stage["id"], []).append(float(row.get(stage["id"]) or 0))
        _count_report(summary, student, report)
    similarity = out / SIMILARITY_FILE
    if similarity.is_file():
        with similarity.open(newline="", encoding="utf-8") as handle:
            summary.similar = list(csv.DictReader(handle))
    return summary


def _count_report(summary: ClassSummary, student: str, report: Report) -> None:
    hints_shown = set()
    for stage in report["stages"]:  # the checks of the latest grading: what the class gets wrong now
        summary.stage_max[stage["id"]] = stage["max_score"]
        summary.stage_titles[stage["id"]] = stage["title"]
        for check in stage["checks"]:
            if check["status"] in (Status.PASSED, Status.NOT_IMPLEMENTED) or is_note(check["id"]):
                continue  # a stage not handed in, or left a stub, is "missing", not a mistake to count
            key = f"{stage['id']} · {check['id']}"
            summary.failed_checks[key] += 1
            summary.failed_by.setdefault(key, []).append(student)
            if check["hint"]:
                hints_shown.add(check["hint"])
    for hint in sorted(hints_shown):
        summary.hints[hint] += 1
        summary.hinted.setdefault(hint, []).append(student)


def file_id(student: str) -> str:
    """The id as its report file is named: grades.csv quotes an id a spreadsheet would run (output_files.inert)."""
    return student[1:] if student.startswith("'") and student[1:].startswith(FORMULA_STARTS) else student
