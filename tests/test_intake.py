"""Class folders exactly as an LMS lets an instructor download them: Canvas, Moodle, Gradescope,
nbgrader and plain folders. Each is built here as the LMS lays it out; the students' ids and times
come from the LMS's own records, and complete work stages as the five stage files, byte for byte
(one batch run then grades a Canvas download end to end)."""

import csv
import json
import os
import re
import shutil
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from grader.core.stages import STAGE_MODULES
from grader.intake.layouts import detect_layout, list_students
from grader.intake.students import Student
from grader.intake.submission import STAGE_FILES, SubmittedPart, read_submission, stage_file_meant
from grader.intake.times import parse_time
from tests.grading import batch, learner_copy

STAGE1, STAGE2 = f"{STAGE_MODULES[1]}.py", f"{STAGE_MODULES[2]}.py"
BROKEN = b"raise SystemExit('an earlier upload')\n"
GRADESCOPE_METADATA = """\
submission_1001:
  :submitters:
  - :name: Jane Smith
    :sid: '2001'
    :email: jane@example.edu
  :created_at: 2024-09-01 10:00:00.123456000 -07:00
  :score: 0.0
  :status: processed
submission_1002:
  :submitters:
  - :name: Bo One
    :sid: '2002'
  - :name: Cy Two
    :sid: 2003
  :created_at: 2024-09-02 23:59:59.000000000 -07:00
submission_1003:
  :submitters:
  - :name: Di Three
    :sid:
    :email: di@example.edu
  :created_at: 2024-09-03 08:00:00.000000000 +02:00
submission_1004:
  :submitters:
  - :name: Ed Four
    :sid: '2005'
  :created_at: 2024-09-03 09:00:00.000000000 +02:00
"""


@pytest.fixture(scope="module")
def correct(tmp_path_factory) -> dict[str, bytes]:
    """The five stage files as a learner who solved every stage has them."""
    return {path.name: path.read_bytes() for path in learner_copy(tmp_path_factory.mktemp("correct")).iterdir()}


