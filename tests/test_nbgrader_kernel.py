"""nbgrader's autograde runs a student's notebooks in one kernel (grader/authoring/nbgrader/shared_kernel.py): one
kernel per student, not per notebook or per class; a notebook does not see the names an earlier one defined; and
what an earlier notebook changed in the grader is named by the reconciliation of the notebook it inflated."""

import re
import subprocess
import sys

import nbformat
import pytest

from grader.authoring.nbgrader.course import ASSIGNMENT
from grader.authoring.nbgrader.demo import nbgrader, prepare, solved_answers, submit
from grader.core.stages import STAGE_MODULES

pytestmark = pytest.mark.nbgrader

FIRST, SECOND = (f"{STAGE_MODULES[stage]}.ipynb" for stage in (1, 2))
KERNEL = re.compile(r"kernel (\d+)")


def _scratch(folder, notebook: str, source: str) -> None:
    """Put ``source`` in the notebook's scratch cell (the one between its answer and its test cells)."""
    stage = next(n for n, module in STAGE_MODULES.items() if f"{module}.ipynb" == notebook)
    path = folder / notebook
    ran = nbformat.read(path, as_version=4)
    next(c for c in ran.cells if c.id == f"stage{stage}-scratch").source = source
    nbformat.write(ran, path)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """ann and ben solve stages 1 and 2, each notebook printing its kernel's pid, stage 1 leaving a name behind that
    stage 2 reads; cat's stage 1 makes the check helper report full points and her stage 2 is the stub."""
    course = tmp_path_factory.mktemp("nbgrader-kernel") / "course"
    prepare(course)
    solved = solved_answers(course)
    for student in ("ann", "ben"):
        folder = submit(course, student, {FIRST: solved[FIRST], SECOND: solved[SECOND]})
        _scratch(folder, FIRST, "import os\nleftover = 1\nprint('kernel', os.getpid())")
        _scratch(folder, SECOND, "import os\nprint('kernel', os.getpid())\nprint(leftover)")
    cat = submit(course, "cat", {FIRST: solved[FIRST]})
    _scratch(cat, FIRST, "import grader.notebook\n\ngrader.notebook.check = lambda stage, hidden=False: 1.0")
    nbgrader(course, "autograde", ASSIGNMENT)
    return course


def _outputs(course, student: str, notebook: str) -> str:
    ran = nbformat.read(course / "autograded" / student / ASSIGNMENT / notebook, as_version=4)
    return "\n".join(
        str(output.get("text", "")) + str(output.get("ename", "")) for c in ran.cells for output in c.get("outputs", [])
    )


def _kernels(course, student: str) -> list[str]:
    return [KERNEL.search(_outputs(course, student, notebook)).group(1) for notebook in (FIRST, SECOND)]


def test_a_students_notebooks_share_one_kernel_and_students_do_not(course):
    ann, ben = _kernels(course, "ann"), _kernels(course, "ben")
    assert ann[0] == ann[1] and ben[0] == ben[1]
    assert ann[0] != ben[0]


def test_a_notebook_does_not_see_the_names_an_earlier_one_defined(course):
    assert "NameError" in _outputs(course, "ann", SECOND)
    assert "NameError" not in _outputs(course, "ann", FIRST)


def test_a_change_to_the_grader_in_an_earlier_notebook_is_named_where_it_inflated_a_score(course):
    done = subprocess.run(
        [sys.executable, "-m", "grader.authoring.nbgrader.reconcile", str(course)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    stage2 = [line for line in done.stdout.splitlines() if "cat" in line or FIRST in line]
    assert any(f"{FIRST}, which ran before it in the same kernel" in line for line in stage2), done.stdout
