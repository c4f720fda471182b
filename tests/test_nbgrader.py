"""The nbgrader course, proven with the real nbgrader CLI: release, zip_collect of a Canvas download,
autograde, feedback, export, and the reconciliation with grade-all.

Slow (nbgrader starts a kernel per notebook, about two minutes in all): `make test` runs these;
skip them locally with `-m "not nbgrader"`.
"""

import csv
import logging
import re
import shutil
import subprocess
import sys
import zipfile

import nbformat
import pytest
from nbgrader.api import Gradebook
from nbgrader.apps import ZipCollectApp
from nbgrader.coursedir import CourseDirectory
from nbgrader.nbgraderformat.v3 import MetadataValidatorV3
from nbgrader.utils import compute_checksum
from traitlets.config.loader import PyFileConfigLoader

from grader.authoring.nbgrader import course as nbgrader_course
from grader.authoring.nbgrader.course import (
    ASSIGNMENT,
    GENERATED_CONFIG,
    INSTRUCTOR_CONFIG,
    answer_cell,
    answer_cell_source,
    answer_source,
    autograder_cell_ids,
    hidden_cell_notice,
    stage_points,
    write_course,
)
from grader.authoring.nbgrader.demo import grade, nbgrader, prepare, solved_answers, submit
from grader.authoring.nbgrader.lms import CanvasCollector, MoodleCollector
from grader.authoring.nbgrader.reconcile import (
    GradedCell,
    graded_cell_causes,
    shadowing_causes,
    stage_file_causes,
    tampering_causes,
    working_directory_causes,
)
from grader.authoring.stubs import BEGIN, END
from grader.core.course import course_stages
from grader.core.points import STAGE_POINTS, points_in_use
from grader.core.stages import STAGE_MODULES
from grader.judge.plugin import planned_checks
from tests.grading import MUTANTS, REPO, learner_copy, stage_scores
from tests.grading import grade as grade_folder

pytestmark = pytest.mark.nbgrader

COURSE_MODULES = {stage: STAGE_MODULES[stage] for stage in course_stages()}  # make nbgrader: the course's stages
MUTANT = next(m for m in MUTANTS if m.get("hint") == "missing-scaling")  # fails hidden checks with numbers


# The Canvas download of the term: file name in the zip -> what the notebook is
CANVAS_DOWNLOAD = {
    "leedee_12345_900001_stage2_self_attention.ipynb": "first copy",
    "leedee_12345_900007_stage2_self_attention-1.ipynb": "cheat",  # the same file, uploaded again
    "smitheve_LATE_67890_900003_stage1_softmax.ipynb": "no hidden cell",
}
CANVAS_COLLECTOR = '# c.ZipCollectApp.collector_plugin = "grader.authoring.nbgrader.lms.CanvasCollector"'


def released(course, stage: int, answer: str | None = None) -> nbformat.NotebookNode:
    """The students' copy of a stage notebook, with ``answer`` in its answer cell."""
    notebook = nbformat.read(course / "release" / ASSIGNMENT / f"{STAGE_MODULES[stage]}.ipynb", as_version=4)
    if answer is not None:
        answer_cell(notebook).source = answer
    return notebook


def cell(notebook: nbformat.NotebookNode, cell_id: str) -> nbformat.NotebookNode:
    """The cell with this id or nbgrader grade id (a cell nbgrader put back has a new id)."""
    return next(c for c in notebook.cells if cell_id in (c.id, c.metadata.get("nbgrader", {}).get("grade_id")))


def without_hidden_cell(notebook: nbformat.NotebookNode, stage: int) -> nbformat.NotebookNode:
    notebook.cells = [c for c in notebook.cells if c.id != autograder_cell_ids(stage)["hidden"]]
    return notebook


def cheating(course, mistaken_answer: str) -> nbformat.NotebookNode:
    """Stage 2 with a mistake, and a scratch cell that makes the check helper report full points."""
    notebook = released(course, 2, mistaken_answer)
    points = stage_points()[2]
    cell(notebook, "stage2-scratch").source = (
        "import grader.notebook\n\n"
        f"grader.notebook.check = lambda stage, hidden=False: "
        f"{points['hidden']:g} if hidden else {points['visible']:g}"
    )
    return notebook


