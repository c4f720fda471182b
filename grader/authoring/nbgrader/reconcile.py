"""python -m grader.authoring.nbgrader.reconcile COURSE_DIR [--assignment attention] [--out DIR]

nbgrader's scores come from test cells that ran in each student's own kernel, next to the
student's code; grade-all's from the grader's sandbox. This grades COURSE_DIR/autograded (the
notebooks as nbgrader ran them, and the stage files they wrote) with grade-all (`python -m grader
batch`, reports in OUT, default COURSE_DIR/reconcile), compares each student's stage scores with
nbgrader's gradebook (where the course's nbgrader_config.py puts it), and lists every student and
stage whose two scores differ, with the cause where the notebooks show it:
  * a test cell missing from the notebook nbgrader ran, or one that ran altered (its checksum);
  * a code cell that changes the grader's module (grader.notebook.check ...), sys.modules or
    sys.path; a module named grader beside the notebook, when the test cells' output is not the
    grader package's (a cell may have moved the kernel away from it);
  * a test cell whose output says it looked for the stage file elsewhere ("... is not in
    /tmp/elsewhere"), with the cells that change the working directory;
  * a stage file beside the notebook that is not what the answer cell's %%writefile wrote;
  * a score an instructor set by hand in the gradebook.
Anything else reads "differs; no cause found".

Exit status: 0 when the two agree everywhere, 1 when some differ, 2 when they could not be compared.
"""

import argparse
import csv
import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.coursedir import CourseDirectory
from traitlets.config import Config
from traitlets.config.loader import ConfigFileNotFound, PyFileConfigLoader

from grader.authoring.nbgrader.causes import (
    GradedCell,
    _read,
    graded_cell_causes,
    shadowing_causes,
    stage_file_causes,
    tampering_causes,
    working_directory_causes,
)
from grader.authoring.nbgrader.course import ASSIGNMENT, INSTRUCTOR_CONFIG, autograder_cell_ids
from grader.core.course import course_stages
from grader.core.stages import STAGE_MODULES
from grader.runner.escaping import printable

NO_CAUSE = "differs; no cause found"


class CannotCompare(Exception):
    """The course cannot be reconciled as it stands; the message says why."""


@dataclass(frozen=True)
class NbgraderStage:
    score: float
    hand_scored: tuple[str, ...]  # test cells whose score an instructor set in the gradebook


@dataclass(frozen=True)
class Disagreement:
    student: str
    stage: int | None  # None: the student is missing from one side altogether
    nbgrader: float | None
    grade_all: float | None
    causes: tuple[str, ...]

    def line(self) -> str:
        where = printable(self.student, keep_newlines=False) + (f" stage {self.stage}" if self.stage else "")
        scores = f"nbgrader {_points(self.nbgrader)}, grade-all {_points(self.grade_all)}"
        return f"{where}: {scores}: {'; '.join(self.causes)}"


def _points(score: float | None) -> str:
    return "-" if score is None else f"{score:g}"


# The two sides ---------------------------------------------------------------------------------


def course_directory(course: Path) -> CourseDirectory:
    """nbgrader's view of the course folder, with its nbgrader_config.py (and what that loads)."""
    try:
        config = PyFileConfigLoader(INSTRUCTOR_CONFIG, path=str(course)).load_config()
    except ConfigFileNotFound:
        config = Config()
    return CourseDirectory(config=config, root=str(course))


def nbgrader_side(
    coursedir: CourseDirectory, assignment: str
) -> tuple[dict[str, dict[int, NbgraderStage]], dict[int, list[GradedCell]]]:
    """Per student and stage, nbgrader's score of the generated test cells (cells an instructor added
    count in nbgrader only, so they are left out); and each stage's test cells as the gradebook keeps them."""
    with Gradebook(coursedir.db_url, coursedir.course_id) as gradebook:  # the course's id: nothing is added
        try:
            return _nbgrader_side(gradebook, assignment)
        except MissingEntry as error:
            raise CannotCompare(
                f"the gradebook does not hold assignment {assignment} as make nbgrader writes it ({error})"
            ) from None


def course_modules() -> dict[int, str]:
    """The course's stages (course.toml: the core, and the bonus when on), each with its module: the
    notebooks make nbgrader writes, and the stages grade-all grades."""
    return {stage: STAGE_MODULES[stage] for stage in course_stages()}


def _nbgrader_side(
    gradebook: Gradebook, assignment: str
) -> tuple[dict[str, dict[int, NbgraderStage]], dict[int, list[GradedCell]]]:
    cells, modules = {}, course_modules()
    for stage, module in modules.items():
        notebook = gradebook.find_notebook(module, assignment)
        checksums = {cell.name: cell.checksum for cell in notebook.source_cells}
        cells[stage] = [
            GradedCell(cell.name, cell.max_score, checksums[cell.name])
            for cell in notebook.grade_cells
            if cell.name in autograder_cell_ids(stage).values()
        ]
    scores = {}
    for submission in gradebook.find_assignment(assignment).submissions:
        student = submission.student_id
        scores[student] = {}
        for stage, module in modules.items():
            grades = [
                g
                for g in gradebook.find_submission_notebook(module, assignment, student).grades
                if g.name in autograder_cell_ids(stage).values()
            ]
            scores[student][stage] = NbgraderStage(
                sum(g.score or 0.0 for g in grades), tuple(g.name for g in grades if g.manual_score is not None)
            )
    return scores, cells


