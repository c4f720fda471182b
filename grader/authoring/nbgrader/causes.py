"""Why nbgrader's score for a stage notebook differs from grade-all's, read from the notebook as nbgrader ran it:
its graded cells changed, the grader tampered with or shadowed, the working folder moved, the stage file unsaved."""

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat
from IPython.core.inputtransformer2 import TransformerManager
from nbgrader.utils import compute_checksum

from grader.authoring.nbgrader.course import autograder_cell_ids
from grader.core.stages import STAGE_MODULES
from grader.intake.notebook_files import cell_write
from grader.runner.escaping import printable
from grader.views.notebook import HIDDEN_LATER, NOT_BESIDE, SUMMARY

GRADER_PACKAGE = Path(__file__).resolve().parents[2]  # the grader the test cells are meant to run
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")  # the colours of an IPython traceback


# Calls that change the list or dict they are called on.
MUTATING_METHODS = {
    "__setitem__",
    "__delitem__",
    "append",
    "extend",
    "insert",
    "pop",
    "remove",
    "clear",
    "update",
    "setdefault",
    "popitem",
}


@dataclass(frozen=True)
class GradedCell:
    name: str
    points: float
    checksum: str


def _read(path: Path) -> nbformat.NotebookNode | None:
    try:
        return nbformat.read(path, as_version=4)
    except (OSError, ValueError):  # absent, or not a notebook: no evidence either way
        return None


def _grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def _label(index: int, cell) -> str:
    return f"cell {index + 1} (id {printable(str(cell.get('id', '?')), keep_newlines=False)})"


def _python(source: str) -> ast.Module | None:
    """A code cell as the kernel runs it (IPython's magics made Python); None if it does not parse."""
    try:
        return ast.parse(TransformerManager().transform_cell(source))
    except (SyntaxError, ValueError):
        return None


def graded_cell_causes(ran, handed_in, cells: list[GradedCell]) -> list[str]:
    """Test cells missing from the notebook nbgrader ran, or run altered. A cell the student deleted
    and nbgrader put back (OverwriteCells.add_missing_cells) ran as released: no cause."""
    ran_cells = {_grade_id(c): c for c in ran.cells}
    handed_in_ids = {_grade_id(c) for c in handed_in.cells} if handed_in else set()
    causes = []
    for cell in cells:
        if cell.name not in ran_cells:
            causes.append(
                f"test cell {cell.name} ({cell.points:g} points) is missing from the handed-in notebook, "
                f"so nbgrader never ran it"
            )
        elif cell.name in handed_in_ids and compute_checksum(ran_cells[cell.name]) != cell.checksum:
            causes.append(f"test cell {cell.name} ran altered (its checksum is not the release's)")
    return causes


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """``node``'s dotted name with imported names resolved (gn.check -> grader.notebook.check)."""
    attributes = []
    while isinstance(node, ast.Attribute):
        attributes.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in aliases:
        return ".".join([aliases[node.id], *reversed(attributes)])
    return None


def _imports(node: ast.Import | ast.ImportFrom, aliases: dict[str, str]) -> None:
    for alias in node.names:
        if isinstance(node, ast.ImportFrom):
            aliases[alias.asname or alias.name] = f"{node.module or ''}.{alias.name}"
        else:
            top = alias.name.partition(".")[0]  # `import a.b` binds a; `import a.b as x` binds x to a.b
            aliases[alias.asname or top] = alias.name if alias.asname else top


def _changed(target: ast.AST, aliases: dict[str, str]) -> str | None:
    """What an assignment or del of ``target`` changes, when that is the grader or the import machinery."""
    if isinstance(target, ast.Attribute):
        name = _dotted(target, aliases)
        if name and (name.startswith("grader.") or name in ("sys.modules", "sys.path")):
            return name
    if isinstance(target, ast.Subscript) and _dotted(target.value, aliases) in ("sys.modules", "sys.path"):
        return _dotted(target.value, aliases)
    if isinstance(target, (ast.Tuple, ast.List)):
        return next(filter(None, (_changed(t, aliases) for t in target.elts)), None)
    return None