@pytest.fixture(scope="module")
def term(tmp_path_factory):
    """One term. Handed in as files: ada pastes the solutions, bob hands in the release, cy a stage-2
    notebook with a mistake. From a Canvas download, through zip_collect: 12345 the same mistake
    with a scratch cell that replaces the check helper, 67890 (late) stage 1 solved without its
    hidden cell. After the autograde, fay's stage 1 solved without its hidden cell, autograded
    as a course that turned nbgrader's add_missing_cells off."""
    course = tmp_path_factory.mktemp("nbgrader") / "course"
    prepare(course)
    solved = solved_answers(course)
    submit(course, "ada", solved)
    submit(course, "bob", {})
    mistaken = learner_copy(course.parent / "cy-files", MUTANT)
    name = f"{STAGE_MODULES[2]}.py"
    mistaken_answer = answer_cell_source(2, (mistaken / name).read_text())
    folder = submit(course, "cy", {f"{STAGE_MODULES[2]}.ipynb": mistaken_answer})
    for notebook in folder.glob("*.ipynb"):
        if notebook.stem != STAGE_MODULES[2]:
            notebook.unlink()  # cy handed in only stage 2

    config = course / INSTRUCTOR_CONFIG  # the instructor enables the Canvas collector, as the docs say
    assert config.read_text().count(CANVAS_COLLECTOR) == 1
    config.write_text(config.read_text().replace(CANVAS_COLLECTOR, CANVAS_COLLECTOR.removeprefix("# ")))
    notebooks = {
        "first copy": released(course, 2),
        "cheat": cheating(course, mistaken_answer),
        "no hidden cell": without_hidden_cell(released(course, 1, solved[f"{STAGE_MODULES[1]}.ipynb"]), 1),
    }
    archive = course / "downloaded" / ASSIGNMENT / "archive"
    archive.mkdir(parents=True)
    with zipfile.ZipFile(archive / "submissions.zip", "w") as download:
        for member, kind in CANVAS_DOWNLOAD.items():
            download.writestr(member, nbformat.writes(notebooks[kind]))
    nbgrader(course, "zip_collect", ASSIGNMENT)

    grades = grade(course)
    fay = submit(course, "fay", {})
    for notebook in fay.glob("*.ipynb"):
        notebook.unlink()
    nbformat.write(
        without_hidden_cell(released(course, 1, solved[f"{STAGE_MODULES[1]}.ipynb"]), 1),
        fay / f"{STAGE_MODULES[1]}.ipynb",
    )
    nbgrader(course, "autograde", ASSIGNMENT, "--student", "fay", "--OverwriteCells.add_missing_cells=False")
    return course, grades, notebooks


@pytest.fixture(scope="module")
def reconciled(term):
    """`python -m grader.authoring.nbgrader.reconcile` on the term, as an instructor runs it."""
    course, _, _ = term
    return subprocess.run(
        [sys.executable, "-m", "grader.authoring.nbgrader.reconcile", str(course)],
        capture_output=True,
        text=True,
        timeout=900,
    )


def notebook_scores(course, student: str) -> dict[int, float]:
    """Stage -> the points nbgrader gave that stage's notebook (0 for one not handed in)."""
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        return {
            stage: gradebook.find_submission_notebook(module, ASSIGNMENT, student).score
            for stage, module in COURSE_MODULES.items()
        }


def solution_lines(stage: int) -> set[str]:
    """Lines that only a solution region of the stage holds."""
    inside, outside, in_region = set(), set(), False
    for line in (REPO / "solutions" / f"{STAGE_MODULES[stage]}.py").read_text().splitlines():
        if line.strip() in (BEGIN, END):
            in_region = line.strip() == BEGIN
            continue
        (inside if in_region else outside).add(line.strip())
    return {line for line in inside - outside if len(line) >= 8 and not line.startswith("#")}


def notebook_lines(path) -> set[str]:
    return {line.strip() for cell in nbformat.read(path, as_version=4).cells for line in cell.source.splitlines()}


# Generated course (no nbgrader run needed) -------------------------------------------------


def test_course_regenerates_byte_for_byte(tmp_path):
    first = write_course(tmp_path / "a")
    second = write_course(tmp_path / "b")
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in second]


@pytest.mark.parametrize("stage", sorted(COURSE_MODULES))
def test_notebook_follows_solutions_and_nbgrader_schema(tmp_path, stage):
    write_course(tmp_path)
    notebook = nbformat.read(tmp_path / "source" / ASSIGNMENT / f"{STAGE_MODULES[stage]}.ipynb", as_version=4)
    nbformat.validate(notebook)
    validator = MetadataValidatorV3()
    graded = [c for c in notebook.cells if "nbgrader" in c.metadata]
    for cell in graded:
        validator.validate_cell(cell)
        assert cell.metadata["nbgrader"]["schema_version"] == 3
    answers = [c for c in graded if c.metadata["nbgrader"]["solution"]]
    assert [c.source for c in answers] == [answer_source(stage)]
    assert answers[0].source.count(BEGIN) == answers[0].source.count(END) >= 1
    tests = {c.metadata["nbgrader"]["grade_id"]: c for c in graded if c.metadata["nbgrader"]["grade"]}
    assert set(tests) == {f"stage{stage}-visible", f"stage{stage}-hidden"}
    assert "### BEGIN HIDDEN TESTS" in tests[f"stage{stage}-hidden"].source


def test_cell_points_are_the_graders_points():
    points = stage_points()
    for stage, split in points.items():
        assert split["visible"] + split["hidden"] == STAGE_POINTS
        visible = sum(c.points for c in planned_checks([stage], points_in_use()) if c.visibility == "visible")
        assert split["visible"] == visible > 0


