"""A class's grades.csv as the file an LMS gradebook imports: Canvas's gradebook CSV, or Moodle's grade import
CSV (python -m grader.cli.lms_export; its help says how students are matched)."""

import csv
import html
import io
import re
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from grader.core.output_files import inert
from grader.core.report import Flag, FlagKind
from grader.runner.escaping import printable

CANVAS_STUDENT_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
CANVAS_IDENTIFIERS = ["ID", "SIS User ID", "SIS Login ID"]
CANVAS_POINTS_ROW = "    Points Possible"  # as Canvas's export writes it; the importer looks for "Points Possible"
# The cells of a Canvas export's rows about its assignments rather than a student, as its importer
# tells them (gradebook_importer.rb): "Points Possible" first, or nothing but "Muted" / "Manual Posting".
CANVAS_POINTS_POSSIBLE = "Points Possible"
CANVAS_POSTING_CELL = re.compile(r"\s*(Muted|Manual Posting.*)?\s*", re.IGNORECASE)
ROSTER_ID = "student_id"
# Moodle's "Download grading worksheet": a participant's number in "Participant 101" (in the site's language)
MOODLE_IDENTIFIER, MOODLE_GRADE, MOODLE_MAXIMUM, MOODLE_COMMENTS = (
    "Identifier",
    "Grade",
    "Maximum Grade",
    "Feedback comments",
)
MOODLE_PARTICIPANT = re.compile(r"\D*(\d+)")
FIXED_TIME = (2025, 1, 1, 0, 0, 0)  # a zip entry's time: the same feedback gives the same bytes


MOODLE_GRADE_MAX = 100  # a new Moodle grade item's maximum grade; its import caps grades at the item's maximum

# Flags of grades.csv under which a grade is not the student's work as graded in full: the export
# writes the grade, and names the student, so no one imports such a number unseen.
WORTH_A_LOOK = {
    FlagKind.NO_STAGE_FILES,
    FlagKind.MISSING,
    FlagKind.UNREADABLE,
    FlagKind.INCOMPLETE,
    FlagKind.RENAMED,
    FlagKind.UNSANDBOXED,
}


@dataclass(frozen=True)
class Grade:
    points: float | None  # None: grades.csv has the student but no grade (never graded)
    max_points: float | None
    flags: str = ""