def _call_changes(call: ast.Call, aliases: dict[str, str]) -> str | None:
    if isinstance(call.func, ast.Name) and call.func.id in ("setattr", "delattr") and call.args:
        owner = _dotted(call.args[0], aliases)
        if not owner or owner.partition(".")[0] != "grader":
            return None
        attribute = call.args[1] if len(call.args) > 1 else None
        named = isinstance(attribute, ast.Constant) and isinstance(attribute.value, str)
        return f"{owner}.{attribute.value}" if named else owner
    name = _dotted(call.func, aliases)
    if name and name.rpartition(".")[2] in MUTATING_METHODS and name.rpartition(".")[0] in ("sys.modules", "sys.path"):
        return name.rpartition(".")[0]
    return None


def _assigned(node: ast.AST) -> list[ast.AST]:
    """What an assignment or del statement binds or removes."""
    if isinstance(node, (ast.Assign, ast.Delete)):
        return node.targets
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return [node.target]
    return []


def tampering_causes(ran) -> list[str]:
    """Code cells (test cells aside: nbgrader runs the gradebook's copy of those) that change what
    the test cells' `from grader.notebook import check` gives them."""
    aliases: dict[str, str] = {}  # imports hold across cells: one kernel runs them all
    causes = []
    for index, cell in enumerate(ran.cells):
        tree = (
            None
            if cell.cell_type != "code" or cell.get("metadata", {}).get("nbgrader", {}).get("grade")
            else _python(cell.source)
        )
        nodes = list(ast.walk(tree)) if tree else []
        for node in nodes:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                _imports(node, aliases)
        changes = {
            (node.lineno, name)
            for node in nodes
            for name in [
                *(_changed(t, aliases) for t in _assigned(node)),
                _call_changes(node, aliases) if isinstance(node, ast.Call) else None,
            ]
            if name
        }
        for line, name in sorted(changes):
            effect = (
                "the test cells call the grader through it"
                if name.startswith("grader.")
                else "the test cells' `import grader` may not have loaded the grader"
            )
            causes.append(f"{_label(index, cell)} changes {name} (line {line}): {effect}")
    return causes


def _test_cell_outputs(ran, stage: int) -> list[dict]:
    """The outputs of the stage's test cells, as nbgrader's run of the notebook left them."""
    names = set(autograder_cell_ids(stage).values())
    return [
        output
        for cell in ran.cells
        if cell.cell_type == "code" and _grade_id(cell) in names
        for output in cell.get("outputs", [])
    ]


def _output_text(output: dict) -> str:
    """An output's text: a stream's, or an error's name, value and traceback (colours stripped)."""
    if output.get("output_type") == "error":
        text = "\n".join([output.get("ename", ""), output.get("evalue", ""), *output.get("traceback", [])])
    else:
        text = output.get("text", "")
        text = "".join(text) if isinstance(text, list) else text
    return ANSI_ESCAPE.sub("", text)


def _real_grader_ran(outputs: list[dict], stage: int) -> bool:
    """Whether a test cell's output shows the grader package's own check(): its summary line, its
    notice for the hidden cell, or a traceback through its files."""
    own = re.compile(
        "|".join(
            re.escape(text)
            for text in (
                SUMMARY.format(kind="visible", stage=stage),
                SUMMARY.format(kind="hidden", stage=stage),
                HIDDEN_LATER,
                str(GRADER_PACKAGE),
            )
        )
    )
    return any(own.search(_output_text(output)) for output in outputs)


def shadowing_causes(ran, folder: Path, stage: int) -> list[str]:
    """A module named grader beside the notebook, when it is what the test cells ran: the kernel's
    path looks beside the notebook first, but a cell may have moved the kernel elsewhere, so only
    test cells whose output lacks the grader package's own output are evidence that it ran."""
    shadows = [name for name in ("grader.py", "grader") if (folder / name).exists()]
    if not shadows or _real_grader_ran(_test_cell_outputs(ran, stage), stage):
        return []
    return [
        f"{name} beside the notebook comes before the grader package on the kernel's path, and the test "
        f"cells' output is not the grader's"
        for name in shadows
    ]