def test_regenerating_keeps_the_instructors_settings_and_cells(tmp_path, monkeypatch):
    write_course(tmp_path)
    config = tmp_path / INSTRUCTOR_CONFIG
    config.write_text(config.read_text() + "c.Execute.timeout = 42\nc.CourseDirectory.student_id = 'zed'\n")
    path = tmp_path / "source" / ASSIGNMENT / f"{STAGE_MODULES[1]}.ipynb"
    notebook = nbformat.read(path, as_version=4)
    first, middle, last = (
        nbformat.v4.new_markdown_cell("Course rules"),
        nbformat.v4.new_code_cell("extra = 1"),
        nbformat.v4.new_markdown_cell("Further reading"),
    )
    ids = [c.id for c in notebook.cells]
    scratch = ids.index("stage1-scratch")
    notebook.cells.insert(scratch + 1, middle)
    # one generated cell deleted
    notebook.cells = [first, *[c for c in notebook.cells if c.id != "stage1-scratch"], last]
    cell(notebook, "stage1-explanation").source = "edited by hand"
    nbformat.write(notebook, path)
    points = {
        stage: {"visible": split["visible"] + 1, "hidden": split["hidden"] - 1}
        for stage, split in stage_points().items()
    }
    monkeypatch.setattr(nbgrader_course, "stage_points", lambda stages=None: points)

    written = write_course(tmp_path)
    assert config not in written and "c.Execute.timeout = 42" in config.read_text()
    loaded = PyFileConfigLoader(INSTRUCTOR_CONFIG, path=str(tmp_path)).load_config()
    assert loaded.Execute.timeout == 42  # the instructor's setting wins over the generated one
    assert loaded.CourseDirectory.student_id == "zed" and loaded.CourseDirectory.course_id == "attention-exercises"
    assert loaded.OverwriteCells.add_missing_cells is True
    regenerated = nbformat.read(path, as_version=4)
    assert [c.id for c in regenerated.cells] == [first.id, *ids[: scratch + 1], middle.id, *ids[scratch + 1 :], last.id]
    assert [c.source for c in regenerated.cells if c.id in (first.id, middle.id, last.id)] == [
        "Course rules",
        "extra = 1",
        "Further reading",
    ]
    assert cell(regenerated, "stage1-explanation").source.startswith("# Stage 1")  # generated cells are rewritten
    for visibility, grade_id in autograder_cell_ids(1).items():
        test = cell(regenerated, grade_id)
        assert test.metadata["nbgrader"]["points"] == points[1][visibility] != stage_points()[1][visibility]
        assert f"({points[1][visibility]:g} points)" in test.source
    before = [p.read_bytes() for p in written]
    assert [p.read_bytes() for p in write_course(tmp_path)] == before  # and again: nothing changes


@pytest.mark.parametrize(
    "config",
    [
        "c = get_config()\nc.Execute.timeout = 300\n",
        f'c = get_config()\n# load_subconfig("{GENERATED_CONFIG}")\n',  # a comment loads nothing
        f"c = get_config()\nNOTE = 'load_subconfig(\"{GENERATED_CONFIG}\")'\n",
    ],
)
def test_a_config_that_does_not_load_the_generated_settings_is_named(tmp_path, capsys, config):
    (tmp_path / INSTRUCTOR_CONFIG).write_text(config)
    assert nbgrader_course.main([str(tmp_path)]) == 0
    assert (tmp_path / INSTRUCTOR_CONFIG).read_text() == config
    assert "does not load" in capsys.readouterr().err


def test_a_config_that_loads_the_generated_settings_passes(tmp_path, capsys):
    assert nbgrader_course.main([str(tmp_path)]) == 0
    assert "does not load" not in capsys.readouterr().err


def test_cells_kept_counts_the_generated_notebooks_only(tmp_path, capsys):
    """A notebook of the instructor's own beside them is never touched: none of its cells is "kept"."""
    write_course(tmp_path)
    extra = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("my note") for _ in range(3)])
    nbformat.write(extra, tmp_path / "source" / ASSIGNMENT / "intro.ipynb")
    assert nbgrader_course.main([str(tmp_path)]) == 0
    assert "(0 cells of yours kept)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("name", "student", "notebook"),
    [
        ("smithjane_12345_67890_stage1_softmax.ipynb", "12345", "stage1_softmax"),
        ("smithjane_LATE_12345_67890_stage1_softmax-1.ipynb", "12345", "stage1_softmax"),
        ("o_brien_12345_67890_stage2_self_attention (2).ipynb", "12345", "stage2_self_attention"),
        ("anon_Xy3k9_67890_stage1_softmax.ipynb", "anon_Xy3k9", "stage1_softmax"),
        ("LATE_anon_Xy3k9_67890_stage1_softmax-3.ipynb", "anon_Xy3k9", "stage1_softmax"),
        # near names, as the grade-all intake reads stage files: autograde grades only the course's names
        ("leefay_34567_801_Stage1_Softmax.ipynb", "34567", "stage1_softmax"),
        ("leefay_34567_802_stage2_self_attention copy.ipynb", "34567", "stage2_self_attention"),
        ("leefay_34567_803_stage3 weight-transfer.ipynb", "34567", "stage3_weight_transfer"),
        ("leefay_34567_804_notes.ipynb", "34567", "notes"),
        ("smithjane_12345_67890_stage1_softmax.py", None, None),
        ("stage1_softmax.ipynb", None, None),
    ],
)
def test_canvas_file_names(tmp_path, name, student, notebook):
    (tmp_path / name).write_text("{}")
    found = CanvasCollector().collect(str(tmp_path / name))
    assert (found and (found["student_id"], found["file_id"])) == ((student, notebook) if student else None)