def read_grades(path: Path) -> dict[str, Grade]:
    """grades.csv by student_id (as the file writes it): the final score where the file has one, else the score."""
    with open(path, encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        columns = reader.fieldnames or []
        if not {"student_id", "score", "max_score"} <= set(columns):
            raise ValueError(f"{path} has no student_id, score and max_score columns: is it a grades.csv?")
        grade_column = "final" if "final" in columns else "score"
        grades = {}
        for row in reader:
            if row["student_id"] in grades:  # a gradebook the grader wrote never holds one; a hand-edited one may
                raise ValueError(f"{path}: student_id {row['student_id']!r} has two rows; keep one and export again")
            grades[row["student_id"]] = Grade(
                _number(row[grade_column], path), _number(row["max_score"], path), row.get("flags") or ""
            )
    return grades


def _number(cell: str | None, path: Path) -> float | None:
    if not cell:
        return None
    try:
        return float(cell)
    except ValueError:
        raise ValueError(f"{path}: {cell!r} is not a number") from None


def read_roster(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """The roster's columns, and its students in its order, each with a student_id (a Canvas export's
    rows about its assignments left out)."""
    with open(path, encoding="utf-8-sig", newline="") as handle:  # a roster saved by Excel starts with a BOM
        reader = csv.DictReader(handle)
        columns = list(reader.fieldnames or [])
        key = next((k for k in (ROSTER_ID, "ID", MOODLE_IDENTIFIER) if k in columns), None)
        if key is None:
            raise ValueError(
                f"{path} has no {ROSTER_ID} column (nor a Canvas export's ID, nor a Moodle worksheet's Identifier)"
            )
        roster: list[dict[str, str]] = []
        seen: set[str] = set()
        for row in reader:
            cells = {column: (value or "") for column, value in row.items() if column is not None}
            student_id = cells[key]
            if key == MOODLE_IDENTIFIER and (number := MOODLE_PARTICIPANT.fullmatch(student_id.strip())):
                student_id = number[1]  # the participant number the download's folders are named by
            if not student_id:
                if not _about_assignments(list(cells.values())):
                    print(f"lms_export: roster line {reader.line_num} has no {key}: left out", file=sys.stderr)
                continue
            if student_id in seen:
                raise ValueError(f"{path}: {student_id} is in the roster twice")
            seen.add(student_id)
            roster.append(cells | {ROSTER_ID: student_id})
    return columns, roster


def _about_assignments(cells: list[str]) -> bool:
    """Whether a row of a Canvas gradebook export describes its assignments rather than a student."""
    return CANVAS_POINTS_POSSIBLE in cells[0] or all(CANVAS_POSTING_CELL.fullmatch(cell) for cell in cells)


def common_max_points(grades: dict[str, Grade]) -> float:
    """The max_score every graded row shares: scores of two point tables are not one column."""
    maxima = {grade.max_points for grade in grades.values() if grade.max_points is not None}
    if len(maxima) > 1:
        raise ValueError(
            f"grades.csv mixes point tables (max_score {', '.join(f'{m:g}' for m in sorted(maxima))}): "
            "grade the class again, or pass --points-possible to scale each row to it"
        )
    if not maxima:
        raise ValueError("grades.csv has no graded student: nothing to export")
    return maxima.pop()


def canvas_csv(
    columns: list[str], roster: list[dict[str, str]], grades: dict[str, Grade], assignment: str, points_possible: float
) -> tuple[str, int]:
    """Canvas's gradebook import: the student columns and the assignment, a Points Possible row, a
    row per student; and how many grades it holds."""
    if not set(CANVAS_IDENTIFIERS) & set(columns):
        raise ValueError(f"the roster has none of Canvas's columns {', '.join(CANVAS_IDENTIFIERS)}")
    rows = []
    for student in roster:
        if not any(student.get(column) for column in CANVAS_IDENTIFIERS):
            print(
                f"lms_export: {_named(student)} has no {', '.join(CANVAS_IDENTIFIERS)} in the roster: "
                "Canvas cannot match them, left out",
                file=sys.stderr,
            )
            continue
        name, section = inert([student.get("Student", ""), student.get("Section", "")])
        rows.append(
            [
                name,
                *(student.get(column, "") for column in CANVAS_IDENTIFIERS),
                section,
                _grade_cell(student, grades, points_possible),
            ]
        )
    header = [*CANVAS_STUDENT_COLUMNS, assignment]
    points_row = [CANVAS_POINTS_ROW, "", "", "", "", _points(points_possible)]
    return _csv_text([header, points_row, *rows]), sum(1 for row in rows if row[-1])


def moodle_csv(
    columns: list[str],
    roster: list[dict[str, str]],
    grades: dict[str, Grade],
    assignment: str,
    points_possible: float,
    identifier: str,
) -> tuple[str, int]:
    """Moodle's CSV grade import: the identifier column the import maps users from, then the grade;
    and how many grades it holds."""
    if identifier not in columns:
        raise ValueError(
            f"the roster has no {identifier!r} column (--identifier names the column Moodle maps students from)"
        )
    rows = []
    for student in roster:
        if not student[identifier]:  # Moodle stops the whole import at a row it cannot map to a user
            print(f"lms_export: {_named(student)} has no {identifier} in the roster: left out", file=sys.stderr)
            continue
        rows.append([student[identifier], _grade_cell(student, grades, points_possible)])
    if points_possible > MOODLE_GRADE_MAX:
        print(
            f"lms_export: grades are out of {_points(points_possible)}, and Moodle's import caps a grade at its "
            f"grade item's maximum (a new item's is {MOODLE_GRADE_MAX}): set the item's maximum grade to "
            f"{_points(points_possible)}, or pass --points-possible {MOODLE_GRADE_MAX} to scale",
            file=sys.stderr,
        )
    above = [row[0] for row in rows if row[-1] and float(row[-1]) > points_possible]
    if above:  # extra credit on top of the points possible: Moodle caps it away unless the site allows more
        print(
            f"lms_export: {len(above)} grade(s) pass the points possible, {_points(points_possible)}, with extra "
            f"credit ({', '.join(above[:3])}{', ...' if len(above) > 3 else ''}): Moodle caps a grade at its item's "
            "maximum unless the site allows unlimited grades (Site administration > Grades > General settings), "
            "so turn that on, or the extra credit is lost on import",
            file=sys.stderr,
        )
    return _csv_text([[identifier, assignment], *rows]), sum(1 for row in rows if row[-1])


def _grade_cell(student: dict[str, str], grades: dict[str, Grade], points_possible: float) -> str:
    """The student's grade in the LMS's points; blank (no grade, not 0) when grades.csv has none."""
    grade = grades.get(as_in_grades(student))
    if grade is None or grade.points is None or not grade.max_points:
        print(f"lms_export: no grade for {_named(student)}: left blank", file=sys.stderr)
        return ""
    if noted := [flag for text in grade.flags.split(";") if (flag := Flag.read(text.strip())).kind in WORTH_A_LOOK]:
        print(
            f"lms_export: {_named(student)} exported with {_points(grade.points)}, flagged "
            f"{printable('; '.join(noted), keep_newlines=False)[:300]}: check before importing",
            file=sys.stderr,
        )
    return _points(grade.points / grade.max_points * points_possible)


def _named(student: dict[str, str]) -> str:
    """The student as a line on stderr names them: the id, and the name where the roster has one."""
    name = f"{student[ROSTER_ID]} ({student['Student']})" if student.get("Student") else student[ROSTER_ID]
    return printable(name, keep_newlines=False)


def as_in_grades(student: dict[str, str]) -> str:
    """The student's id as grades.csv writes it: an id a spreadsheet would run as a formula is quoted there."""
    return inert([student[ROSTER_ID]])[0]


def _points(value: float) -> str:
    """Points as the LMSs write them: at most two decimals, a point for the decimal mark, no exponent."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _csv_text(rows: list[list[str]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)  # quotes a cell with a comma, a quote or a newline
    return buffer.getvalue()


def moodle_worksheet_csv(
    columns: list[str], roster: list[dict[str, str]], grades: dict[str, Grade], feedback: dict[str, str]
) -> tuple[str, int]:
    """Moodle's grading worksheet, as downloaded, with each graded student's Grade (scaled to the row's
    Maximum Grade) and Feedback comments (their feedback, as preformatted HTML) filled in; every other cell
    as it was, for Moodle's "Upload grading worksheet" to check. How many grades it holds."""
    missing = [column for column in (MOODLE_IDENTIFIER, MOODLE_GRADE, MOODLE_MAXIMUM) if column not in columns]
    if missing:
        raise ValueError(f"the worksheet has no {', '.join(missing)} column: is it Moodle's grading worksheet?")
    rows, exported = [], 0
    for student in roster:
        cells = {column: student.get(column, "") for column in columns}
        maximum = _number(cells[MOODLE_MAXIMUM].replace(",", "."), Path(MOODLE_MAXIMUM)) or 0
        grade = _grade_cell(student, grades, maximum) if maximum else ""
        if grade:
            cells[MOODLE_GRADE], exported = grade, exported + 1
        if MOODLE_COMMENTS in cells and student[ROSTER_ID] in feedback:
            said = feedback[student[ROSTER_ID]]
            kept = grades.get(as_in_grades(student))
            if grade and kept and kept.points is not None and kept.max_points and kept.max_points != maximum:
                said = (  # the feedback counts the grader's points, the Grade the worksheet's
                    f"Recorded here as {grade} of {_points(maximum)}: {_points(kept.points)} of the "
                    f"{_points(kept.max_points)} points the grader gives, scaled.\n\n{said}"
                )
            cells[MOODLE_COMMENTS] = f"<pre>{html.escape(said)}</pre>"
        rows.append([cells[column] for column in columns])
    return _csv_text([columns, *rows]), exported


def moodle_feedback_zip(roster: list[dict[str, str]], feedback: dict[str, str], name: str) -> tuple[bytes, int]:
    """Moodle's "Upload multiple feedback files in a zip": a folder per participant named as Moodle's own
    download names one, <full name>_<participant number>_assignfeedback_file, holding ``name``; the
    number is what Moodle matches (mod/assign/feedback/file/importziplib.php). How many it holds."""
    buffer, count = io.BytesIO(), 0
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for student in roster:
            text = feedback.get(student[ROSTER_ID])
            if text is None or not student[ROSTER_ID].isdigit():
                continue
            full_name = re.sub(r"[_/\\]", " ", student.get("Full name") or "Participant").strip() or "Participant"
            info = zipfile.ZipInfo(
                f"{full_name}_{student[ROSTER_ID]}_assignfeedback_file/{name}", (2025, 1, 1, 0, 0, 0)
            )
            archive.writestr(info, text)
            count += 1
    return buffer.getvalue(), count


def canvas_comments_csv(roster: list[dict[str, str]], feedback: dict[str, str]) -> tuple[str, int]:
    """A Canvas submission comment per student: user_id (Canvas's ID) and the comment's text, for the
    submissions API (PUT .../assignments/:id/submissions/:user_id with comment[text_comment])."""
    rows = [
        [student["ID"], feedback[student[ROSTER_ID]]]
        for student in roster
        if student.get("ID") and student[ROSTER_ID] in feedback
    ]
    return _csv_text([["user_id", "comment"], *rows]), len(rows)
