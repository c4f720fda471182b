"""Write the nbgrader course from solutions/ and docs/: one assignment, one notebook per stage.

    python -m grader.authoring.nbgrader.course [COURSE_DIR] [--course FILE]    # default: build/nbgrader

The course's stages are those course.toml grades (the core; the bonus too when it says so).

The generated parts are rebuilt from the same sources as exercises/, so the notebooks, the .py
stubs and `make grade` cannot disagree; what the instructor adds is kept:
  * nbgrader_config_generated.py is rewritten on every run; nbgrader_config.py, which loads it,
    is the instructor's and is written only when the course has none;
  * in source/attention/*.ipynb the generated cells (known by their fixed ids) are replaced, so
    a points change reaches them, and the instructor's own cells stay where they stand.
Each notebook's generated cells are
  * the stage's explanation and worked example (docs/stage<N>.md), read-only;
  * the answer cell: ``%%writefile stage<N>_<topic>.py`` and the solution module, its solution
    regions between nbgrader's markers (nbgrader clears them for students);
  * a scratch cell that imports what the answer cell saved;
  * two autograder test cells, worth the stage's visible and hidden points (grader/core/stages.toml).
    Both call the grader itself (grader/notebook.py); the hidden one is a hidden-tests region,
    so the student's copy holds no hidden check at all and the feedback shows no hidden data;
    what stays of it in the student's copy says what the cell is for.
"""

import argparse
import ast
import re
import sys
from pathlib import Path

import nbformat
from nbformat.corpus.words import generate_corpus_id

from grader.authoring.stubs import learner_imports
from grader.core.course import CourseError as CourseSettingsError
from grader.core.course import course_stages
from grader.core.points import points_in_use
from grader.core.stages import STAGE_MODULES, STAGES, registry
from grader.judge.plugin import planned_checks

REPO = Path(__file__).resolve().parents[3]
DEFAULT_COURSE = REPO / "build" / "nbgrader"
ASSIGNMENT = "attention"
DOC_SECTIONS = ("The idea", "What to implement", "Worked example")
GENERATED_CONFIG = "nbgrader_config_generated.py"
INSTRUCTOR_CONFIG = "nbgrader_config.py"

GENERATED_SETTINGS = '''"""nbgrader settings of the attention course, from the repository: `make nbgrader` rewrites this
file every time. Put your own settings in nbgrader_config.py, which loads this one first."""

c = get_config()  # noqa: F821 - nbgrader defines it

c.CourseDirectory.course_id = "attention-exercises"
# A test cell runs the grader in its own process (about 3 s; torch is imported there), and a
# hanging submission is cut off by the grader's own limits first; nbgrader's default is 30 s.
c.Execute.timeout = 300
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\\nraise NotImplementedError()"}
# A test cell the student deleted is put back before grading (nbgrader's own feature): the hidden
# one looks nearly empty in the students' copy, and grading without it would drop its points.
c.OverwriteCells.add_missing_cells = True
# Each notebook's kernel talks to nbgrader over local sockets, not TCP: ipykernel warns, once per notebook, that
# TCP carries code and outputs unencrypted. The sockets' path is absolute (the kernel runs in the notebook's
# folder), in a folder of this run's own. Windows has no ipc transport: it keeps TCP there.
import atexit  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

if sys.platform != "win32":
    _sockets = tempfile.mkdtemp(prefix="nbgrader-kernel-")
    atexit.register(shutil.rmtree, _sockets, True)
    c.KernelManager.transport = "ipc"
    c.KernelManager.ip = _sockets + "/kernel"
# nbgrader's OverwriteCells, without its false "checksum has changed" alarm on a hidden-test cell as released
# (jupyter/nbgrader#1961; grader/authoring/nbgrader/hidden_tests.py): a real change is still reported.
from nbgrader.preprocessors import CheckCellMetadata, ClearOutput, DeduplicateIds, OverwriteKernelspec  # noqa: E402

from grader.authoring.nbgrader.hidden_tests import RestoreHiddenTests  # noqa: E402

c.Autograde.sanitize_preprocessors = [
    ClearOutput,
    DeduplicateIds,
    OverwriteKernelspec,
    RestoreHiddenTests,
    CheckCellMetadata,
]
# A student's notebooks run in one kernel (grader/authoring/nbgrader/shared_kernel.py), its names emptied between
# two notebooks: torch and the grader start once per student, not once per notebook. nbgrader's own Execute runs
# each notebook in a kernel of its own: put it back in nbgrader_config.py to have that.
from nbgrader.converters import Autograde  # noqa: E402
from nbgrader.preprocessors import Execute  # noqa: E402

from grader.authoring.nbgrader.shared_kernel import OneKernelPerSubmission  # noqa: E402

c.Autograde.autograde_preprocessors = [  # nbgrader's own list, its Execute replaced (c.Execute settings apply)
    OneKernelPerSubmission if step is Execute else step
    for step in Autograde.class_traits()["autograde_preprocessors"].default()
]
'''

