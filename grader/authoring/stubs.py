"""Write exercises/ from solutions/: every solution region becomes a stub that raises.

python -m grader.authoring.stubs            # rewrite exercises/
python -m grader.authoring.stubs --check    # exit 1 when exercises/ is out of date
"""

import argparse
import ast
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"

EXERCISES_INIT = '"""Your implementations of the five stages. Check them with `make grade`."""\n'

STUB_HEADER = "# Stage {stage} exercise: replace each `raise NotImplementedError(...)` with your code.\n"


class MarkerError(ValueError):
    """The solution markers of a file are not one flat sequence of BEGIN/END pairs inside functions."""


def render_stub(source: str, filename: str) -> str:
    """The learner's version of one solution module."""
    if Path(filename).name == "__init__.py":
        return EXERCISES_INIT
    stage = _stage_number(filename)
    owners = _enclosing_functions(source)
    lines = source.splitlines(keepends=True)
    out: list[str] = []
    begin_line: int | None = None
    for number, line in enumerate(lines, start=1):
        marker = line.strip()
        if marker == BEGIN:
            if begin_line is not None:
                raise MarkerError(f"{filename}:{number}: {BEGIN} inside the region opened at line {begin_line}")
            if number not in owners:
                raise MarkerError(f"{filename}:{number}: {BEGIN} outside a function or method")
            begin_line = number
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}# YOUR CODE HERE\n")
            out.append(f"{indent}raise NotImplementedError({_message(owners[number], stage)!r})\n")
        elif marker == END:
            if begin_line is None:
                raise MarkerError(f"{filename}:{number}: {END} without a {BEGIN}")
            begin_line = None
        elif begin_line is None:
            out.append(line)
    if begin_line is not None:
        raise MarkerError(f"{filename}:{begin_line}: {BEGIN} is never closed")
    stub = STUB_HEADER.format(stage=stage) + learner_imports("".join(out))
    compile(stub, filename, "exec")  # a stub that does not even parse must never be written
    return stub


def _stage_number(filename: str) -> int:
    match = re.match(r"stage(\d+)_", Path(filename).name)
    if not match:
        raise MarkerError(f"{filename}: a solution module is named stage<N>_<topic>.py")
    return int(match.group(1))


def _enclosing_functions(source: str) -> dict[int, str]:
    """Line number -> qualified name of the innermost function containing that line."""
    owners: dict[int, str] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                for line in range(child.lineno, child.end_lineno + 1):
                    owners[line] = name
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return owners


def _message(qualname: str, stage: int) -> str:
    return f"{qualname} is not implemented yet: write it here, then run `make grade` (guide: docs/stage{stage}.md)"


def learner_imports(source: str) -> str:
    """A solution module's imports as a learner's file writes them: from exercises, not solutions."""
    return re.sub(r"^(\s*from\s+)solutions\.", r"\1exercises.", source, flags=re.MULTILINE)


def expected_exercises(solutions: Path = REPO / "solutions") -> dict[str, str]:
    """File name -> the stub text that `make stubs` writes for it."""
    return {
        path.name: render_stub(path.read_text(encoding="utf-8"), f"solutions/{path.name}")
        for path in sorted(solutions.glob("*.py"))
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="report stale stubs instead of writing them")
    args = parser.parse_args(argv)
    exercises = REPO / "exercises"
    stale = []
    for name, text in expected_exercises().items():
        target = exercises / name
        if target.exists() and target.read_text(encoding="utf-8") == text:
            continue
        stale.append(name)
        if not args.check:
            exercises.mkdir(exist_ok=True)
            target.write_text(text, encoding="utf-8")
    if args.check and stale:
        print(f"exercises/ is out of date for: {', '.join(stale)}. Run `make stubs`.", file=sys.stderr)
        return 1
    print(f"exercises/: {len(stale)} file(s) {'stale' if args.check else 'written'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
