"""The repository's own imports, read from the source (AST): what a module of grader/ or solutions/ imports,
at the top of a file or inside a function, absolute or relative. Shipping follows them; the layer rule
(grader/authoring/layers.py) checks them."""

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("grader", "solutions")  # the repository's own packages


def module_file(name: str, root: Path = REPO) -> Path | None:
    """The file of module ``name`` under ``root`` (a package's __init__.py), or None."""
    base = root.joinpath(*name.split("."))
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return None


def parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:end]) for end in range(1, len(parts) + 1)]


def imported_modules(name: str, tree: ast.AST, is_package: bool, root: Path) -> list[tuple[str, int]]:
    """(module, line) for every import of one of PACKAGES in ``tree``, the module ``name``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the package this module is in (or is)
                package = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join([*package, *([node.module] if node.module else [])])
            else:
                base = node.module
            found.append((base, node.lineno))
            # `from grader.judge.checks import documented`: a module; `from grader.sandbox.zygote import MODES`: a name
            found += [
                (f"{base}.{alias.name}", node.lineno)
                for alias in node.names
                if alias.name != "*" and module_file(f"{base}.{alias.name}", root)
            ]
    return [(module, line) for module, line in found if module.split(".")[0] in PACKAGES]


def package_modules(package: str, root: Path = REPO) -> Iterator[tuple[str, Path]]:
    """(dotted name, file) of every module of ``package`` (dotted) and its sub-packages under ``root``."""
    folder = root.joinpath(*package.split("."))
    for path in sorted(folder.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


def import_graph(package: str = "grader", root: Path = REPO) -> dict[str, list[tuple[str, int]]]:
    """Module -> (imported module of PACKAGES, line), for every module of ``package``."""
    graph = {}
    for name, path in package_modules(package, root):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        graph[name] = imported_modules(name, tree, path.name == "__init__.py", root)
    return graph