INSTRUCTOR_SETTINGS = f'''"""nbgrader configuration of the attention course: yours to edit. `make nbgrader` writes
this file only when the course has none; its own settings are in {GENERATED_CONFIG},
which it rewrites."""

c = get_config()  # noqa: F821 - nbgrader defines it
load_subconfig("{GENERATED_CONFIG}")  # noqa: F821 - first, so that a setting below wins

# Your settings (docs/instructors.md, "An nbgrader course"). For an LMS download and
# `nbgrader zip_collect`, one of:
# c.ZipCollectApp.collector_plugin = "grader.authoring.nbgrader.lms.CanvasCollector"
# c.ZipCollectApp.collector_plugin = "grader.authoring.nbgrader.lms.MoodleCollector"
'''


class CourseError(Exception):
    """The course folder holds something that cannot be regenerated; the message says what to do."""


def _metadata(
    grade_id: str, *, grade: bool = False, solution: bool = False, locked: bool = True, points: float | None = None
) -> dict:
    """nbgrader's cell metadata, schema version 3."""
    fields = {
        "grade": grade,
        "grade_id": grade_id,
        "locked": locked,
        "schema_version": 3,
        "solution": solution,
        "task": False,
    }
    if points is not None:
        fields["points"] = points
    return {"nbgrader": fields}


def _cell(kind: str, cell_id: str, source: str, metadata: dict | None = None) -> nbformat.NotebookNode:
    make = nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_code_cell
    cell = make(source, metadata=metadata or {})
    cell.id = cell_id  # fixed ids: regenerating the course changes nothing, and finds these cells again
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


def autograder_cell_ids(stage: int) -> dict[str, str]:
    """The grade ids of the stage's two test cells, by visibility."""
    return {visibility: f"stage{stage}-{visibility}" for visibility in ("visible", "hidden")}


def hidden_cell_notice(points: float) -> str:
    """What the students' copy of the hidden test cell shows: nbgrader removes the rest."""
    return (
        f"# Hidden checks ({points:g} points): this cell runs them when your notebook is graded,\n"
        f"# which is why it looks empty here. Keep it."
    )


def generated_cells(stage: int, points: dict[str, float]) -> list[nbformat.NotebookNode]:
    """The stage notebook's generated cells, in order; ``points``: its visible and hidden totals."""
    module = STAGE_MODULES[stage]
    name = f"stage{stage}"
    tests = autograder_cell_ids(stage)
    how = (
        f"**How this notebook works.** Write your code in the answer cell below, between the lines "
        f"`# YOUR CODE HERE`. Running that cell saves it as `{module}.py` (keep its first line, "
        f"`%%writefile {module}.py`), the same file as the `.py` exercise, so `make grade` and this "
        f"notebook grade the same code. The last two cells run the grader: the visible checks now, "
        f"the hidden ones when your notebook is graded."
    )
    return [
        _cell("markdown", f"{name}-explanation", f"{explanation(stage)}\n\n{how}", _metadata(f"{name}-explanation")),
        _cell("code", f"{name}-answer", answer_source(stage), _metadata(f"{name}-answer", solution=True, locked=False)),
        _cell(
            "code",
            f"{name}-scratch",
            f"from grader.notebook import load\n\n{name} = load({stage})  # {module}.py, as the cell above saved it\n"
            f"# try it here, e.g. on the worked example: {name}.<name>(...)",
        ),
        _cell(
            "code",
            tests["visible"],
            f"# Visible checks: the documents' worked examples ({points['visible']:g} points).\n"
            f"from grader.notebook import check\n\ncheck({stage})",
            _metadata(tests["visible"], grade=True, points=points["visible"]),
        ),
        _cell(
            "code",
            tests["hidden"],
            f"{hidden_cell_notice(points['hidden'])}\n"
            f"### BEGIN HIDDEN TESTS\nfrom grader.notebook import check\n\ncheck({stage}, hidden=True)\n"
            f"### END HIDDEN TESTS",
            _metadata(tests["hidden"], grade=True, points=points["hidden"]),
        ),
    ]