def notebook(*cells: str) -> str:
    """An nbformat 4 notebook of code cells, as Jupyter saves it (each cell's source a list of lines)."""
    return json.dumps(
        {
            "cells": [
                {
                    "cell_type": "code",
                    "execution_count": None,
                    "id": f"cell{index}",
                    "metadata": {},
                    "outputs": [],
                    "source": cell.splitlines(keepends=True),
                }
                for index, cell in enumerate(cells)
            ],
            "metadata": {},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    )


def write_notebooks(folder: Path, files: dict[str, bytes]) -> Path:
    """One notebook per stage, as the nbgrader course has them: the answer cell writes the stage file."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        stem = name.removesuffix(".py")
        (folder / f"{stem}.ipynb").write_text(notebook(f"%%writefile {name}\n{data.decode()}", f"import {stem}"))
    return folder


def submit_zip(path: Path, files: dict[str, bytes]) -> Path:
    """What `make submit` hands in: the stage files at the top of a zip."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def staged(student: Student):
    return read_submission(student.source)


def by_id(students: list[Student]) -> dict[str, Student]:
    return {student.id: student for student in students}


# Canvas -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def canvas(tmp_path_factory, correct) -> Path:
    """Canvas's "Download Submissions", unzipped: every student's files side by side."""
    root = tmp_path_factory.mktemp("canvas") / "submissions"
    root.mkdir()
    for name, data in correct.items():
        (root / f"smithjane_12345_67890_{name}").write_bytes(BROKEN if name == STAGE2 else data)
        (root / f"doejohn_LATE_23456_78901_{name}").write_bytes(data)
    (root / f"smithjane_12345_67890_{STAGE2.removesuffix('.py')}-1.py").write_bytes(correct[STAGE2])  # uploaded again
    submit_zip(root / "roeann_late_34567_89012_submission.zip", correct)
    notebooks = write_notebooks(tmp_path_factory.mktemp("bo-notebooks"), correct)
    for path in notebooks.iterdir():
        (root / f"leebo_45678_90123_{path.name}").write_bytes(path.read_bytes())
    (root / "kimsu_56789_1234_report.pdf").write_bytes(b"%PDF-1.4 my report")
    return root


def test_a_canvas_download_is_one_student_per_user_id_with_their_files_under_their_own_names(canvas, correct):
    students, skipped = list_students(canvas)
    students = by_id(students)
    assert detect_layout(canvas) == "canvas"
    assert sorted(students) == ["12345", "23456", "34567", "45678", "56789"]
    for complete in ["12345", "23456", "34567", "45678"]:
        assert staged(students[complete]).files == correct, complete
    assert {part.name for part in students["23456"].source} == STAGE_FILES  # the Canvas prefix is gone
    pdf_only = staged(students["56789"])
    assert pdf_only.files == {} and pdf_only.ignored == ["report.pdf"]
    assert [s.late_marked for s in students.values()] == [False, True, True, False, False]  # LATE and late
    assert all(s.submitted is None for s in students.values())  # the download does not say when
    # the later upload of stage 2 (Canvas's -1) is graded; the earlier one is named, not lost
    assert skipped == [
        (
            f"smithjane_12345_67890_{STAGE2}",
            f"an earlier upload of {STAGE2} than smithjane_12345_67890_{STAGE2[:-3]}-1.py",
        )
    ]


def test_a_canvas_file_whose_name_reads_as_two_users_is_no_ones(tmp_path, correct):
    """Canvas keeps a name's digits and underscores: a student named `eve_5002` (user 101) has files that read
    as user 5002's too. They are graded as no one's, with both readings named; user 5002 keeps their own."""
    for name, data in correct.items():
        (tmp_path / f"bobsmith_5002_900_{name}").write_bytes(data)
        (tmp_path / f"eve_5002_101_901_{name}").write_bytes(BROKEN)
    students, skipped = list_students(tmp_path)
    assert detect_layout(tmp_path) == "canvas" and [s.id for s in students] == ["5002"]
    assert staged(students[0]).files == correct
    assert sorted(name for name, _ in skipped) == sorted(f"eve_5002_101_901_{name}" for name in correct)
    assert {why for _, why in skipped} == {
        "its name reads as the work of Canvas user 5002 or Canvas user 101 (a display name can spell another's "
        "id): graded as no one's; rename it for the student whose work it is and grade again"
    }


def test_canvas_anonymous_grading_is_one_student_per_anonymous_id_and_keeps_late(tmp_path, correct):
    """canvas-lms ContentZipper#get_filename: under anonymous grading, ``anon_<anonymous id>`` stands
    for the name and user id, and LATE (there being no name) comes first."""
    for number, (name, data) in enumerate(correct.items()):
        (tmp_path / f"anon_Xy7Qp_7001{number}_{name}").write_bytes(data)
        (tmp_path / f"LATE_anon_bT4kz_7002{number}_{name}").write_bytes(data)
    (tmp_path / f"anon_bT4kz_70030_{STAGE2[:-3]}-1.py").write_bytes(BROKEN)  # uploaded again: the later one counts
    (tmp_path / "anon_Qz9Rw_text.html").write_text("<p>on github</p>")  # a text entry: no attachment number
    students, skipped = list_students(tmp_path)
    assert detect_layout(tmp_path) == "canvas"
    assert [(s.id, s.late_marked) for s in students] == [
        ("anon_Qz9Rw", False),
        ("anon_Xy7Qp", False),
        ("anon_bT4kz", True),
    ]
    assert staged(students[1]).files == correct
    assert staged(students[2]).files == {**correct, STAGE2: BROKEN}
    assert skipped == [
        (
            f"LATE_anon_bT4kz_7002{list(correct).index(STAGE2)}_{STAGE2}",
            f"an earlier upload of {STAGE2} than anon_bT4kz_70030_{STAGE2[:-3]}-1.py",
        )
    ]


def test_a_canvas_name_with_no_name_part_is_one_student_per_user_id_and_keeps_late(tmp_path, correct):
    """canvas-lms ContentZipper#get_filename joins [name, LATE, user id] with _: a name with no word
    character leaves it empty (``_101_5001_…``), and older anonymous downloads leave it out (``101_5001_…``)."""
    for number, (name, data) in enumerate(correct.items()):
        (tmp_path / f"_101_500{number}_{name}").write_bytes(data)
        (tmp_path / f"_LATE_102_600{number}_{name}").write_bytes(data)
        (tmp_path / f"103_700{number}_{name}").write_bytes(data)
        (tmp_path / f"LATE_104_800{number}_{name}").write_bytes(data)
        (tmp_path / f"late_105_900{number}_{name}").write_bytes(data)  # a student named late (Canvas writes lower case)
    students, skipped = list_students(tmp_path)
    assert detect_layout(tmp_path) == "canvas" and skipped == []
    assert [(s.id, s.late_marked) for s in students] == [
        ("101", False),
        ("102", True),
        ("103", False),
        ("104", True),
        ("105", False),
    ]
    assert all(staged(student).files == correct for student in students)


LITTER = {
    "__MACOSX": "._stage1_softmax.py",
    ".ipynb_checkpoints": "stage1_softmax-checkpoint.py",
    ".DS_Store": None,
    "Thumbs.db": None,
    "desktop.ini": None,
}


def add_litter(folder: Path) -> None:
    """What a Mac, Windows and Jupyter leave in a folder (a folder of litter holds a file, as unzip leaves it)."""
    for name, inside in LITTER.items():
        if inside:
            (folder / name).mkdir()
            (folder / name / inside).write_bytes(b"\x00\x05\x16\x07 resource fork")
        else:
            (folder / name).write_bytes(b"\x00")


@pytest.mark.parametrize("layout", ["canvas", "moodle", "gradescope", "nbgrader", "folders"])
def test_litter_never_decides_the_layout_nor_becomes_a_student(
    layout, canvas, moodle, gradescope, nbgrader_course, tmp_path
):
    clean = {
        "canvas": canvas,
        "moodle": moodle,
        "gradescope": gradescope,
        "nbgrader": nbgrader_course / "submitted",
        "folders": learner_copy(tmp_path / "folders" / "ada").parent,
    }[layout]
    littered = tmp_path / "littered"
    shutil.copytree(clean, littered)
    add_litter(littered)
    students, skipped = list_students(littered)
    assert detect_layout(littered) == layout
    assert [s.id for s in students] == [s.id for s in list_students(clean)[0]]
    assert {name for name, _ in skipped} - {name for name, _ in list_students(clean)[1]} == {
        name for name in LITTER
    }  # each named as skipped, as the docs promise


def test_a_submission_whose_name_starts_with_a_dot_is_named_as_skipped_not_lost(tmp_path, correct):
    for folder in ("ada", ".bob"):
        learner_copy(tmp_path / folder)
    submit_zip(tmp_path / ".cy.zip", correct)
    students, skipped = list_students(tmp_path)
    assert [s.id for s in students] == ["ada"]
    assert [name for name, _ in skipped] == [".bob", ".cy.zip"]
    assert all("starts with a dot" in why and "\n" not in why for _, why in skipped)


@pytest.mark.parametrize(
    "wrapper, inner, give",
    [
        ("export", "assignment_4242_export", "assignment_4242_export"),  # `unzip -d export/` around Gradescope's
        ("download", "cs101 submissions", "cs101 submissions"),  # a double-click unzip around Canvas's
        ("course", "submitted", None),  # an nbgrader course, without its nbgrader_config.py
    ],
)
def test_a_folder_one_level_above_a_class_is_refused_naming_the_folder_to_give(
    wrapper, inner, give, canvas, gradescope, nbgrader_course, tmp_path
):
    source = {
        "assignment_4242_export": gradescope,
        "cs101 submissions": canvas,
        "submitted": nbgrader_course / "submitted",
    }[inner]
    shutil.copytree(source, tmp_path / wrapper / inner)
    if give is None:
        shutil.copytree(source, tmp_path / wrapper / "autograded")
    expected = (
        f"holds only {inner}/, a {detect_layout(source)} download: give {tmp_path / wrapper / inner} "
        if give
        else "is an nbgrader course (it holds autograded/ and submitted/): give its submitted/ "
    )
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path / wrapper} {expected}")):
        list_students(tmp_path / wrapper)
    learner_copy(tmp_path / "one" / "ada" / "attention")  # a class of one student, in a folder of their own
    assert [s.id for s in list_students(tmp_path / "one")[0]] == ["ada"]


