"""python -m grader.cli.lms_export: grades.csv as Canvas's and Moodle's importers read a file.

The formats, from the LMSs' own code: Canvas's gradebook importer (canvas-lms
app/models/gradebook_importer.rb) wants a header whose first cells are Student and ID, then SIS
User ID and SIS Login ID, Section last of the student columns, the assignments after; a row whose
first cell holds "Points Possible"; and takes a blank grade as "no change". Its exporter
(lib/gradebook_exporter.rb) writes those columns in that order, "    Points Possible", and no
byte order mark unless a user turns one on. Moodle's CSV grade import
(grade/import/csv/classes/load_data.php, lib/csvlib.class.php) reads UTF-8 (dropping a BOM) with
" as the quote, refuses a file whose rows have other numbers of cells than its header, maps each
row's user through one column (email address, username, ID number or user id) and aborts the
whole import on a row it cannot map; "" or "-" is no grade.
"""

import csv
import io
from pathlib import Path

import pytest

from grader.cli import lms_export as lms_export_command
from tests.grading import REPO
from tests.grading import make as run_make

GRADES = """student_id,score,max_score,stage1,stage2,stage3,stage4,stage5,flags
12345,95.0,100,20,20,20,20,15,
23456,92.5,100,20,20,20,20,12.5,
34567,,,,,,,,not graded
'=45678,100.0,100,20,20,20,20,20,
99999,50.0,100,10,10,10,10,10,
"""
ROSTER = """student_id,Student,ID,SIS User ID,SIS Login ID,Section,Email address
12345,"Lee, Fay",12345,S-1,flee,Section A,fay@example.edu
23456,José Núñez,23456,S-2,jnunez,Section A,jose@example.edu
34567,Sam Ng,34567,S-3,sng,Section B,sam@example.edu
=45678,=HYPERLINK(x),45678,S-4,hyper,Section B,hyper@example.edu
56789,No Show,56789,S-5,noshow,Section B,
"""


def export(
    tmp_path: Path, lms: str, *options: str, grades: str = GRADES, roster: str = ROSTER, capsys
) -> tuple[int, bytes, str]:
    (tmp_path / "grades.csv").write_text(grades, encoding="utf-8")
    (tmp_path / "roster.csv").write_text(roster, encoding="utf-8")
    out = tmp_path / f"{lms}.csv"
    out.unlink(missing_ok=True)
    status = lms_export_command.main(
        [
            lms,
            "--grades",
            str(tmp_path / "grades.csv"),
            "--roster",
            str(tmp_path / "roster.csv"),
            "--out",
            str(out),
            *options,
        ]
    )
    return status, out.read_bytes() if out.exists() else b"", capsys.readouterr().err


def rows(data: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))


def test_canvas_file_has_canvas_columns_a_points_possible_row_and_a_row_per_roster_student(tmp_path, capsys):
    status, data, stderr = export(tmp_path, "canvas", "--assignment", "Attention exercises (4242)", capsys=capsys)
    assert status == 0, stderr
    assert rows(data) == [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Attention exercises (4242)"],
        ["    Points Possible", "", "", "", "", "100"],
        ["Lee, Fay", "12345", "S-1", "flee", "Section A", "95"],
        ["José Núñez", "23456", "S-2", "jnunez", "Section A", "92.5"],
        ["Sam Ng", "34567", "S-3", "sng", "Section B", ""],  # graded but no score: blank, not 0
        ["'=HYPERLINK(x)", "45678", "S-4", "hyper", "Section B", "100"],  # a name is text; ids stay exact
        ["No Show", "56789", "S-5", "noshow", "Section B", ""],
    ]
    assert b'"Lee, Fay",12345' in data  # the comma in a sortable name is quoted, not a new cell
    assert data.startswith(b"Student,") and "José Núñez".encode() in data  # UTF-8, no byte order mark
    assert b"\r" not in data
    assert "no grade for 34567 (Sam Ng): left blank" in stderr
    assert "no grade for 56789 (No Show): left blank" in stderr
    assert "99999 is in" in stderr and "not in the roster: not exported" in stderr
    assert "3 grade(s) of 5 roster student(s)" in stderr


