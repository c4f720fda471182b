"""Write the nbgrader course from solutions/ and docs/: one assignment, one notebook per stage.

    python -m grader.authoring.nbgrader_course [COURSE_DIR]     # default: build/nbgrader

The course is generated, never edited: it is rebuilt from the same sources as exercises/, so the
notebooks, the .py stubs and `make grade` cannot disagree. Each notebook holds
  * the stage's explanation and worked example (docs/stage<N>.md), read-only;
  * the answer cell: ``%%writefile stage<N>_<topic>.py`` and the solution module, its solution
    regions between nbgrader's markers (nbgrader clears them for students);
  * a scratch cell that imports what the answer cell saved;
  * two autograder test cells, worth the stage's visible and hidden points (grader/points.toml).
    Both call the grader itself (grader/notebook.py); the hidden one is a hidden-tests region,
    so the student's copy holds no hidden check at all and the feedback shows no hidden data.
"""

import argparse
import re
import sys
from pathlib import Path

import nbformat

from grader.authoring.stubs import learner_imports
from grader.plugin import planned_checks
from grader.report import TITLES
from grader.runner.implementation import STAGE_MODULES

REPO = Path(__file__).resolve().parents[2]
DEFAULT_COURSE = REPO / "build" / "nbgrader"
ASSIGNMENT = "attention"
STAGES = sorted(STAGE_MODULES)
DOC_SECTIONS = ("The idea", "What to implement", "Worked example")

CONFIG = '''"""nbgrader configuration of the attention course; written by `make nbgrader`, do not edit."""

c = get_config()  # noqa: F821 - nbgrader defines it

c.CourseDirectory.course_id = "attention-exercises"
# A test cell runs the grader in its own process (about 3 s; torch is imported there), and a
# hanging submission is cut off by the grader's own limits first; nbgrader's default is 30 s.
c.Execute.timeout = 300
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\\nraise NotImplementedError()"}
'''


def _metadata(grade_id: str, *, grade: bool = False, solution: bool = False, locked: bool = True,
              points: float | None = None) -> dict:
    """nbgrader's cell metadata, schema version 3."""
    fields = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution,
              "task": False}
    if points is not None:
        fields["points"] = points
    return {"nbgrader": fields}


def _cell(kind: str, cell_id: str, source: str, metadata: dict | None = None) -> nbformat.NotebookNode:
    make = nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_code_cell
    cell = make(source, metadata=metadata or {})
    cell.id = cell_id  # fixed ids: regenerating the course changes nothing
    return cell


def explanation(stage: int) -> str:
    """The stage's idea, task and worked example, taken from its docs page."""
    text = (REPO / "docs" / f"stage{stage}.md").read_text(encoding="utf-8")
    title = text.splitlines()[0]
    sections = re.split(r"^(?=## )", text, flags=re.MULTILINE)[1:]
    kept = [s.strip() for s in sections if s.removeprefix("## ").startswith(DOC_SECTIONS)]
    return "\n\n".join([title, *kept])


def answer_cell_source(stage: int, code: str) -> str:
    """An answer cell holding ``code``: running it saves the code as the stage's file."""
    return f"%%writefile {STAGE_MODULES[stage]}.py\n{code}".rstrip("\n")


def answer_source(stage: int) -> str:
    """The source notebook's answer cell: the solution module, as a learner's file imports."""
    solution = (REPO / "solutions" / f"{STAGE_MODULES[stage]}.py").read_text(encoding="utf-8")
    return answer_cell_source(stage, learner_imports(solution))


def answer_cell(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook's one answer cell (nbgrader's solution cell)."""
    return next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("solution"))


def stage_notebook(stage: int, points: dict[str, float]) -> nbformat.NotebookNode:
    """The source notebook of one stage; ``points``: its visible and hidden totals."""
    module = STAGE_MODULES[stage]
    name = f"stage{stage}"
    how = (f"**How this notebook works.** Write your code in the answer cell below, between the lines "
           f"`# YOUR CODE HERE`. Running that cell saves it as `{module}.py` (keep its first line, "
           f"`%%writefile {module}.py`), the same file as the `.py` exercise, so `make grade` and this "
           f"notebook grade the same code. The last two cells run the grader: the visible checks now, "
           f"the hidden ones when your notebook is graded.")
    cells = [
        _cell("markdown", f"{name}-explanation", f"{explanation(stage)}\n\n{how}", _metadata(f"{name}-explanation")),
        _cell("code", f"{name}-answer", answer_source(stage), _metadata(f"{name}-answer", solution=True, locked=False)),
        _cell("code", f"{name}-scratch",
              f"from grader.notebook import load\n\n{name} = load({stage})  # {module}.py, as the cell above saved it\n"
              f"# try it here, e.g. on the worked example: {name}.<name>(...)"),
        _cell("code", f"{name}-visible",
              f"# Visible checks: the documents' worked examples ({points['visible']:g} points).\n"
              f"from grader.notebook import check\n\ncheck({stage})",
              _metadata(f"{name}-visible", grade=True, points=points["visible"])),
        _cell("code", f"{name}-hidden",
              f"# Hidden checks ({points['hidden']:g} points): they run when your notebook is graded.\n"
              f"### BEGIN HIDDEN TESTS\nfrom grader.notebook import check\n\ncheck({stage}, hidden=True)\n"
              f"### END HIDDEN TESTS",
              _metadata(f"{name}-hidden", grade=True, points=points["hidden"])),
    ]
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata = {
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
        "title": f"Stage {stage}: {TITLES[stage]}",
    }
    nbformat.validate(notebook)
    return notebook


def stage_points() -> dict[int, dict[str, float]]:
    """Visible and hidden points per stage, from the grader's own checks and points table."""
    totals = {stage: {"visible": 0.0, "hidden": 0.0} for stage in STAGES}
    for check in planned_checks(STAGES):
        totals[check.stage][check.visibility] += check.points
    return totals


def write_course(root: Path) -> list[Path]:
    """Write nbgrader_config.py and source/attention/*.ipynb under ``root``; the paths written."""
    folder = root / "source" / ASSIGNMENT
    folder.mkdir(parents=True, exist_ok=True)
    (root / "nbgrader_config.py").write_text(CONFIG, encoding="utf-8")
    written = [root / "nbgrader_config.py"]
    for stage, points in stage_points().items():
        path = folder / f"{STAGE_MODULES[stage]}.ipynb"
        path.write_text(nbformat.writes(stage_notebook(stage, points)) + "\n", encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("course", nargs="?", type=Path, default=DEFAULT_COURSE)
    args = parser.parse_args(argv)
    written = write_course(args.course)
    print(f"nbgrader course written to {args.course}: {len(written) - 1} notebooks in source/{ASSIGNMENT}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