def test_canvas_keeps_the_copy_it_stored_last(tmp_path):
    older, newer = (
        tmp_path / "leedee_12345_900001_stage1_softmax.ipynb",
        tmp_path / "leedee_12345_900007_stage1_softmax-1.ipynb",
    )
    for path in (older, newer, tmp_path / "smitheve_67890_900003_stage1_softmax.ipynb"):
        path.write_text("{}")
    collector = CanvasCollector()
    assert collector.collect(str(older)) is None
    assert collector.collect(str(newer))["file_id"] == "stage1_softmax"
    assert collector.collect(str(tmp_path / "smitheve_67890_900003_stage1_softmax.ipynb"))["student_id"] == "67890"


def test_canvas_files_a_zip_of_notebooks_under_the_user_id_of_its_folder(tmp_path):
    """nbgrader extracts an uploaded .zip into a folder named like it, the notebooks a level or more down."""
    inside = tmp_path / "parkkim_67890_990_attention" / "attention"
    inside.mkdir(parents=True)
    (inside / "stage1_softmax.ipynb").write_text("{}")
    found = CanvasCollector().collect(str(inside / "stage1_softmax.ipynb"))
    assert (found["student_id"], found["file_id"]) == ("67890", "stage1_softmax")


def test_a_course_folder_named_like_a_canvas_file_is_not_a_student(tmp_path):
    """Only names below zip_collect's extracted/ are the download's: a notebook in a folder of no
    LMS's naming is skipped, though the course folder above it looks like one."""
    app = ZipCollectApp()
    app.coursedir = CourseDirectory(root=str(tmp_path / "course_2024_1_x"), assignment_id=ASSIGNMENT)
    loose = tmp_path / "course_2024_1_x" / "downloaded" / ASSIGNMENT / "extracted" / "random" / "stage1_softmax.ipynb"
    canvas = loose.parent / "smithjane_12345_601_stage1_softmax.ipynb"
    loose.parent.mkdir(parents=True)
    for path in (loose, canvas):
        path.write_text("{}")
    collector = CanvasCollector(parent=app)
    assert collector.collect(str(loose)) is None
    assert collector.collect(str(canvas))["student_id"] == "12345"


def test_canvas_keeps_the_notebook_under_its_own_name_over_a_near_name_in_one_upload(tmp_path):
    inside = tmp_path / "parkkim_67890_990_attention"
    (inside / "old").mkdir(parents=True)
    for path in (inside / "Stage1_Softmax.ipynb", inside / "old" / "stage1_softmax.ipynb"):
        path.write_text("{}")
    collector = CanvasCollector()
    assert collector.collect(str(inside / "Stage1_Softmax.ipynb")) is None
    assert collector.collect(str(inside / "old" / "stage1_softmax.ipynb"))["file_id"] == "stage1_softmax"


def test_moodle_keeps_one_copy_of_a_notebook_handed_in_twice_and_says_so(tmp_path, caplog):
    """nbgrader stops the whole class at a second copy without a time: the collector hands it one,
    the shallowest, and names the student and the files in one line."""
    jane, kim = tmp_path / "Jane Doe_101_assignsubmission_file_", tmp_path / "Kim Park_105_assignsubmission_file_"
    (jane / "old").mkdir(parents=True)
    kim.mkdir()
    for path in (jane / "stage1_softmax.ipynb", jane / "old" / "stage1_softmax.ipynb", kim / "stage1_softmax.ipynb"):
        path.write_text("{}")
    collector = MoodleCollector()
    with caplog.at_level(logging.WARNING, logger=collector.log.name):
        kept = [
            collector.collect(str(path))
            for path in (
                jane / "old" / "stage1_softmax.ipynb",
                jane / "stage1_softmax.ipynb",
                kim / "stage1_softmax.ipynb",
            )
        ]
    assert kept[0] is None
    assert [(info["student_id"], info["file_id"]) for info in kept[1:]] == [
        ("101", "stage1_softmax"),
        ("105", "stage1_softmax"),
    ]
    [line] = [r.getMessage() for r in caplog.records if "handed in" in r.getMessage()]
    assert "101" in line and "old/stage1_softmax.ipynb" in line and "kept Jane Doe_101" in line