def grade_all_side(autograded: Path, out: Path) -> dict[str, dict[int, float | None]]:
    """grade-all's stage scores of everyone in ``autograded``, graded afresh (reports in ``out``)."""
    command = [sys.executable, "-m", "grader", "batch", str(autograded), "--out", str(out), "--force"]
    if subprocess.run(command).returncode != 0:
        raise CannotCompare(f"grade-all failed on {autograded} (its message is above)")
    with (out / "grades.csv").open(encoding="utf-8", newline="") as table:
        rows = list(csv.DictReader(table))
    stages = course_modules()
    return {
        row["student_id"]: {stage: float(row[f"stage{stage}"]) if row[f"stage{stage}"] else None for stage in stages}
        for row in rows
    }


# Evidence in the notebooks ---------------------------------------------------------------------


def notebook_causes(
    coursedir: CourseDirectory, assignment: str, student: str, stage: int, cells: list[GradedCell]
) -> list[str]:
    """What the student's notebook of ``stage`` shows about why the two scores differ."""
    folder = Path(coursedir.format_path(coursedir.autograded_directory, student, assignment))
    notebook = f"{STAGE_MODULES[stage]}.ipynb"
    ran = _read(folder / notebook)
    if ran is None:
        written = folder / f"{STAGE_MODULES[stage]}.py"
        return [f"no {notebook} was handed in, but {written.name} was"] if written.is_file() else []
    handed_in = _read(Path(coursedir.format_path(coursedir.submitted_directory, student, assignment)) / notebook)
    # a student's notebooks run one after another in one kernel (shared_kernel.py): what an earlier one changed in
    # the grader is still changed when this one's test cells run
    earlier = [
        f"{path.name}, which ran before it in the same kernel: {cause}"
        for path in sorted(folder.glob("*.ipynb"))
        if path.name < notebook and (before := _read(path)) is not None
        for cause in tampering_causes(before)
    ]
    return [
        *graded_cell_causes(ran, handed_in, cells),
        *tampering_causes(ran),
        *earlier,
        *shadowing_causes(ran, folder, stage),
        *working_directory_causes(ran, folder, stage),
        *stage_file_causes(ran, folder, stage),
    ]


# Putting them together -------------------------------------------------------------------------


def reconcile(coursedir: CourseDirectory, assignment: str, out: Path) -> tuple[list[Disagreement], int]:
    """Every student and stage whose nbgrader and grade-all scores differ, with causes; and how many students."""
    autograded = Path(coursedir.root) / coursedir.autograded_directory
    gradebook = coursedir.db_url.removeprefix("sqlite:///")
    if coursedir.db_url.startswith("sqlite:///") and not Path(gradebook).is_file():
        raise CannotCompare(f"there is no gradebook at {gradebook}: run `nbgrader autograde {assignment}` first")
    if not autograded.is_dir():
        raise CannotCompare(f"there is no {autograded}: run `nbgrader autograde {assignment}` first")
    nbgrader, cells = nbgrader_side(coursedir, assignment)
    grade_all = grade_all_side(autograded, out)
    found = []
    for student in sorted(set(nbgrader) | set(grade_all)):
        if student not in grade_all:
            found.append(
                Disagreement(
                    student,
                    None,
                    sum(s.score for s in nbgrader[student].values()),
                    None,
                    (f"grade-all has no grades for this student: no folder in {autograded.name}/",),
                )
            )
            continue
        if student not in nbgrader:
            found.append(
                Disagreement(
                    student,
                    None,
                    None,
                    sum(filter(None, grade_all[student].values())),
                    ("nbgrader's gradebook has no submission of this student",),
                )
            )
            continue
        for stage in cells:  # the course's stages, as nbgrader_side read them
            ours, theirs = nbgrader[student][stage], grade_all[student][stage]
            if theirs is not None and math.isclose(ours.score, theirs, abs_tol=1e-6):
                continue
            causes = [
                *notebook_causes(coursedir, assignment, student, stage, cells[stage]),
                *(f"an instructor set the score of {name} by hand in the gradebook" for name in ours.hand_scored),
            ]
            found.append(Disagreement(student, stage, ours.score, theirs, tuple(causes) or (NO_CAUSE,)))
    return found, len(set(nbgrader) | set(grade_all))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grader.authoring.nbgrader.reconcile",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("course", type=Path, help="the nbgrader course folder (nbgrader_config.py, autograded/)")
    parser.add_argument("--assignment", default=ASSIGNMENT)
    parser.add_argument("--out", type=Path, help="where grade-all's reports go (default: COURSE/reconcile)")
    args = parser.parse_args(argv)
    course = args.course.resolve()
    try:
        found, students = reconcile(course_directory(course), args.assignment, args.out or course / "reconcile")
    except CannotCompare as error:
        print(f"nbgrader-reconcile: {error}", file=sys.stderr)
        return 2
    of_students = f"{students} student{'' if students == 1 else 's'}"
    if not found:
        print(f"nbgrader and grade-all agree on every stage of {of_students}.")
        return 0
    per_student = len(course_modules())
    stages = sum(per_student if d.stage is None else 1 for d in found)
    print(f"nbgrader and grade-all differ on {stages} stage{'' if stages == 1 else 's'} of {of_students}:")
    for disagreement in found:
        print(disagreement.line())
    return 1


if __name__ == "__main__":
    sys.exit(main())