def test_moodle_file_maps_users_by_one_column_and_leaves_out_a_row_moodle_could_not_map(tmp_path, capsys):
    status, data, stderr = export(tmp_path, "moodle", capsys=capsys)
    assert status == 0, stderr
    assert rows(data) == [
        ["Email address", "Attention exercises"],
        ["fay@example.edu", "95"],
        ["jose@example.edu", "92.5"],
        ["sam@example.edu", ""],
        ["hyper@example.edu", "100"],
    ]
    assert len({len(row) for row in rows(data)}) == 1  # every row as wide as the header
    assert not data.startswith(b"\xef\xbb\xbf")
    assert "56789 (No Show) has no Email address in the roster: left out" in stderr
    assert "99999 is in" in stderr


def test_moodle_grades_out_of_more_than_a_grade_items_maximum_are_warned_of_in_one_line(tmp_path, capsys):
    """Moodle's import caps a grade at its grade item's maximum, 100 for a new item: 110 would import as 100."""
    out_of_110 = GRADES.replace(",100,", ",110,").replace("95.0,", "105.0,")
    status, data, stderr = export(tmp_path, "moodle", grades=out_of_110, capsys=capsys)
    assert status == 0 and ["fay@example.edu", "105"] in rows(data)
    warning = [line for line in stderr.splitlines() if "maximum" in line]
    assert warning == [
        "lms_export: grades are out of 110, and Moodle's import caps a grade at its grade item's "
        "maximum (a new item's is 100): set the item's maximum grade to 110, or pass "
        "--points-possible 100 to scale"
    ]
    status, data, stderr = export(tmp_path, "moodle", "--points-possible", "100", grades=out_of_110, capsys=capsys)
    assert status == 0 and ["fay@example.edu", "95.45"] in rows(data) and "maximum" not in stderr
    assert "maximum" not in export(tmp_path, "moodle", capsys=capsys)[2]  # out of 100: nothing to say


def test_moodle_grades_above_the_points_possible_by_extra_credit_are_warned_of_in_one_line(tmp_path, capsys):
    """Bonus stages as extra credit: 115 of 100 scaled to --points-possible 100 stays 115, which Moodle's import
    caps at the item's maximum unless the site allows unlimited grades."""
    extra = GRADES.replace("95.0,100,", "115.0,100,")
    status, data, stderr = export(tmp_path, "moodle", "--points-possible", "100", grades=extra, capsys=capsys)
    assert status == 0 and ["fay@example.edu", "115"] in rows(data)
    warning = [line for line in stderr.splitlines() if "extra credit" in line]
    assert len(warning) == 1 and "1 grade(s) pass the points possible, 100" in warning[0]
    assert "fay@example.edu" in warning[0] and "unlimited grades" in warning[0]
    assert "extra credit" not in export(tmp_path, "moodle", capsys=capsys)[2]


def test_moodle_identifier_is_any_roster_column_and_a_missing_one_is_one_line(tmp_path, capsys):
    status, data, stderr = export(
        tmp_path, "moodle", "--identifier", "SIS Login ID", "--assignment", "Lab 3", capsys=capsys
    )
    assert status == 0, stderr
    assert rows(data)[:2] == [["SIS Login ID", "Lab 3"], ["flee", "95"]]
    status, data, stderr = export(tmp_path, "moodle", "--identifier", "Username", capsys=capsys)
    assert status == 2 and data == b"" and stderr.count("\n") == 1 and "no 'Username' column" in stderr


def test_points_possible_scales_scores_and_final_wins_over_score(tmp_path, capsys):
    grades = (
        "student_id,score,max_score,stage1,stage2,stage3,stage4,stage5,submitted,late_penalty,final,flags\n"
        "12345,95.0,100,20,20,20,20,15,2025-03-01T10:00:00+00:00,10,85.5,late\n"
        "23456,100.0,100,20,20,20,20,20,2025-02-28T10:00:00+00:00,0,100.0,\n"
    )
    status, data, stderr = export(tmp_path, "canvas", "--points-possible", "10", grades=grades, capsys=capsys)
    assert status == 0, stderr
    assert rows(data)[1][-1] == "10"
    assert [row[-1] for row in rows(data)[2:4]] == ["8.55", "10"]


