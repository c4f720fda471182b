"""What an artefact ships of the grader: the modules its entry points import, found by reading them.

The release and the Gradescope zip never list the grader's files by hand. Each names its entry points
(the modules its users run: `python -m grader`, grader.notebook, the check modules pytest collects) and
ships every module they import, directly or through another one, at the top of a file or inside a
function, plus every module a string of theirs names in full (`-m grader.runner.zygote`), plus the data
files of the shipped packages that a shipped module names (stages.toml, checks/pytest.ini). A module
may be given as text instead of its file (a check module without its hidden checks): then what that
text imports is what counts, so a module only hidden checks used is not shipped.

The build stops, naming the file and line, when an import of the grader resolves to no file, or when
the closure reaches a module the artefact must never hold (grader.authoring, solutions, tests).
"""

import ast
import re
from pathlib import Path

from grader.authoring.imports import REPO, imported_modules, module_file, package_modules, parents

MODULE_NAME = re.compile(r"grader(\.[A-Za-z_][A-Za-z0-9_]*)+")  # a string that names a module, e.g. for -m
SCRIPT_MODULE = re.compile(r"(-m\s+|\bfrom\s+|\bimport\s+)(grader(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\b")


class ShippingError(ValueError):
    """A grader import that cannot be resolved, or one the artefact must not ship; the message says which."""


def _named(tree: ast.AST, root: Path) -> list[tuple[str, int]]:
    """(module, line) for every string constant that names an existing module of PACKAGES in full."""
    return [
        (node.value, node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and MODULE_NAME.fullmatch(node.value)
        and module_file(node.value, root)
    ]


def script_modules(text: str) -> list[str]:
    """The grader modules a shell script, Makefile or workflow runs (``-m grader``: grader.__main__) or imports."""
    found = []
    for how, module in SCRIPT_MODULE.findall(text):
        path = module_file(module)
        run_package = how.startswith("-m") and path is not None and path.name == "__init__.py"
        found.append(f"{module}.__main__" if run_package else module)
    return list(dict.fromkeys(found))


def closure(
    entries: list[str], sources: dict[str, str] | None = None, never: tuple[str, ...] = (), root: Path = REPO
) -> dict[str, Path]:
    """Module name -> file, for ``entries`` and everything they import; ``sources``: module name -> the text
    to read instead of its file; ``never``: module prefixes whose reach stops the build."""
    sources = sources or {}
    shipped: dict[str, Path] = {}
    waiting = [(entry, "the entry points", 0) for entry in entries]
    while waiting:
        name, importer, line = waiting.pop()
        for module in parents(name):
            if module in shipped:
                continue
            if any(module == prefix or module.startswith(f"{prefix}.") for prefix in never):
                raise ShippingError(f"{importer}:{line} imports {module}, which this artefact must never ship")
            path = module_file(module, root)
            if path is None:
                raise ShippingError(f"{importer}:{line} imports {module}, which is no file under {root}")
            shipped[module] = path
            relative = path.relative_to(root).as_posix()
            try:
                tree = ast.parse(sources.get(module) or path.read_text(encoding="utf-8"), relative)
            except SyntaxError as error:
                raise ShippingError(f"{relative} cannot be read as Python: {error}") from None
            waiting += [
                (found, relative, at)
                for found, at in [
                    *imported_modules(module, tree, path.name == "__init__.py", root),
                    *_named(tree, root),
                ]
            ]
    return shipped


def data_files(modules: dict[str, Path], sources: dict[str, str] | None = None, root: Path = REPO) -> list[Path]:
    """The files of the shipped packages' folders that are not Python and that a shipped module names
    (``Path(__file__).with_name("hints.toml")``, ``CHECKS_DIR / "pytest.ini"``)."""
    sources = sources or {}
    named = {
        node.value
        for module, path in modules.items()
        for node in ast.walk(ast.parse(sources.get(module) or path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    folders = {path.parent for path in modules.values() if path.name == "__init__.py"}
    return sorted(
        path
        for folder in folders
        for path in folder.iterdir()
        if path.is_file() and path.suffix not in (".py", ".pyc") and path.name in named
    )


def shipment(
    entries: list[str], sources: dict[str, str] | None = None, never: tuple[str, ...] = (), root: Path = REPO
) -> dict[str, bytes]:
    """Path under ``root`` (posix) -> bytes, of every module and data file an artefact with ``entries`` ships."""
    sources = sources or {}
    modules = closure(entries, sources, never, root)
    files = {
        path.relative_to(root).as_posix(): (sources[module].encode() if module in sources else path.read_bytes())
        for module, path in modules.items()
    }
    files.update({path.relative_to(root).as_posix(): path.read_bytes() for path in data_files(modules, sources, root)})
    return dict(sorted(files.items()))


def packages(files: dict[str, bytes]) -> list[str]:
    """The packages (dotted) a shipment's files form: each folder holding an __init__.py."""
    return sorted(
        name.removesuffix("/__init__.py").replace("/", ".") for name in files if name.endswith("/__init__.py")
    )


def layer_modules(layers: tuple[str, ...], root: Path = REPO) -> list[str]:
    """Every module of the grader's ``layers`` (grader.authoring.layers): an artefact ships a layer whole, so a
    module added to it can never be left out."""
    return [name for layer in layers for name, _ in package_modules(f"grader.{layer}", root)]