# Moodle -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def moodle(tmp_path_factory, correct) -> Path:
    """Moodle's "Download all submissions" with "in folders": a folder per student and submission plugin."""
    root = tmp_path_factory.mktemp("moodle") / "submissions"
    submit_zip(root / "Fay Lee_101_assignsubmission_file_" / "fay.zip", correct)
    learner_copy(root / "Gus Tan_102_assignsubmission_file_" / "attention")
    (root / "Gus Tan_102_assignsubmission_onlinetext_").mkdir()
    (root / "Gus Tan_102_assignsubmission_onlinetext_" / "onlinetext.html").write_text("<p>done</p>")
    (root / "Hal Ng_103_assignsubmission_file_").mkdir()
    (root / "Ida Po_104_assignsubmission_file_").mkdir()
    (root / "Ida Po_104_assignsubmission_file_" / "report.pdf").write_bytes(b"%PDF-1.4")
    (root / "grading worksheet.csv").write_text("not a submission")
    return root


def test_a_moodle_download_is_one_student_per_participant_and_a_zip_in_their_folder_is_opened(moodle, correct):
    students, skipped = list_students(moodle)
    students = by_id(students)
    assert detect_layout(moodle) == "moodle"
    assert sorted(students) == ["101", "102", "103", "104"]
    assert staged(students["101"]).files == correct  # the `make submit` zip in the folder
    both = staged(students["102"])  # a folder for the files and one for the online text
    assert both.files == correct and both.ignored == ["assignsubmission_onlinetext/onlinetext.html"]
    assert staged(students["103"]).files == {} and staged(students["103"]).ignored == []
    assert staged(students["104"]).ignored == ["report.pdf"]
    assert skipped == [("grading worksheet.csv", "not named as Moodle names a submission's folder or file")]


def test_a_moodle_download_without_folders_has_the_prefix_on_each_file(tmp_path, correct):
    for name, data in correct.items():
        (tmp_path / f"Jo Wu_105_assignsubmission_file_{name}").write_bytes(data)
    (tmp_path / "Jo Wu_105_assignsubmission_onlinetext_onlinetext.html").write_text("<p>done</p>")
    students, skipped = list_students(tmp_path)
    assert detect_layout(tmp_path) == "moodle" and skipped == [] and [s.id for s in students] == ["105"]
    result = staged(students[0])
    assert result.files == correct and result.ignored == ["onlinetext.html"]