def test_mixed_point_tables_are_refused_unless_points_possible_scales_each_row(tmp_path, capsys):
    grades = GRADES.replace("99999,50.0,100,", "99999,55.0,110,")
    status, data, stderr = export(tmp_path, "canvas", grades=grades, capsys=capsys)
    assert status == 2 and data == b"" and "mixes point tables (max_score 100, 110)" in stderr
    status, data, stderr = export(
        tmp_path,
        "canvas",
        "--points-possible",
        "50",
        grades=grades,
        roster=ROSTER + "99999,Max Score,99999,S-9,max,Section C,max@example.edu\n",
        capsys=capsys,
    )
    assert status == 0, stderr
    assert rows(data)[-1][-1] == "25"  # 55 of 110, as 50 points


def test_a_canvas_gradebook_export_is_a_roster_as_it_is(tmp_path, capsys):
    """Canvas names students in its downloads by their Canvas ID: its own export maps them without a student_id."""
    canvas_export = (
        "Student,ID,SIS User ID,SIS Login ID,Section,Lab 1 (11),Current Score\n"
        ",,,,,Muted,\n"
        "    Points Possible,,,,,10,(read only)\n"
        '"Lee, Fay",12345,S-1,flee,Section A,8,80\n'
        "Test Student,777,,,Section A,,\n"
    )
    status, data, stderr = export(tmp_path, "canvas", roster=canvas_export, capsys=capsys)
    assert status == 0, stderr
    assert rows(data)[2:] == [
        ["Lee, Fay", "12345", "S-1", "flee", "Section A", "95"],
        ["Test Student", "777", "", "", "Section A", ""],
    ]
    assert "roster line" not in stderr  # the Muted and Points Possible rows are no students without an id
    assert "no grade for 777 (Test Student): left blank" in stderr


def test_roster_problems_are_one_line_each(tmp_path, capsys):
    no_id = "Student,Section\nFay,A\n"
    status, _, stderr = export(tmp_path, "canvas", roster=no_id, capsys=capsys)
    assert status == 2 and stderr.count("\n") == 1 and "has no student_id column" in stderr
    twice = ROSTER + "12345,Fay Again,12345,S-1,flee,Section A,fay@example.edu\n"
    status, _, stderr = export(tmp_path, "canvas", roster=twice, capsys=capsys)
    assert status == 2 and "12345 is in the roster twice" in stderr
    unmatched = "student_id,Student,SIS Login ID,Section\n12345,Fay,,A\n23456,José,jnunez,A\n"
    status, data, stderr = export(tmp_path, "canvas", roster=unmatched, capsys=capsys)
    assert status == 0 and [row[0] for row in rows(data)[2:]] == ["José"]
    assert "12345 (Fay) has no ID, SIS User ID, SIS Login ID in the roster: Canvas cannot match them" in stderr
    status, data, stderr = export(
        tmp_path, "canvas", roster=ROSTER + ",Ann Onymous,,,,Section C,ann@example.edu\n", capsys=capsys
    )
    assert status == 0 and "Ann Onymous" not in data.decode() and "roster line 7 has no student_id: left out" in stderr
    status, _, stderr = export(tmp_path, "canvas", grades="name,points\nfay,3\n", capsys=capsys)
    assert status == 2 and "is it a grades.csv?" in stderr


@pytest.mark.parametrize("lms", ["canvas", "moodle"])
def test_make_targets_run_this_module_on_outs_grades(lms):
    dry_run = run_make(REPO, "-n", f"{lms}-export", "OUT=grades", "ROSTER=roster.csv")
    assert dry_run.returncode == 0
    assert (
        f"-m grader.cli.lms_export {lms} --grades grades/grades.csv --roster roster.csv --out grades/{lms}-import.csv"
    ) in dry_run.stdout


def test_a_grade_under_a_flag_that_questions_it_is_exported_and_named(tmp_path, capsys):
    flagged = (
        GRADES.replace("99999,50.0,100,10,10,10,10,10,\n", "99999,95.0,100,20,20,20,20,15,ignored: notes.md\n")
        + "56789,0,100,0,0,0,0,0,no-stage-files: found report.pdf\n"
    )
    status, data, said = export(tmp_path, "canvas", grades=flagged, capsys=capsys)
    assert status == 0 and [row[5] for row in rows(data) if row[1] == "56789"] == ["0"]
    assert "56789 (No Show) exported with 0, flagged no-stage-files: found report.pdf: check before importing" in said
    assert "notes.md" not in said  # a file left out beside complete work questions nothing