def _changes_directory(node: ast.AST, aliases: dict[str, str]) -> bool:
    if not isinstance(node, ast.Call):
        return False
    if _dotted(node.func, aliases) == "os.chdir":
        return True
    magic = _dotted(node.func, {"get_ipython": "get_ipython"})  # %cd, as IPython's transformer writes it
    return (
        magic == "get_ipython.run_line_magic"
        and bool(node.args)
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value == "cd"
    )


def working_directory_causes(ran, folder: Path, stage: int) -> list[str]:
    """A test cell that looked for the stage file somewhere other than beside the notebook, as its
    output says (the grader's "<file> is not in <folder>"), with the cells that change the kernel's
    working directory."""
    name = f"{STAGE_MODULES[stage]}.py"
    # grader.notebook's own words, with the folder it looked in caught
    said_not_beside = re.compile(re.escape(NOT_BESIDE.format(name=name, folder="\0")).replace("\0", "(/.*?)"))
    looked = {
        match[1] for output in _test_cell_outputs(ran, stage) if (match := said_not_beside.search(_output_text(output)))
    }
    elsewhere = sorted(where for where in looked if Path(where) != folder.resolve())
    if not elsewhere:
        return []
    aliases: dict[str, str] = {}
    movers = []
    for index, cell in enumerate(ran.cells):
        test_cell = _grade_id(cell) in autograder_cell_ids(stage).values()
        tree = _python(cell.source) if cell.cell_type == "code" and not test_cell else None
        for node in ast.walk(tree) if tree else []:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                _imports(node, aliases)
            elif _changes_directory(node, aliases):
                movers.append(f"{_label(index, cell)} changes the working directory (line {node.lineno})")
    said = (
        f"the test cells' grader looked for {name} in {elsewhere[0]}, not beside the notebook "
        f'(its output: "{name} is not in {elsewhere[0]}")'
    )
    return [f"{'; '.join(movers)}: {said}" if movers else said]


def _written_file(cell) -> tuple[str, str, bool] | None:
    """(file name, text, appends) of a code cell's %%writefile, read as the submission's intake reads it."""
    return cell_write(cell.source) if cell.cell_type == "code" else None


def _names_file(cell, name: str) -> bool:
    tree = _python(cell.source) if cell.cell_type == "code" else None
    return any(isinstance(n, ast.Constant) and n.value == name for n in ast.walk(tree)) if tree else False


def stage_file_causes(ran, folder: Path, stage: int) -> list[str]:
    """The stage file beside the notebook against what the answer cell's %%writefile wrote."""
    name = f"{STAGE_MODULES[stage]}.py"
    answer_index = next((i for i, c in enumerate(ran.cells) if _grade_id(c) == f"stage{stage}-answer"), None)
    if answer_index is None:
        return [f"the answer cell stage{stage}-answer is missing from the handed-in notebook"]
    write = _written_file(ran.cells[answer_index])
    if write is None or write[0] != name:
        return [f"the answer cell does not start with %%writefile {name}, so it never saved the stage file"]
    _, text, appends = write
    path = folder / name
    if appends:
        return []  # what an appending cell leaves depends on what came before: no claim
    if not path.is_file():
        return [f"{name} is not beside the notebook, though the answer cell writes it"]
    if path.read_bytes() == text.encode("utf-8"):
        return []
    others = [
        _label(i, c)
        for i, c in enumerate(ran.cells)
        if i != answer_index and ((w := _written_file(c)) and w[0] == name or _names_file(c, name))
    ]
    return [
        f"{name} beside the notebook is not what the answer cell's %%writefile wrote"
        + (f" ({', '.join(others)} also name{'s' if len(others) == 1 else ''} it)" if others else "")
    ]