def test_a_flat_moodle_file_whose_name_reads_as_two_participants_is_no_ones(tmp_path, correct):
    """A display name can spell a prefix: Eve (101) named `Eve_102_assignsubmission_file` uploads a file that
    reads as participant 102's too. Nothing says which reading Moodle wrote (a file saved from another's
    download reads alike), so the file is graded as no one's, with both readings named; the other
    participant's work is graded as it is alone."""
    for name, data in correct.items():
        (tmp_path / f"Bob Smith_102_assignsubmission_file_{name}").write_bytes(data)
    forged = f"Eve_102_assignsubmission_file_101_assignsubmission_file_{STAGE2}"
    (tmp_path / forged).write_bytes(BROKEN)
    own = f"Eve Moss_101_assignsubmission_file_Eve Moss_101_assignsubmission_file_{STAGE1}"  # saved from her own
    (tmp_path / own).write_bytes(correct[STAGE1])
    students, skipped = list_students(tmp_path)
    students = by_id(students)
    assert sorted(students) == ["101", "102"]
    assert staged(students["102"]).files == correct  # Bob's stage 2 is his, not the forged one
    assert [part.path.name for part in students["101"].source] == [own]  # both readings are hers: hers
    assert skipped == [
        (
            forged,
            "its name reads as the work of Moodle participant 102 or Moodle participant 101 (a display name "
            "can spell another's id): graded as no one's; rename it for the student whose work it is and grade again",
        )
    ]


def test_a_moodle_folder_named_by_such_a_display_name_is_the_uploaders(tmp_path, correct):
    """A folder's name ends at the plugin: only one reading of it can, so it is never ambiguous."""
    learner_copy(tmp_path / "Eve_102_assignsubmission_file_101_assignsubmission_file_" / "attention")
    learner_copy(tmp_path / "Bob Smith_102_assignsubmission_file_" / "attention")
    students, skipped = list_students(tmp_path)
    assert sorted(by_id(students)) == ["101", "102"] and skipped == []


# Gradescope ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gradescope(tmp_path_factory, correct) -> Path:
    """Gradescope's "Export Submissions": a folder per submission, and the metadata of them all."""
    root = tmp_path_factory.mktemp("gradescope") / "assignment_export"
    learner_copy(root / "submission_1001")
    write_notebooks(root / "submission_1002", correct)  # a group handed in notebooks
    submit_zip(root / "submission_1003" / "di.zip", correct)  # a zip, left zipped
    learner_copy(root / "submission_9999", stages=[1])  # not in the metadata
    (root / "submission_metadata.yml").write_text(GRADESCOPE_METADATA)
    return root


def test_a_gradescope_export_is_one_student_per_submitter_with_gradescopes_time(gradescope, correct):
    students, skipped = list_students(gradescope)
    students = by_id(students)
    assert detect_layout(gradescope) == "gradescope"
    assert sorted(students) == ["2001", "2002", "2003", "di@example.edu"]  # no sid: the email
    assert all(staged(student).files == correct for student in students.values())
    assert students["2002"].source == students["2003"].source  # a group: each member gets the grade
    pacific = timezone(-timedelta(hours=7))
    assert students["2001"].submitted == datetime(2024, 9, 1, 10, 0, 0, 123456, tzinfo=pacific)
    assert students["2003"].submitted == datetime(2024, 9, 2, 23, 59, 59, tzinfo=pacific)
    assert students["di@example.edu"].submitted == datetime(2024, 9, 3, 6, 0, tzinfo=timezone.utc)
    assert skipped == [
        ("submission_9999", "not a submission of submission_metadata.yml"),
        ("submission_1004", "in submission_metadata.yml, but not in the folder"),
    ]


def test_one_submitter_in_two_gradescope_submissions_is_a_conflict_and_bad_metadata_stops_in_one_line(tmp_path):
    learner_copy(tmp_path / "submission_1")
    learner_copy(tmp_path / "submission_2")
    record = "  :submitters:\n  - :sid: '7'\n"
    (tmp_path / "submission_metadata.yml").write_text(f"submission_1:\n{record}submission_2:\n{record}")
    (student,), _ = list_students(tmp_path)
    assert student.id == "7" and student.conflict.startswith(
        "2 submissions claim this id (submission_1 and submission_2): none is graded"
    )
    (tmp_path / "submission_metadata.yml").write_text("submission_1: [unclosed\n")
    with pytest.raises(ValueError, match=r"^submission_metadata.yml cannot be read: [^\n]+$"):
        list_students(tmp_path)


def test_an_id_is_one_spelling_of_its_name_whatever_unicode_form_the_folder_was_written_in(tmp_path, correct):
    """macOS writes José decomposed (e + U+0301); an LMS, a CSV and a keyboard write it composed (NFC)."""
    learner_copy(tmp_path / "class" / "Jose\u0301")
    submit_zip(tmp_path / "class" / "Jos\u00e9.zip", correct)
    (student,), _ = list_students(tmp_path / "class")
    assert student.id == "Jos\u00e9" and student.conflict  # one name twice over: neither is graded as José's


def test_a_zip_is_a_zip_whatever_the_case_of_its_extension(gradescope, tmp_path, correct):
    for name in ("bob.ZIP", "carl.Zip"):
        submit_zip(tmp_path / "class" / name, correct)
    students, skipped = list_students(tmp_path / "class")
    assert [s.id for s in students] == ["bob", "carl"] and skipped == []
    assert all(staged(student).files == correct for student in students)
    export = shutil.copytree(gradescope, tmp_path / "export")
    shutil.rmtree(export / "submission_1001")
    submit_zip(export / "submission_1001.ZIP", correct)
    students = by_id(list_students(export)[0])
    assert students["2001"].source == export / "submission_1001.ZIP" and staged(students["2001"]).files == correct


