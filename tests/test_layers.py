"""The grader's layers (grader/authoring/layers.py), read from every import of its source."""

import ast
import sys
from pathlib import Path

import pytest

from grader.authoring.imports import REPO, import_graph, package_modules
from grader.authoring.layers import ENTRY_POINTS, LAYERS, cycles, layer_of, violations

MAX_MODULE_LINES = 400
GRAPH = import_graph()


def test_each_layer_imports_only_the_layers_below_it():
    assert violations(GRAPH) == []


def test_no_two_modules_import_each_other_even_inside_a_function():
    assert cycles(GRAPH) == []


def test_every_module_sits_in_a_layer():
    assert {layer_of(module) for module in GRAPH} <= set(LAYERS)
    flat = [module for module in GRAPH if module.count(".") == 1 and module.split(".")[1] not in LAYERS]
    assert set(flat) <= set(ENTRY_POINTS)


def test_core_needs_the_standard_library_alone():
    """core/ is what every view and tool reads: it must import without torch or pytest."""
    for module, path in package_modules("grader.core"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module]
                if isinstance(node, ast.ImportFrom) and node.module and not node.level
                else []
            )
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or name.startswith(("grader.core", "grader.runner.escaping")), (
                    f"{module} imports {name}"
                )


def test_no_module_is_longer_than_a_reader_keeps_in_mind():
    long = {
        str(path.relative_to(REPO)): lines
        for _, path in package_modules("grader")
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for folder in {path.parent for path in root.rglob("*.py")}:
        (folder / "__init__.py").touch()
    return root


@pytest.mark.parametrize(
    ("importer", "text", "named"),
    [
        (
            "grader/core/stages.py",
            "from grader.judge.plugin import GradingPlugin\n",
            "grader.core.stages:1 imports grader.judge.plugin (core may not import judge)",
        ),
        (
            "grader/runner/worker.py",
            "def f():\n    from grader.core.stages import STAGES\n",
            "grader.runner.worker:2 imports grader.core.stages (runner may not import core)",
        ),
        (
            "grader/views/terminal.py",
            "import grader.cli.grade\n",
            "grader.views.terminal:1 imports grader.cli.grade (views may not import cli)",
        ),
        (
            "grader/classroom/plan.py",
            "from ..authoring.release import build\n",
            "grader.classroom.plan:1 imports grader.authoring.release (classroom may not import authoring)",
        ),
    ],
)
def test_one_wrong_import_is_named_with_its_line(tmp_path, importer, text, named):
    files = {
        "grader/core/stages.py": "",
        "grader/judge/plugin.py": "from grader.core import stages\n",
        "grader/runner/worker.py": "",
        "grader/cli/grade.py": "",
        "grader/views/terminal.py": "",
        "grader/classroom/plan.py": "",
        "grader/authoring/release.py": "from grader.core.stages import x\n",
    }
    files[importer] = text
    root = _tree(tmp_path, files)
    assert violations(import_graph(root=root)) == [named]


def test_a_circle_is_found_however_long(tmp_path):
    root = _tree(
        tmp_path,
        {
            "grader/judge/a.py": "from grader.judge import b\n",
            "grader/judge/b.py": "def later():\n    import grader.judge.c\n",
            "grader/judge/c.py": "from grader.judge.a import x\n",
            "grader/judge/d.py": "from grader.judge import a\n",
        },
    )
    assert cycles(import_graph(root=root)) == [["grader.judge.a", "grader.judge.b", "grader.judge.c"]]