@pytest.mark.parametrize(
    ("path", "student", "notebook"),
    [
        ("Fay Lee_101_assignsubmission_file_/stage1_softmax.ipynb", "101", "stage1_softmax"),
        ("Fay Lee_101_assignsubmission_file_stage1_softmax.ipynb", "101", "stage1_softmax"),
        ("Participant_2040_assignsubmission_file_/work/stage2_self_attention.ipynb", "2040", "stage2_self_attention"),
        ("Fay Lee_101_assignsubmission_file_attention/attention/Stage1_Softmax.ipynb", "101", "stage1_softmax"),
        ("Fay Lee_101_assignsubmission_onlinetext_/onlinetext.ipynb", None, None),
    ],
)
def test_moodle_file_names(tmp_path, path, student, notebook):
    found = MoodleCollector().collect(str(tmp_path / "download" / path))
    assert (found and (found["student_id"], found["file_id"])) == ((student, notebook) if student else None)


@pytest.mark.parametrize(
    ("collector", "victim", "attacker", "readings"),
    [
        # Eve (participant 103) named herself Eve_102_assignsubmission_file: flat, her entry reads as 102's too
        (
            MoodleCollector,
            "Bob Lee_102_assignsubmission_file_stage5_multihead.ipynb",
            "Eve_102_assignsubmission_file_103_assignsubmission_file_stage5_multihead.ipynb",
            "Moodle participant 102 or Moodle participant 103",
        ),
        # the same name, and a .zip nbgrader extracted into a folder named like it
        (
            MoodleCollector,
            "Bob Lee_102_assignsubmission_file_/stage5_multihead.ipynb",
            "Eve_102_assignsubmission_file_103_assignsubmission_file_attention/stage5_multihead.ipynb",
            "Moodle participant 102 or Moodle participant 103",
        ),
        # Canvas: a name ending _5002 (user 5003) reads as user 5002's attachment too
        (
            CanvasCollector,
            "bob_5002_700_stage5_multihead.ipynb",
            "eve_5002_5003_701_stage5_multihead.ipynb",
            "Canvas user 5002 or Canvas user 5003",
        ),
    ],
)
def test_a_name_that_reads_as_two_students_work_is_collected_for_no_one(
    tmp_path, caplog, collector, victim, attacker, readings
):
    """The class intake's rule (test_intake) in nbgrader's collectors: the victim keeps exactly their own
    notebook, the attacker's is filed under no one, and one line names both readings."""
    for name in (victim, attacker):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}")
    plugin = collector()
    with caplog.at_level(logging.WARNING, logger=plugin.log.name):
        found = {name: plugin.collect(str(tmp_path / name)) for name in (attacker, victim, attacker)}
    assert found[attacker] is None
    assert (found[victim]["student_id"], found[victim]["file_id"]) == (readings.split()[2], "stage5_multihead")
    [line] = [r.getMessage() for r in caplog.records if "reads as the work of" in r.getMessage()]
    assert readings in line and attacker.split("/")[0] in line


def test_a_moodle_folder_whose_display_name_spells_an_id_is_refused_too(tmp_path):
    """The class intake reads Moodle's own folder (its name ends at the plugin) one way only. nbgrader has
    already extracted each .zip into a folder named like it, and a zip's name need not end at the plugin, so
    the collector cannot tell the two apart: it takes both readings."""
    path = tmp_path / "Fay_7_assignsubmission_file_8_assignsubmission_file_" / "stage1_softmax.ipynb"
    path.parent.mkdir()
    path.write_text("{}")
    assert MoodleCollector().collect(str(path)) is None


# Reconciliation evidence (no nbgrader run needed) ------------------------------------------


def course_notebook(tmp_path, stage: int) -> nbformat.NotebookNode:
    write_course(tmp_path)
    return nbformat.read(tmp_path / "source" / ASSIGNMENT / f"{STAGE_MODULES[stage]}.ipynb", as_version=4)


def graded_cells(notebook, stage: int) -> list[GradedCell]:
    return [
        GradedCell(c.id, c.metadata["nbgrader"]["points"], compute_checksum(c))
        for c in notebook.cells
        if c.id in autograder_cell_ids(stage).values()
    ]


def test_a_missing_or_altered_test_cell_is_a_cause_and_one_nbgrader_put_back_is_not(tmp_path):
    released_copy = course_notebook(tmp_path, 1)
    cells = graded_cells(released_copy, 1)
    handed_in = without_hidden_cell(nbformat.from_dict(released_copy), 1)
    assert graded_cell_causes(handed_in, handed_in, cells) == [
        f"test cell stage1-hidden ({stage_points()[1]['hidden']:g} points) is missing from the handed-in notebook, "
        f"so nbgrader never ran it"
    ]
    assert graded_cell_causes(released_copy, handed_in, cells) == []  # put back by add_missing_cells
    altered = nbformat.from_dict(released_copy)
    cell(altered, "stage1-visible").source += "\n20"
    assert graded_cell_causes(altered, altered, cells) == [
        "test cell stage1-visible ran altered (its checksum is not the release's)"
    ]
    assert graded_cell_causes(released_copy, released_copy, cells) == []