@pytest.mark.parametrize(
    "created_at, why",
    [
        ("2024-09-01 10:00:00.123456000 -07:00", None),
        ("not-a-date", 'submission_1 :created_at: is not a time with a UTC offset: it begins "not-a-date"'),
        (
            "2024-09-01 10:00:00",
            'submission_1 :created_at: is not a time with a UTC offset: it begins "2024-09-01 10:00:00"',
        ),
    ],
)
def test_a_gradescope_time_that_gives_no_time_is_named_with_what_it_begins_with(tmp_path, created_at, why):
    learner_copy(tmp_path / "submission_1", stages=[1])
    (tmp_path / "submission_metadata.yml").write_text(
        f"submission_1:\n  :created_at: {created_at}\n  :submitters:\n  - :sid: '7'\n"
    )
    (student,), _ = list_students(tmp_path)
    assert student.time_unread == (why and f"submission_metadata.yml {why}")
    assert (student.submitted is None) == (why is not None)


# nbgrader -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def nbgrader_course(tmp_path_factory, correct) -> Path:
    """A course as nbgrader keeps it: submitted/<student id>/<assignment>/ with notebooks and timestamp.txt."""
    course = tmp_path_factory.mktemp("nbgrader") / "course"
    (course / "nbgrader_config.py").parent.mkdir()
    (course / "nbgrader_config.py").write_text("c = get_config()\n")
    ada = write_notebooks(course / "submitted" / "ada" / "attention", correct)
    (ada / "timestamp.txt").write_text("2024-03-01 12:00:00.000000 UTC")
    (course / "submitted" / "bob" / "attention").mkdir(parents=True)  # handed in nothing
    (course / "submitted" / "bob" / "attention" / "timestamp.txt").write_text("2024-03-02 08:30:00.000000 UTC")
    di = write_notebooks(course / "submitted" / "di" / "attention", correct)
    (di / "timestamp.txt").write_text("2024-03-01T13:00:00+01:00")
    (course / "submitted" / "di" / "warmup").mkdir()  # another assignment of the course
    (course / "submitted" / "di" / "warmup" / "warmup.ipynb").write_text(notebook("print('hi')"))
    return course


def test_an_nbgrader_tree_is_one_student_per_id_with_the_notebooks_writefile_cells_as_files(nbgrader_course, correct):
    with pytest.raises(
        ValueError,
        match=r"is an nbgrader course \(it holds submitted/\): give its submitted/ or "
        r"autograded/ folder$",
    ):
        list_students(nbgrader_course)
    submitted = nbgrader_course / "submitted"
    students, skipped = list_students(submitted)
    students = by_id(students)
    assert detect_layout(submitted) == "nbgrader" and skipped == []
    assert sorted(students) == ["ada", "bob", "di"]
    assert staged(students["ada"]).files == correct == staged(students["di"]).files
    assert students["di"].source.name == "attention"  # of two assignments, the one with the stage notebooks
    assert staged(students["bob"]).files == {}
    noon = datetime(2024, 3, 1, 12, tzinfo=timezone.utc)
    assert students["ada"].submitted == noon and students["di"].submitted == noon
    assert students["bob"].submitted == datetime(2024, 3, 2, 8, 30, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    "stamp, why",
    [
        ("yesterday at noon\n", 'ada/timestamp.txt is not a time: it begins "yesterday at noon"'),
        ("", "ada/timestamp.txt is empty"),
        (" \n", "ada/timestamp.txt is empty"),
        ("x" * 5000, "ada/timestamp.txt is over 4096 bytes, not a time"),
        ("2024-03-01 12:00:00.000000 UTC", None),
    ],
)
def test_an_nbgrader_timestamp_that_gives_no_time_is_named_with_what_it_begins_with(tmp_path, stamp, why):
    ada = learner_copy(tmp_path / "submitted" / "ada", stages=[1])
    (ada / "timestamp.txt").write_text(stamp)
    (student,), _ = list_students(tmp_path / "submitted")
    assert student.time_unread == why and (student.submitted is None) == (why is not None)
    if why:  # at the student level, the assignment's folder is named too
        shutil.move(ada, tmp_path / "attention")
        shutil.move(tmp_path / "attention", ada / "attention")
        (student,), _ = list_students(tmp_path / "submitted")
        assert student.time_unread == why.replace("ada/", "ada/attention/")


def test_an_nbgrader_tree_copied_at_the_assignment_level_reads_alike(nbgrader_course, tmp_path, correct):
    """Each student's folder holding the assignment's files itself, as `cp -r submitted/*/attention` leaves them."""
    ada = write_notebooks(tmp_path / "attention" / "ada", correct)
    (ada / "timestamp.txt").write_text("2024-03-01 12:00:00.000000 UTC")
    students, _ = list_students(tmp_path / "attention", "nbgrader")
    assert [(s.id, s.source) for s in students] == [("ada", ada)]
    assert staged(students[0]).files == correct and students[0].submitted.hour == 12


# Folders and notebooks anywhere -------------------------------------------------------------


