"""Students' names beside their ids: from the class download (Canvas, Moodle and Gradescope name whose work
each entry is) or a roster, kept in OUT/.grader/names.csv, which every output that names students reads (the class
report, similarity.csv, the header of each student's feedback). Anonymous grading writes no names.csv and
puts no name anywhere; grading again with --reveal names everyone, without grading anyone again."""

import csv
import io
from dataclasses import replace
from pathlib import Path

from grader.classroom.lms_export import ROSTER_ID, read_roster
from grader.classroom.out_folder import state_file, written
from grader.core.output_files import FORMULA_STARTS, inert, write_atomic
from grader.intake.students import Student, display_name

NAMES_FILE = "names.csv"
# The roster's column of names: a Canvas gradebook export's, a Moodle grading worksheet's, or a plain roster's.
NAME_COLUMNS = ("Student", "Full name", "name")


def roster_names(path: Path) -> dict[str, str]:
    """Each student of the roster at ``path`` with a name, by id (as grader.classroom.lms_export reads it)."""
    columns, roster = read_roster(path)
    column = next((c for c in NAME_COLUMNS if c in columns), None)
    if column is None:
        raise ValueError(f"{path} has no column of names ({', '.join(NAME_COLUMNS)})")
    return {row[ROSTER_ID]: name for row in roster if (name := display_name(row[column]))}


def named(students: list[Student], roster: dict[str, str], anonymous: bool) -> list[Student]:
    """``students`` with the roster's names, where it has one, over the download's; none at all if ``anonymous``."""
    return [replace(s, name=None if anonymous else roster.get(s.id, s.name)) for s in students]


def write_names(out: Path, students: list[Student]) -> None:
    """OUT/.grader/names.csv of the students that have a name; none (an earlier one removed) where none has one."""
    rows = [[s.id, s.name] for s in students if s.name]
    if not rows:
        state_file(out, NAMES_FILE).unlink(missing_ok=True)
        return
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([ROSTER_ID, "name"])
    writer.writerows(inert(row) for row in rows)  # a name can start as a formula does
    write_atomic(written(state_file(out, NAMES_FILE)), buffer.getvalue())


def read_names(out: Path) -> dict[str, str]:
    """OUT/.grader/names.csv by id: {} where there is none (anonymous grading, or a download that names no one)."""
    try:
        with state_file(out, NAMES_FILE).open(newline="", encoding="utf-8") as handle:
            return {
                _as_written(row[ROSTER_ID]): _as_written(row["name"])
                for row in csv.DictReader(handle)
                if row.get("name")
            }
    except FileNotFoundError:
        return {}


def with_name(student_id: str, name: str | None) -> str:
    """A student as the outputs show them: their id, and their name beside it where it is known."""
    return f"{student_id} ({name})" if name else student_id


def _as_written(cell: str) -> str:
    """A cell of names.csv as it was before inert quoted it."""
    return cell[1:] if cell.startswith("'") and cell[1:].startswith(FORMULA_STARTS) else cell