@pytest.mark.parametrize(
    ("source", "changed"),
    [
        ("import grader.notebook as gn\ngn.check = lambda *a, **k: 20.0", "grader.notebook.check"),
        ("from grader import notebook\n%matplotlib inline\nsetattr(notebook, 'check', print)", "grader.notebook.check"),
        ("from grader.notebook import check\ncheck.__defaults__ = (True,)", "grader.notebook.check.__defaults__"),
        ("import sys\nsys.path.insert(0, '/tmp/elsewhere')", "sys.path"),
        ("from sys import modules\nmodules['grader'] = object()", "sys.modules"),
        # names only: the test cells import check again
        ("from grader.notebook import check, load\ncheck = load = print\n!ls", None),
        ("%%writefile grader_notes.py\ngrader.notebook.check = print", None),  # a file written, not run
    ],
)
def test_a_cell_that_changes_the_grader_is_a_cause(tmp_path, source, changed):
    notebook = course_notebook(tmp_path, 1)
    cell(notebook, "stage1-scratch").source = source
    causes = tampering_causes(notebook)
    assert [re.search(r"changes (\S+) \(line", c)[1] for c in causes] == ([changed] if changed else [])
    assert all(c.startswith("cell 3 (id stage1-scratch)") for c in causes)


def test_a_stage_file_that_is_not_the_answer_cells_is_a_cause(tmp_path):
    notebook = course_notebook(tmp_path, 1)
    folder = tmp_path / "ran"
    folder.mkdir()
    name = f"{STAGE_MODULES[1]}.py"
    (folder / name).write_text(answer_source(1).split("\n", 1)[1] + "\n")  # as IPython's %%writefile saves it
    assert stage_file_causes(notebook, folder, 1) == []
    notebook.cells.append(nbformat.v4.new_code_cell(f"%%writefile {name}\ndef softmax_naive(x):\n    return x"))
    (folder / name).write_text("def softmax_naive(x):\n    return x\n")
    assert stage_file_causes(notebook, folder, 1) == [
        f"{name} beside the notebook is not what the answer cell's %%writefile wrote (cell 6 (id "
        f"{notebook.cells[-1].id}) also names it)"
    ]
    answer_cell(notebook).source = answer_cell(notebook).source.split("\n", 1)[1]
    assert stage_file_causes(notebook, folder, 1) == [
        f"the answer cell does not start with %%writefile {name}, so it never saved the stage file"
    ]


def ran_with_output(tmp_path, stage: int, *outputs: dict, scratch: str | None = None) -> nbformat.NotebookNode:
    """The stage's notebook as nbgrader ran it: ``outputs`` in its visible test cell."""
    notebook = course_notebook(tmp_path, stage)
    cell(notebook, autograder_cell_ids(stage)["visible"]).outputs = [nbformat.from_dict(o) for o in outputs]
    if scratch is not None:
        cell(notebook, f"stage{stage}-scratch").source = scratch
    return notebook


REAL_GRADER_SAID = {"output_type": "stream", "name": "stdout", "text": "visible checks of stage 1: 5/5\n"}


def test_a_module_named_grader_beside_the_notebook_is_a_cause_when_the_test_cells_did_not_run_the_grader(tmp_path):
    folder = tmp_path / "autograded"
    folder.mkdir()
    shadow_said = {"output_type": "stream", "name": "stdout", "text": "all good\n"}
    assert shadowing_causes(ran_with_output(tmp_path, 1, shadow_said), folder, 1) == []
    (folder / "grader").mkdir()
    assert shadowing_causes(ran_with_output(tmp_path, 1, shadow_said), folder, 1) == [
        "grader beside the notebook comes before the grader package on the kernel's path, and the test cells' "
        "output is not the grader's"
    ]


@pytest.mark.parametrize(
    "output",
    [
        REAL_GRADER_SAID,
        {
            "output_type": "error",
            "ename": "NotebookGradingError",
            "evalue": "stage1_softmax.py is not in /tmp/x: run the answer cell first",
            "traceback": [f"\x1b[0;32m{REPO / 'grader' / 'notebook.py'}\x1b[0m:61, in _stage_file"],
        },
    ],
)
def test_a_module_named_grader_beside_the_notebook_is_no_cause_when_the_grader_itself_ran(tmp_path, output):
    """A cell may move the kernel away from the notebook's folder: the grader package's own output
    proves the module beside the notebook was not what ran."""
    folder = tmp_path / "autograded"
    (folder / "grader").mkdir(parents=True)
    assert shadowing_causes(ran_with_output(tmp_path, 1, output), folder, 1) == []