def test_a_folder_per_student_holding_only_their_zip_stages_the_zip(tmp_path, correct):
    submit_zip(tmp_path / "class" / "ada" / "ada.zip", correct)
    (tmp_path / "class" / "bo").mkdir()
    students, _ = list_students(tmp_path / "class")
    assert detect_layout(tmp_path / "class") == "folders"
    assert [staged(student).files for student in students] == [correct, {}]


def test_a_zip_whose_folders_are_written_with_backslashes_reads_them_as_folders(tmp_path, correct):
    """Windows PowerShell 5's Compress-Archive writes ``attention\\stage1_softmax.py``."""
    stage1 = f"{STAGE_MODULES[1]}.py"
    with zipfile.ZipFile(tmp_path / "ada.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("attention\\", b"")  # a folder's own record
        for name, data in correct.items():
            archive.writestr(f"attention\\{name}", data)
        archive.writestr(f"attention\\__MACOSX\\{STAGE2}", BROKEN)  # litter, as on any zip
        archive.writestr(f"..\\..\\old\\{stage1}", BROKEN)  # a name, never a path: deeper, so it loses
    result = read_submission(tmp_path / "ada.zip")
    assert result.files == correct
    assert result.ignored == [f"attention/__MACOSX/{STAGE2}", f"../../old/{stage1}"]
    assert not (tmp_path.parent / "old").exists()


def test_a_py_file_at_a_notebooks_depth_or_shallower_wins_over_its_writefile_cell(tmp_path, correct):
    stage1 = f"{STAGE_MODULES[1]}.py"
    work = tmp_path / "work"
    (work / "deeper").mkdir(parents=True)
    (work / stage1).write_bytes(b"# the file\n")
    (work / STAGE2.replace(".py", ".ipynb")).write_text(
        notebook(
            f"%%writefile {stage1}\n# the notebook\n",
            f"%%writefile {STAGE2}\nfirst = 1\n",
            f"%%writefile -a {STAGE2}\nsecond = 2",
        )
    )
    (work / "deeper" / STAGE2).write_bytes(b"# deeper than the notebook\n")
    result = read_submission(work)
    assert result.files == {stage1: b"# the file\n", STAGE2: b"first = 1\nsecond = 2\n"}
    assert result.ignored == [f"deeper/{STAGE2}"]


def test_ipythons_file_alias_writes_as_writefile_does(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / STAGE2.replace(".py", ".ipynb")).write_text(
        notebook(f"%%file {STAGE2}\nfirst = 1\n", f"%%file --append {STAGE2}\nsecond = 2")
    )
    assert read_submission(work).files == {STAGE2: b"first = 1\nsecond = 2\n"}


def test_a_broken_notebook_or_zip_inside_a_submission_costs_only_itself_in_one_line(tmp_path, correct):
    work = learner_copy(tmp_path / "work", stages=[1])
    (work / "answers.ipynb").write_text('{"cells": [')
    (work / "nested.ipynb").write_text("[" * 100_000 + "]" * 100_000)
    (work / "old.zip").write_bytes(b"PK\x03\x04 not really a zip")
    submit_zip(tmp_path / "inner.zip", correct)
    submit_zip(work / "outer.zip", {"inner.zip": (tmp_path / "inner.zip").read_bytes()})
    (work / ".ipynb_checkpoints").mkdir()
    (work / ".ipynb_checkpoints" / "answers-checkpoint.ipynb").write_text(notebook(f"%%writefile {STAGE2}\nx = 1"))
    result = read_submission(work)
    assert list(result.files) == [f"{STAGE_MODULES[1]}.py"]
    reasons = dict(match.groups() for line in result.ignored if (match := re.fullmatch(r"(.*?) \((.*)\)", line)))
    assert reasons["answers.ipynb"].startswith("not a notebook: ")
    assert reasons["nested.ipynb"] == "not a notebook: nested too deep"
    assert reasons["old.zip"].startswith("truncated or damaged zip")
    assert reasons["outer.zip/inner.zip"] == "a zip inside a zip, not opened"
    assert ".ipynb_checkpoints/answers-checkpoint.ipynb" in result.ignored
    assert all("\n" not in line for line in result.ignored)


def test_a_submission_that_is_only_damaged_zips_is_unreadable_not_empty(tmp_path):
    """An LMS that stores the hand-in as a zip of its own (Canvas, Moodle): a damaged one is what the student handed
    in, unreadable as a .zip given alone is, not a hand-in that holds no stage file."""
    (tmp_path / "damaged.zip").write_bytes(b"PK\x03\x04 not really a zip")
    (tmp_path / "notes.txt").write_text("my notes")
    alone = read_submission((SubmittedPart("submission.zip", tmp_path / "damaged.zip"),))
    assert alone.files == {} and (alone.problem or "").startswith("submission.zip (truncated or damaged zip")
    beside = read_submission(
        (SubmittedPart("submission.zip", tmp_path / "damaged.zip"), SubmittedPart("notes.txt", tmp_path / "notes.txt"))
    )
    assert beside.problem is None and "notes.txt" in beside.ignored  # something else was handed in: no stage file


def test_the_zips_inside_a_submission_are_bounded_in_number_and_in_files_in_all(tmp_path):
    work = tmp_path / "work"
    for index, count in enumerate([6_000, 6_000, 1, 1, 1]):
        submit_zip(work / f"z{index}.zip", {f"note{n}.txt": b"" for n in range(count)})
    result = read_submission(work)
    assert result.files == {} and sum(line.startswith("z0.zip/") for line in result.ignored) == 6_000
    assert sorted(line for line in result.ignored if not line.startswith("z0.zip/")) == [
        "z1.zip (not opened: over 10000 files in the submission)",  # its listing counts as one of the four
        "z2.zip/note0.txt",
        "z3.zip/note0.txt",
        "z4.zip (not opened: only 4 zips of a submission are)",
    ]


def test_the_parts_of_a_flat_download_keep_every_defence(tmp_path, correct):
    target = learner_copy(tmp_path / "elsewhere", stages=[1]) / f"{STAGE_MODULES[1]}.py"
    (tmp_path / "linked.py").symlink_to(target)
    os.link(target, tmp_path / "hard.py")
    submit_zip(tmp_path / "zipped.zip", correct)
    (tmp_path / "linked.zip").symlink_to(tmp_path / "zipped.zip")
    parts = (
        SubmittedPart(f"{STAGE_MODULES[1]}.py", tmp_path / "linked.py"),
        SubmittedPart(STAGE2, tmp_path / "hard.py"),
        SubmittedPart("submission.zip", tmp_path / "linked.zip"),
    )
    result = read_submission(parts)
    assert result.files == {}
    assert result.ignored == [
        f"{STAGE_MODULES[1]}.py (a symbolic link)",
        f"{STAGE2} (a hard link)",
        "submission.zip (a symbolic link)",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-03-01 12:00:00.000000 UTC", datetime(2024, 3, 1, 12, tzinfo=timezone.utc)),  # nbgrader's own format
        ("2024-03-01 13:00:00.5+01:00", datetime(2024, 3, 1, 12, 0, 0, 500000, tzinfo=timezone.utc)),
        ("2024-03-01 05:00:00.123456789 -07:00", datetime(2024, 3, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)),
        ("2024-03-01 13:00:00 Europe/Berlin", datetime(2024, 3, 1, 12, tzinfo=timezone.utc)),
        ("2024-03-01 12:00:00", datetime(2024, 3, 1, 12, tzinfo=timezone.utc)),  # no zone: nbgrader reads UTC
        ("yesterday", None),
    ],
)
def test_times_are_read_as_the_lms_writes_them(text, expected):
    assert parse_time(text, timezone.utc) == expected