def _generated_name(cell: nbformat.NotebookNode, names: set[str]) -> str | None:
    """Which generated cell ``cell`` is, by its id or its nbgrader grade id; None for the instructor's own."""
    for name in (cell.get("id"), cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")):
        if name in names:
            return name
    return None


def merge_cells(
    generated: list[nbformat.NotebookNode], existing: list[nbformat.NotebookNode]
) -> list[nbformat.NotebookNode]:
    """``generated`` in its order, with every other cell of ``existing`` kept where it stands.

    A generated cell replaces its old version; one the old notebook lacks goes back right after
    the generated cell before it; a second copy of one (a duplicated cell) is dropped.
    """
    order = [cell.id for cell in generated]
    by_name = dict(zip(order, generated))
    present = {_generated_name(cell, set(order)) for cell in existing}
    cells, placed = [], set()
    for cell in existing:
        name = _generated_name(cell, set(order))
        if name is None:
            cell.setdefault("id", generate_corpus_id())  # a cell from an older format has none
            cells.append(cell)
            continue
        end = order.index(name) + 1
        while end < len(order) and order[end] not in present:
            end += 1
        for earlier in order[:end]:
            if earlier not in placed:
                cells.append(by_name[earlier])
                placed.add(earlier)
    return cells + [by_name[name] for name in order if name not in placed]


def stage_notebook(
    stage: int, points: dict[str, float], existing: nbformat.NotebookNode | None = None
) -> nbformat.NotebookNode:
    """The source notebook of one stage; ``points``: its visible and hidden totals; ``existing``:
    the notebook as the course holds it, whose own cells and metadata are kept."""
    generated = generated_cells(stage, points)
    notebook = nbformat.v4.new_notebook(cells=merge_cells(generated, existing.cells if existing else []))
    notebook.metadata = {
        **(existing.metadata if existing else {}),
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
        "title": f"Stage {stage}: {registry()[stage].title}",
    }
    nbformat.validate(notebook)
    return notebook


def stage_points(stages: list[int] | None = None) -> dict[int, dict[str, float]]:
    """Visible and hidden points of each of ``stages`` (None: the course's), from the grader's own checks
    and points table."""
    stages = course_stages() if stages is None else stages
    totals = {stage: {"visible": 0.0, "hidden": 0.0} for stage in stages}
    for check in planned_checks(stages, points_in_use()):
        totals[check.stage][check.visibility] += check.points
    return totals


def _existing_notebook(path: Path) -> nbformat.NotebookNode | None:
    if not path.exists():
        return None
    try:
        return nbformat.read(path, as_version=4)
    except Exception as error:  # nbformat raises many kinds for a damaged file; each gets the same advice
        raise CourseError(
            f"{path} cannot be read ({type(error).__name__}): repair it, or move it away to have it generated afresh"
        ) from None


def write_course(root: Path, course: Path | None = None) -> list[Path]:
    """Write the generated settings and source/attention/*.ipynb under ``root``, keeping the instructor's
    settings and cells; the paths written (nbgrader_config.py only when the course had none). The
    notebooks are those of the stages the course file at ``course`` grades (None: the repository's)."""
    stages = course_stages(course)
    folder = root / "source" / ASSIGNMENT
    folder.mkdir(parents=True, exist_ok=True)
    (root / GENERATED_CONFIG).write_text(GENERATED_SETTINGS, encoding="utf-8")
    written = [root / GENERATED_CONFIG]
    if not (root / INSTRUCTOR_CONFIG).exists():
        (root / INSTRUCTOR_CONFIG).write_text(INSTRUCTOR_SETTINGS, encoding="utf-8")
        written.append(root / INSTRUCTOR_CONFIG)
    for stage, points in stage_points(stages).items():
        path = folder / f"{STAGE_MODULES[stage]}.ipynb"
        notebook = stage_notebook(stage, points, _existing_notebook(path))
        path.write_text(nbformat.writes(notebook) + "\n", encoding="utf-8")
        written.append(path)
    return written


def instructor_cell_count(notebooks: list[Path]) -> int:
    """How many cells of ``notebooks`` (the generated ones: a notebook of the instructor's own is
    never touched, so none of its cells is "kept") are the instructor's own."""
    names = {cell.id for stage, points in stage_points(STAGES).items() for cell in generated_cells(stage, points)}
    return sum(
        _generated_name(cell, names) is None for path in notebooks for cell in nbformat.read(path, as_version=4).cells
    )


def loads_generated_settings(config: Path) -> bool:
    """Whether the instructor's nbgrader_config.py calls ``load_subconfig`` on the generated settings
    file: read as Python, so a commented-out call or the name in a string does not count."""
    try:
        tree = ast.parse(config.read_text(encoding="utf-8"))
    except (SyntaxError, ValueError):
        return False
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "load_subconfig"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value == GENERATED_CONFIG
        for node in ast.walk(tree)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("course", nargs="?", type=Path, default=DEFAULT_COURSE)
    parser.add_argument(
        "--course-file",
        type=Path,
        metavar="FILE",
        help="the course settings (default: course.toml at the repository's root, if any)",
    )
    args = parser.parse_args(argv)
    try:
        written = write_course(args.course, args.course_file)
    except (CourseError, CourseSettingsError) as error:
        print(f"make nbgrader: {error}", file=sys.stderr)
        return 1
    config = args.course / INSTRUCTOR_CONFIG
    notebooks = [p for p in written if p.suffix == ".ipynb"]
    print(
        f"nbgrader course written to {args.course}: {len(notebooks)} notebooks in source/{ASSIGNMENT}/ "
        f"({instructor_cell_count(notebooks)} cells of yours kept), {GENERATED_CONFIG}; "
        f"{INSTRUCTOR_CONFIG} {'written' if config in written else 'kept as it is'}"
    )
    if not loads_generated_settings(config):
        print(
            f"make nbgrader: {config} does not load {GENERATED_CONFIG}: add the line "
            f'load_subconfig("{GENERATED_CONFIG}") after c = get_config(), or move the file away to have it '
            f"written again",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
