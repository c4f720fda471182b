"""Feedback back to the LMS, each file in the shape the LMS's own code reads:

- Moodle's grading worksheet ("Download grading worksheet", mod/assign/gradingtable.php's columns): read as
  the roster (its Identifier "Participant 101" is the participant number the batch names students by) and
  written back with Grade and Feedback comments, every other cell as it was, for "Upload grading worksheet";
- Moodle's "Upload multiple feedback files in a zip" (mod/assign/feedback/file/importziplib.php): a path part
  split at its first four underscores gives the participant number second, then the plugin type and name;
- Canvas: a comment per Canvas user id, for the submissions API's comment[text_comment].
"""

import csv
import io
import zipfile
from pathlib import Path

from grader.cli import lms_export as lms_export_command

GRADES = """student_id,score,max_score,stage1,stage2,stage3,stage4,stage5,final,flags
101,95,100,20,20,20,20,15,95,
102,80,100,20,20,20,20,0,72,
103,,,,,,,,,not graded
"""
WORKSHEET_COLUMNS = [
    "Identifier",
    "Full name",
    "Email address",
    "Status",
    "Grade",
    "Maximum Grade",
    "Grade can be changed",
    "Last modified (submission)",
    "Last modified (grade)",
    "Feedback comments",
]
WORKSHEET = [
    ["Participant 101", "Ada Lovelace", "ada@example.edu", "Submitted for grading", "", "10.00", "Yes",
     "Monday, 13 November 2023, 4:57 PM", "-", ""],
    ["Participant 102", "Bo_Li", "bo@example.edu", "Submitted for grading", "", "10.00", "Yes",
     "Tuesday, 14 November 2023, 9:02 AM", "-", ""],
    ["Participant 103", "Cy Ng", "cy@example.edu", "No submission", "", "10.00", "Yes", "-", "-", ""],
]  # fmt: skip
FEEDBACK = {"101": "stage 5 · 1 check failed: 0/5\n    hint [wrong-scaling]: x < y\n", "102": "all right\n"}


def export(tmp_path: Path, fmt: str, roster_rows: list[list[str]], columns: list[str], out_name: str, capsys):
    out = tmp_path / "grades"
    (out / "students").mkdir(parents=True, exist_ok=True)
    (out / "grades.csv").write_text(GRADES)
    for student_id, text in FEEDBACK.items():
        (out / "students" / f"{student_id}.txt").write_text(text)
    roster = tmp_path / "roster.csv"
    with roster.open("w", newline="", encoding="utf-8-sig") as handle:  # Moodle writes a byte order mark
        csv.writer(handle).writerows([columns, *roster_rows])
    target = tmp_path / out_name
    status = lms_export_command.main(
        [fmt, "--grades", str(out / "grades.csv"), "--roster", str(roster), "--out", str(target)]
    )
    return status, target, capsys.readouterr().err


def test_moodles_grading_worksheet_comes_back_with_grades_and_feedback_and_nothing_else_changed(tmp_path, capsys):
    status, target, said = export(tmp_path, "moodle-worksheet", WORKSHEET, WORKSHEET_COLUMNS, "graded.csv", capsys)
    assert status == 0, said
    header, *rows = list(csv.reader(io.StringIO(target.read_text(encoding="utf-8"), newline="")))
    assert header == WORKSHEET_COLUMNS
    ada, bo, cy = rows
    assert ada[4] == "9.5" and bo[4] == "7.2"  # final, scaled to the Maximum Grade of the row
    # the feedback counts the grader's points: a line first says how the worksheet's Grade was reached
    scaled = "Recorded here as 9.5 of 10: 95 of the 100 points the grader gives, scaled.\n\n"
    assert ada[9] == f"<pre>{scaled}stage 5 · 1 check failed: 0/5\n    hint [wrong-scaling]: x &lt; y\n</pre>"
    assert (
        bo[9] == "<pre>Recorded here as 7.2 of 10: 72 of the 100 points the grader gives, scaled.\n\nall right\n</pre>"
    )
    assert cy[4] == "" and cy[9] == ""  # no grade: left as Moodle gave it
    for before, after in zip(WORKSHEET, rows):  # every cell but Grade and Feedback comments, as downloaded
        assert [c for i, c in enumerate(after) if i not in (4, 9)] == [
            c for i, c in enumerate(before) if i not in (4, 9)
        ]
    assert "no grade for 103: left blank" in said
    assert "2 grade(s) of 3 roster student(s)" in said


def test_moodles_worksheet_is_a_roster_for_the_grade_import_too(tmp_path, capsys):
    status, target, said = export(tmp_path, "moodle", WORKSHEET, WORKSHEET_COLUMNS, "moodle.csv", capsys)
    assert status == 0, said
    assert target.read_text().splitlines()[:3] == [
        "Email address,Attention exercises",
        "ada@example.edu,95",
        "bo@example.edu,72",
    ]


def moodle_participant(path_part: str) -> tuple[str, str, str] | None:
    """What Moodle's importer reads of a path part: explode('_', part, 5), at least 4 pieces, the second a
    number (the participant), then the plugin's type and name."""
    info = path_part.split("_", 4)
    if len(info) < 4 or not info[1].isdigit():
        return None
    return info[1], info[2], info[3]


def test_moodles_feedback_zip_names_each_participant_as_its_importer_reads_a_folder(tmp_path, capsys):
    status, target, said = export(tmp_path, "moodle-feedback", WORKSHEET, WORKSHEET_COLUMNS, "feedback.zip", capsys)
    assert status == 0, said
    with zipfile.ZipFile(target) as archive:
        entries = {name: archive.read(name).decode() for name in archive.namelist()}
    read = {moodle_participant(name.split("/")[0]): (name.split("/", 1)[1], text) for name, text in entries.items()}
    assert read == {
        ("101", "assignfeedback", "file"): ("feedback.txt", FEEDBACK["101"]),
        ("102", "assignfeedback", "file"): ("feedback.txt", FEEDBACK["102"]),  # "Bo_Li" would split wrongly
    }
    first = target.read_bytes()
    export(tmp_path, "moodle-feedback", WORKSHEET, WORKSHEET_COLUMNS, "feedback.zip", capsys)
    assert target.read_bytes() == first  # the same feedback, the same zip
    assert "2 feedback file(s) of 3 roster student(s)" in said


def test_canvas_comments_give_each_canvas_user_their_feedback(tmp_path, capsys):
    columns = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    roster = [
        ["Lovelace, Ada", "101", "S-1", "ada", "A"],
        ["Li, Bo", "102", "S-2", "bo", "A"],
        ["Ng, Cy", "103", "", "", "A"],
    ]
    status, target, said = export(tmp_path, "canvas-comments", roster, columns, "comments.csv", capsys)
    assert status == 0, said
    header, *rows = list(csv.reader(io.StringIO(target.read_text(), newline="")))
    assert header == ["user_id", "comment"]
    assert rows == [["101", FEEDBACK["101"]], ["102", FEEDBACK["102"]]]