def test_a_time_without_a_zone_is_unknown_where_none_is_assumed():
    assert parse_time("2024-03-01 12:00:00", None) is None
    assert parse_time("2024-03-01 12:00:00 JST", None) is None  # an abbreviation no zone database holds


# One class, graded end to end ---------------------------------------------------------------


def test_a_canvas_download_grades_complete_work_in_full_and_names_the_submissions_without_stage_files(
    tmp_path, correct
):
    """One batch: the files as uploaded (one re-uploaded), a zip, notebooks, and a student who sent a PDF."""
    root = tmp_path / "canvas"
    root.mkdir()
    for name, data in correct.items():
        (root / f"smithjane_12345_67890_{name}").write_bytes(BROKEN if name == STAGE2 else data)
    (root / f"smithjane_12345_67890_{STAGE2[:-3]}-1.py").write_bytes(correct[STAGE2])
    submit_zip(root / "roeann_LATE_34567_89012_submission.zip", correct)
    for path in write_notebooks(tmp_path / "notebooks", correct).iterdir():
        (root / f"leebo_45678_90123_{path.name}").write_bytes(path.read_bytes())
    (root / "kimsu_56789_1234_report.pdf").write_bytes(b"%PDF-1.4")
    result = batch(root, tmp_path / "out", "--workers", "2")
    with open(tmp_path / "out" / "grades.csv", newline="") as handle:
        rows = {row["student_id"]: row for row in csv.DictReader(handle)}
    assert sorted(rows) == ["12345", "34567", "45678", "56789"]
    for complete in ["12345", "34567", "45678"]:
        assert float(rows[complete]["score"]) == float(rows[complete]["max_score"]) > 0, rows[complete]
    assert rows["56789"]["score"] == "0" and rows["56789"]["flags"] == "no-stage-files: found report.pdf"
    assert "grader batch: layout canvas, 4 students" in result.stderr
    assert "grader batch: 1 submission had no stage file: 56789 (flag no-stage-files)" in result.stderr


@pytest.mark.parametrize(
    "name, meant",
    [
        ("stage3_weight_transfer (1).py", "stage3_weight_transfer.py"),  # a browser's second download
        ("Stage4_Causal_Attention.py", "stage4_causal_attention.py"),
        ("stage1-softmax.py", "stage1_softmax.py"),
        ("stage2_self_attention copy 2.py", "stage2_self_attention.py"),
        ("stage5_multihead_attention-1.py", "stage5_multihead_attention.py"),
        ("stage1_softmax.py", None),  # its own name: no renaming
        ("stage1_softmax.py.txt", None),
        ("stage1_softmax_old.py", None),  # another file, not a copy
        ("softmax.py", None),
    ],
)
def test_a_stage_file_under_a_near_name_is_known_for_what_it_stands_for(name, meant):
    assert stage_file_meant(name) == meant