def test_a_cell_that_changes_the_working_directory_is_a_cause_the_test_cell_output_proves(tmp_path):
    folder = tmp_path / "autograded"
    folder.mkdir()
    moved = {
        "output_type": "error",
        "ename": "NotebookGradingError",
        "evalue": "stage1_softmax.py is not in /tmp/elsewhere: run the answer cell first (its first line, "
        "%%writefile stage1_softmax.py, saves it)",
        "traceback": [],
    }
    scratch = "import os\n\nos.chdir('/tmp/elsewhere')"
    assert working_directory_causes(ran_with_output(tmp_path, 1, moved, scratch=scratch), folder, 1) == [
        "cell 3 (id stage1-scratch) changes the working directory (line 3): the test cells' grader looked for "
        'stage1_softmax.py in /tmp/elsewhere, not beside the notebook (its output: "stage1_softmax.py is not in '
        '/tmp/elsewhere")'
    ]
    # the same cell, but the grader found the file: nothing the output proves
    assert working_directory_causes(ran_with_output(tmp_path, 1, REAL_GRADER_SAID, scratch=scratch), folder, 1) == []


# The real nbgrader cycle ----------------------------------------------------------------------


def test_release_holds_no_solution_and_no_hidden_check(term):
    course, _, _ = term
    hidden_ids = {c.id for c in planned_checks(sorted(COURSE_MODULES), points_in_use()) if c.visibility == "hidden"}
    for stage, module in COURSE_MODULES.items():
        released = (course / "release" / ASSIGNMENT / f"{module}.ipynb").read_text()
        source = (course / "source" / ASSIGNMENT / f"{module}.ipynb").read_text()
        secret_lines = solution_lines(stage) & notebook_lines(course / "source" / ASSIGNMENT / f"{module}.ipynb")
        assert secret_lines, "the source notebook must hold the solution for this test to mean anything"
        assert not secret_lines & notebook_lines(course / "release" / ASSIGNMENT / f"{module}.ipynb")
        assert "HIDDEN TESTS" not in released and "hidden=True" not in released
        assert "hidden=True" in source
        assert not {i for i in hidden_ids if f'"{i}' in released or f" {i}:" in released}
        assert "NotImplementedError()" in released


def test_autograde_matches_make_grade(term):
    course, grades, _ = term
    for student, expected_total in (("ada", 100), ("bob", 0)):
        scores = notebook_scores(course, student)
        assert sum(scores.values()) == expected_total
        # make grade on the very files the notebooks wrote while being autograded
        files = shutil.copytree(
            course / "autograded" / student / ASSIGNMENT,
            course.parent / f"{student}-written",
            ignore=shutil.ignore_patterns("*.ipynb", "*.txt", "__pycache__"),
        )
        _, report = grade_folder(files)
        assert stage_scores(report) == scores
    rows = {row["student_id"]: row for row in csv.DictReader(grades.open())}
    assert float(rows["ada"]["score"]) == 100 and float(rows["bob"]["score"]) == 0


def test_a_mistake_costs_its_own_notebook_as_make_grade_says(term):
    course, _, _ = term
    scores = notebook_scores(course, "cy")
    _, report = grade_folder(learner_copy(course.parent / "cy-check", MUTANT))
    assert scores == {stage: stage_scores(report)[2] if stage == 2 else 0 for stage in COURSE_MODULES}
    assert 0 < scores[2] < STAGE_POINTS


def test_feedback_shows_verdicts_but_no_hidden_data(term):
    course, _, _ = term
    _, report = grade_folder(learner_copy(course.parent / "cy-data", MUTANT), "--stage", "2")
    hidden_failures = [
        c for c in report["stages"][0]["checks"] if c["visibility"] == "hidden" and c["status"] != "passed"
    ]
    hidden_numbers = {n for c in hidden_failures for n in re.findall(r"-?\d+\.\d{3,}", c["message"])}
    assert hidden_numbers, "the mistake must fail hidden checks with data in their messages"
    feedback = (course / "feedback" / "cy" / ASSIGNMENT / f"{STAGE_MODULES[2]}.html").read_text()
    assert not {n for n in hidden_numbers if n in feedback}
    for check in hidden_failures:
        assert check["id"] in feedback  # the verdict is there, with the catalog's explanation
        assert check["message"].splitlines()[0] not in feedback
    assert MUTANT["hint"] in feedback


def test_zip_collect_files_a_canvas_download_by_user_id(term):
    course, _, notebooks = term
    for student, module in (("12345", STAGE_MODULES[2]), ("67890", STAGE_MODULES[1])):
        folder = course / "submitted" / student / ASSIGNMENT
        assert [p.name for p in folder.iterdir()] == [f"{module}.ipynb"]
    collected = nbformat.read(course / "submitted" / "12345" / ASSIGNMENT / f"{STAGE_MODULES[2]}.ipynb", as_version=4)
    assert cell(collected, "stage2-scratch").source == cell(notebooks["cheat"], "stage2-scratch").source  # the -1 copy
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:  # and autograde graded both
        assert {"12345", "67890"} <= {s.student_id for s in gradebook.find_assignment(ASSIGNMENT).submissions}


def test_a_deleted_test_cell_is_put_back_before_grading(term):
    course, _, _ = term
    name = f"{STAGE_MODULES[1]}.ipynb"
    hidden = autograder_cell_ids(1)["hidden"]
    handed_in = nbformat.read(course / "submitted" / "67890" / ASSIGNMENT / name, as_version=4)
    graded = nbformat.read(course / "autograded" / "67890" / ASSIGNMENT / name, as_version=4)
    assert hidden not in {c.id for c in handed_in.cells} and "check(1, hidden=True)" in cell(graded, hidden).source
    assert notebook_scores(course, "67890")[1] == STAGE_POINTS
    assert notebook_scores(course, "fay")[1] == stage_points()[1]["visible"]  # a course with that turned off


def test_the_released_hidden_cell_says_what_it_is_for(term):
    course, _, _ = term
    for stage, points in stage_points().items():
        hidden = cell(released(course, stage), autograder_cell_ids(stage)["hidden"])
        assert hidden.source.strip() == hidden_cell_notice(points["hidden"])
        assert f"({points['hidden']:g} points)" in hidden.source and "Keep it." in hidden.source


def test_reconcile_names_each_disagreement_and_its_cause(term, reconciled):
    course, _, _ = term
    assert reconciled.returncode == 1, reconciled.stdout + reconciled.stderr
    header, *lines = reconciled.stdout.splitlines()
    assert header == "nbgrader and grade-all differ on 2 stages of 6 students:"
    mistaken = notebook_scores(course, "cy")[2]  # the same mistake, without the cheat
    assert lines == [
        f"12345 stage 2: nbgrader {STAGE_POINTS}, grade-all {mistaken:g}: cell 3 (id stage2-scratch) changes "
        f"grader.notebook.check (line 3): the test cells call the grader through it",
        f"fay stage 1: nbgrader {stage_points()[1]['visible']:g}, grade-all {STAGE_POINTS}: test cell stage1-hidden "
        f"({stage_points()[1]['hidden']:g} points) is missing from the handed-in notebook, so nbgrader never ran it",
    ]
    with (course / "reconcile" / "grades.csv").open() as table:
        assert {row["student_id"] for row in csv.DictReader(table)} == {"ada", "bob", "cy", "12345", "67890", "fay"}


def test_reconcile_exits_0_when_the_two_agree(term, tmp_path):
    course, _, _ = term
    agreeing = tmp_path / "course"  # bob, and 67890 whose deleted hidden cell nbgrader put back
    shutil.copytree(course, agreeing, ignore=shutil.ignore_patterns("reconcile"))
    with Gradebook(f"sqlite:///{agreeing / 'gradebook.db'}") as gradebook:
        for student in ("ada", "cy", "12345", "fay"):
            shutil.rmtree(agreeing / "autograded" / student)
            gradebook.remove_submission(ASSIGNMENT, student)
    done = subprocess.run(
        [sys.executable, "-m", "grader.authoring.nbgrader.reconcile", str(agreeing)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert (done.returncode, done.stdout) == (0, "nbgrader and grade-all agree on every stage of 2 students.\n")


def test_make_nbgrader_reconcile_runs_the_reconciliation():
    dry_run = subprocess.run(
        ["make", "-n", "nbgrader-reconcile", "COURSE=some/course"], cwd=REPO, capture_output=True, text=True
    )
    assert dry_run.returncode == 0 and "-m grader.authoring.nbgrader.reconcile some/course" in dry_run.stdout


def test_autograde_raises_no_false_checksum_alarm_for_a_hidden_cell_as_released_but_still_for_an_altered_one(tmp_path):
    """nbgrader#1961: generate_assignment stores a hidden-test cell's checksum before clearing its hidden tests,
    so every untouched submission read as tampered with; the course's RestoreHiddenTests tells them apart."""
    course = tmp_path / "course"
    prepare(course)
    hidden = autograder_cell_ids(1)["hidden"]
    for student in ("bob", "eve"):
        folder = submit(course, student, {})
        for notebook in folder.glob("*.ipynb"):
            if notebook.stem != STAGE_MODULES[1]:
                notebook.unlink()
    eve = course / "submitted" / "eve" / ASSIGNMENT / f"{STAGE_MODULES[1]}.ipynb"
    notebook = nbformat.read(eve, as_version=4)
    cell(notebook, hidden).source += "\nprint('eve was here')"
    nbformat.write(notebook, eve)
    output = nbgrader(course, "autograde", ASSIGNMENT)
    assert "Kernel is running over TCP" not in output  # the kernels talk over ipc (GENERATED_SETTINGS)
    alarm = f"Attribute 'checksum' for cell {hidden} has changed"
    assert output.count(alarm) == 1, output[-3000:]  # eve's
    untouched = nbgrader(course, "autograde", ASSIGNMENT, "--student", "bob", "--force")
    assert alarm not in untouched and "has changed" not in untouched, untouched[-3000:]