def test_a_near_name_is_graded_as_its_stage_file_only_where_the_file_itself_is_missing(tmp_path, correct):
    submission = tmp_path / "work"
    submission.mkdir()
    (submission / "stage3_weight_transfer (1).py").write_bytes(correct["stage3_weight_transfer.py"])
    (submission / "Stage4_Causal_Attention.py").write_bytes(correct["stage4_causal_attention.py"])
    (submission / "stage1_softmax (1).py").write_bytes(BROKEN)  # the file itself is there, deeper: it wins
    (submission / "sub").mkdir()
    (submission / "sub" / "stage1_softmax.py").write_bytes(correct["stage1_softmax.py"])
    staged = read_submission(submission)
    assert staged.files == {
        name: correct[name] for name in ("stage1_softmax.py", "stage3_weight_transfer.py", "stage4_causal_attention.py")
    }
    assert staged.renamed == [
        "Stage4_Causal_Attention.py as stage4_causal_attention.py",
        "stage3_weight_transfer (1).py as stage3_weight_transfer.py",
    ]
    assert staged.ignored == ["stage1_softmax (1).py"]


def test_a_class_is_told_who_lacks_stage_files_whose_were_renamed_unreadable_or_second_copies(tmp_path):
    submissions = tmp_path / "submissions"
    renamed = learner_copy(submissions / "ada")
    (renamed / "stage3_weight_transfer.py").rename(renamed / "stage3_weight_transfer (1).py")
    learner_copy(submissions / "bo", stages=[1, 2])
    (submissions / "ada (1).zip").write_bytes(b"PK\x03\x04 a download cut short")  # a browser's second download
    notepad = learner_copy(submissions / "cy", stages=[1]) / "stage1_softmax.py"  # saved as Notepad's "Unicode"
    notepad.write_bytes(notepad.read_text().encode("utf-16"))
    result = batch(submissions, tmp_path / "out", "--workers", "2")
    with open(tmp_path / "out" / "grades.csv", newline="") as handle:
        rows = {row["student_id"]: row for row in csv.DictReader(handle)}
    assert rows["ada"]["score"] == "100"
    assert rows["ada"]["flags"] == "renamed: stage3_weight_transfer (1).py as stage3_weight_transfer.py"
    assert rows["bo"]["score"] == "40" and rows["bo"]["flags"] == (
        "missing: stage3_weight_transfer.py, stage4_causal_attention.py, stage5_multihead_attention.py"
    )
    assert (
        "grader batch: 2 submissions lack some stage files, and score nothing for those stages: bo, cy "
        "(flag missing)" in result.stderr
    )
    assert "had a stage file under a near name, graded as the file it stands for: ada (flag renamed)" in result.stderr
    assert (
        "grader batch: 1 submission could not be read (or two submissions claim its id), and scores nothing: ada (1) (flag unreadable)"
        in result.stderr
    )
    assert (
        "grader batch: 1 submission named as a second download of another, graded apart: ada (1) beside ada; "
        "check whether they are one student's" in result.stderr
    )
    utf16 = json.loads((tmp_path / "out" / "students" / "cy.json").read_text())["stages"][0]["checks"][0]["message"]
    assert utf16 == (
        "stage1_softmax.py was saved as UTF-16 text (it begins with UTF-16's byte order mark), which "
        "Python does not read: save it as UTF-8 text (in Notepad: Save As, Encoding UTF-8), then hand "
        "it in again"
    )
    assert ":None" not in (tmp_path / "out" / "students" / "cy.txt").read_text()


def test_a_notebooks_lines_reach_shlex_only_as_writefile_lines_a_file_name_fits_in(monkeypatch):
    """shlex's time grows with a word's length squared (red team round 9: one 1 MiB first line held a batch for
    minutes): only a line that starts with the magic, and no longer than MAGIC_LINE_CHARS, is split; appends add
    up in order."""
    import shlex

    from grader.intake import notebook_files

    split, seen = shlex.split, []
    monkeypatch.setattr(shlex, "split", lambda line, *a, **k: (seen.append(len(line)), split(line, *a, **k))[1])

    def cell(source: str) -> dict:
        return {"cell_type": "code", "source": source, "metadata": {}, "outputs": [], "execution_count": None}

    long = "x" * (notebook_files.MAGIC_LINE_CHARS + 1)
    cells = [cell(long + "\n"), cell(f"%%writefile {long}\n"), cell("%%writefile stage1_softmax.py\na = 1")]
    cells += [cell("%%writefile -a stage1_softmax.py\nb = 2\n"), cell("%%file -a stage1_softmax.py\nc = 3")]
    notebook = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    written = notebook_files.written_files(json.dumps(notebook).encode())
    assert written == {"stage1_softmax.py": "a = 1\nb = 2\nc = 3\n"}
    assert seen and max(seen) <= notebook_files.MAGIC_LINE_CHARS, seen
