"""Read a stage file as the judge holds it: the names each part of it spells, and any reach into the grader.

Learner code runs in the worker beside the recorder of torch operations (grader/runner/shortcuts.py), so it can switch
the recorder off or rewrite what it saw. This reading works on the bytes the judge staged, which learner code cannot
reach. It lists, for each top-level statement, the names the code spells: attributes and imports from the syntax tree,
global names and strings from the compiled bytecode, where the compiler has already folded constants ("soft" + "max"
is one string there). A string that reads as Python is read as code too. Each statement also knows which others it
refers to by name, so that a function answers for the helpers it calls and for nothing else in the file.
"""

import ast
import bisect
import builtins
import dis
import functools
import types
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import TypedDict, TypeGuard, cast

from grader.judge.tampering_names import TAMPERING_BUILTINS, TAMPERING_FRAGMENTS, TAMPERING_NAMES, TAMPERING_PATHS

MODULE_LEVEL = "module level"


# A string this long is no name; and strings inside strings are read this deep.
LONGEST_STRING_READ = 100_000
DEEPEST_STRING_READ = 3
# `a = inspect`, `b = a`, `c = b`: how far a chain of plain assignments is followed.
ALIAS_ROUNDS = 3
# Paths are followed 6 names deep (a reach is told by its first names) and 50,000 at most: `a = a.x0`, `a = a.x1`,
# ... doubled them at each line (red team round 7), so more is code the judge will not read.
PATH_PARTS, ALIAS_BUDGET = 6, 50_000
# The instructions that read a global name: in functions, in module and class bodies, in class scopes.
GLOBAL_READS = {"LOAD_GLOBAL", "LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS"}


@dataclass(frozen=True)
class Use:
    """One name as the code spells it: an identifier, or a dotted path through the file's imports."""

    name: str
    line: int
    where: str  # the function or class around it ("SelfAttention_v1.forward"), or MODULE_LEVEL
    how: str  # "attribute", "import", "global" (a global name the code reads) or "string"

    @property
    def tampering(self) -> bool:
        return _is_tampering(self.name, self.how)


def _is_tampering(name: str, how: str) -> bool:
    if "." in name:
        return any(name == path or name.startswith(path + ".") for path in TAMPERING_PATHS)
    if name in TAMPERING_NAMES or (how == "global" and name in TAMPERING_BUILTINS):
        return True
    flat = name.lower().replace("_", "")
    return any(fragment in flat for fragment in TAMPERING_FRAGMENTS)


@dataclass(eq=False)
class _Statement:
    """A top-level statement (or one name of a top-level import): what it binds, spells and reads."""

    start: tuple[int, int]
    end: tuple[int, int]
    is_import: bool = False
    binds: set[str] = field(default_factory=set)
    uses: list[Use] = field(default_factory=list)  # attributes, imports, and (once resolved) global names
    reads: list[Use] = field(default_factory=list)  # global names, from the code or from its strings

    def holds(self, position: tuple[int, int]) -> bool:
        return self.start <= position <= self.end


class _Span(TypedDict):
    """Where a top-level statement starts and ends, as _Statement takes them."""

    start: tuple[int, int]
    end: tuple[int, int]


class SourceScan:
    """What one stage file spells, statement by statement, and what each function or class reaches."""

    def __init__(self, source: bytes | str):
        """Raises RecursionError for code nested deeper than the judge reads (no right answer is)."""
        try:
            self._statements = _read(source, depth=0)
        except (SyntaxError, ValueError):  # the worker cannot import it either, and says so
            self._statements = []
        self._binders: dict[str, list[_Statement]] = {}
        for statement in self._statements:
            for name in statement.binds:
                self._binders.setdefault(name, []).append(statement)
        self._spelled_in_strings: dict[str, list[_Statement]] = {}
        for statement in self._statements:
            for read in statement.reads:
                if read.how == "string":
                    self._spelled_in_strings.setdefault(read.name, []).append(statement)
        # What each statement refers to, as (bound where the compiler cannot see, name): a walk expands a name once
        self._refers: dict[int, set[tuple[bool, str]]] = {}  # (N lines of `a = a` cost N, not N²: red team round 8)
        for statement in self._statements:
            refers: set[tuple[bool, str]] = set()
            for read in statement.reads:
                if read.name in self._binders:
                    refers.add((False, read.name))
                    if read.how == "string":  # getattr(F, "softmax") names torch's, whatever the file defines
                        statement.uses.append(read)
                elif read.tampering or not hasattr(builtins, read.name):
                    statement.uses.append(read)
                    if read.how == "global":  # bound where the compiler cannot see: globals()["name"] = ...
                        refers.add((True, read.name))
            self._refers[id(statement)] = refers

    @property
    def tampering(self) -> list[Use]:
        """Every reach into the grader's recording, anywhere in the file."""
        return sorted(
            {use for statement in self._statements for use in statement.uses if use.tampering},
            key=lambda use: (use.line, use.name),
        )

    def uses_reached_from(self, target: str, names: Collection[str]) -> list[Use]:
        """Where ``target`` (a top-level function or class), or anything it refers to, spells one of ``names``."""
        reached: dict[int, _Statement] = {}
        expanded: set[tuple[bool, str]] = set()
        waiting = list(self._binders.get(target, []))
        while waiting:
            statement = waiting.pop()
            if id(statement) not in reached:
                reached[id(statement)] = statement
                for hidden, name in self._refers[id(statement)] - expanded:
                    expanded.add((hidden, name))
                    waiting += (self._spelled_in_strings if hidden else self._binders).get(name, [])
        found = {use for statement in reached.values() for use in statement.uses if use.name in names}
        return sorted(found, key=lambda use: (use.line, use.name))


@functools.lru_cache(maxsize=2)
def scan_source(source: bytes) -> SourceScan:
    """The scan of a stage file's bytes; a stage's shortcut checks share one (none is kept for later students)."""
    return SourceScan(source)


def _read(source: bytes | str, depth: int) -> list[_Statement]:
    tree = ast.parse(source)
    where, statements, aliases = _enclosing_definitions(tree), _statements(tree), _aliases(tree)
    for statement, node in statements:
        _Spellings(statement, where, aliases).visit(node)
    ordered = [statement for statement, _ in statements]
    _read_bytecode(compile(tree, "<stage file>", "exec", dont_inherit=True), ordered, where, depth)
    return ordered


def _statements(tree: ast.Module) -> list[tuple[_Statement, ast.AST]]:
    """One per top-level statement, decorators included; one per name for an import."""
    statements: list[tuple[_Statement, ast.AST]] = []
    for node in tree.body:
        first = min([node, *getattr(node, "decorator_list", [])], key=lambda n: (n.lineno, n.col_offset))
        span: _Span = {
            "start": (first.lineno, 0 if first is not node else node.col_offset),
            # ast.parse gives every statement its end position
            "end": cast(tuple[int, int], (node.end_lineno, node.end_col_offset)),
        }
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                one = (
                    ast.Import([alias])
                    if isinstance(node, ast.Import)
                    else ast.ImportFrom(node.module, [alias], node.level)
                )
                bound = alias.asname or alias.name.split(".")[0]
                statement = _Statement(**span, is_import=True, binds=set() if bound == "*" else {bound})
                statements.append((statement, ast.copy_location(one, node)))
        else:
            statements.append((_Statement(**span), node))
    return statements


def _enclosing_definitions(tree: ast.Module) -> dict[int, str]:
    """Line -> qualified name of the innermost function or class around it, decorators included."""
    where: dict[int, str] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                for line in range(first, cast(int, child.end_lineno) + 1):
                    where[line] = name
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return where


def _aliases(tree: ast.Module) -> dict[str, set[str]]:
    """Name -> the dotted paths it may stand for, through imports and plain assignments anywhere in the file."""
    aliases: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                aliases.setdefault(bound, set()).add(alias.name if alias.asname else bound)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                path = f"{node.module}.{alias.name}" if node.module else alias.name
                aliases.setdefault(alias.asname or alias.name, set()).add(path)
    assignments = [node for node in ast.walk(tree) if isinstance(node, ast.Assign)]
    for _ in range(ALIAS_ROUNDS):
        for node in assignments:
            paths = _paths(node.value, aliases)
            for target in node.targets:
                if isinstance(target, ast.Name) and paths:
                    aliases.setdefault(target.id, set()).update(paths)
            if sum(map(len, aliases.values())) > ALIAS_BUDGET:
                raise RecursionError("names chained past what the judge reads")  # hiding, as code nested too deep
    return aliases


def _paths(node: ast.AST, aliases: dict[str, set[str]]) -> set[str]:
    """The dotted paths an expression may stand for: `I.stack` with `import inspect as I` is inspect.stack,
    and so is `importlib.import_module("inspect").stack`."""
    if isinstance(node, ast.Name):
        return {node.id} | aliases.get(node.id, set())
    if isinstance(node, ast.Attribute):
        return {_joined(path, node.attr) for path in _paths(node.value, aliases)}
    # _is_call_with_string has checked that the argument is a string constant
    if _is_call_with_string(node, "getattr", argument=1):
        return {
            _joined(path, cast(str, cast(ast.Constant, node.args[1]).value)) for path in _paths(node.args[0], aliases)
        }
    if _is_call_with_string(node, "import_module", argument=0) or _is_call_with_string(node, "__import__", argument=0):
        return {cast(str, cast(ast.Constant, node.args[0]).value)}
    return set()


def _joined(path: str, attribute: str) -> str:  # path.attribute, or path where it is PATH_PARTS names deep
    return path if path.count(".") + 1 >= PATH_PARTS else f"{path}.{attribute}"


def _is_call_with_string(node: ast.AST, function: str, argument: int) -> TypeGuard[ast.Call]:
    """``node`` calls ``function`` (by name or as an attribute) with a string constant as positional ``argument``."""
    if not isinstance(node, ast.Call) or len(node.args) <= argument:
        return False
    called = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
    given = node.args[argument]
    return called == function and isinstance(given, ast.Constant) and isinstance(given.value, str)


class _Spellings(ast.NodeVisitor):
    """The attributes and imports of one statement, and the dotted paths they resolve to.

    `self.scaled_dot_product_attention(...)` calls a method of the class itself when the class
    defines one by that name: that is the learner's own code, not torch's.
    """

    def __init__(self, statement: _Statement, where: dict[int, str], aliases: dict[str, set[str]]):
        self.statement, self.where, self.aliases = statement, where, aliases
        self.own_members: set[str] = set()
        self.self_name: str | None = None

    def spell(self, name: str, line: int, how: str) -> None:
        self.statement.uses.append(Use(name, line, self.where.get(line, MODULE_LEVEL), how))

    def spell_paths(self, node: ast.expr) -> None:
        for path in _paths(node, self.aliases):
            if "." in path and _is_tampering(path, "attribute"):
                self.spell(path, node.lineno, "attribute")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        outer = self.own_members, self.self_name
        self.own_members = {
            n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        }
        self.own_members |= {
            t.id
            for n in node.body
            if isinstance(n, (ast.Assign, ast.AnnAssign))
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            if isinstance(t, ast.Name)
        }
        child: ast.AST
        for child in node.body:
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                parameters = child.args.posonlyargs + child.args.args
                self.self_name = parameters[0].arg if parameters else None
            else:
                self.self_name = None
            self.visit(child)
        self.self_name = None
        for child in [*node.bases, *node.keywords, *node.decorator_list]:
            self.visit(child)
        self.own_members, self.self_name = outer

    def visit_Attribute(self, node: ast.Attribute) -> None:
        own = isinstance(node.value, ast.Name) and node.value.id == self.self_name and node.attr in self.own_members
        if not own:
            self.spell(node.attr, cast(int, node.end_lineno), "attribute")  # set by ast.parse
            self.spell_paths(node)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if _is_call_with_string(node, "getattr", argument=1):
            self.spell_paths(node)
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            for part in alias.name.split("."):
                self.spell(part, node.lineno, "import")
            if "." in alias.name and _is_tampering(alias.name, "import"):
                self.spell(alias.name, node.lineno, "import")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for part in (node.module or "").split("."):
            if part:
                self.spell(part, node.lineno, "import")
        for alias in node.names:
            self.spell(alias.name, node.lineno, "import")
            path = f"{node.module}.{alias.name}" if node.module else alias.name
            if _is_tampering(path, "import"):
                self.spell(path, node.lineno, "import")


def _read_bytecode(module: types.CodeType, statements: list[_Statement], where: dict[int, str], depth: int) -> None:
    """Global names read and bound, and every string constant, each given to the statement it belongs to."""

    # top-level statements other than imports never overlap: the one that holds a position is the last to start
    # at or before it (a bisection, so a file of thousands of statements costs what it holds, not its square)
    spans = sorted((s for s in statements if not s.is_import), key=lambda s: s.start)
    starts = [s.start for s in spans]

    def statement_at(line: int, column: int) -> _Statement | None:
        index = bisect.bisect_right(starts, (line, column)) - 1
        return spans[index] if index >= 0 and spans[index].holds((line, column)) else None

    def read(code: types.CodeType, owner: _Statement | None) -> None:
        """``owner``: the statement all of ``code`` belongs to; None for the module's own code."""
        const_positions: dict[int, tuple[int, int]] = {}
        for instruction in dis.get_instructions(code):
            position = instruction.positions
            if position is None or position.lineno is None:
                continue
            line = position.lineno
            if instruction.opcode in dis.hasconst:
                const_positions.setdefault(cast(int, instruction.arg), (line, position.col_offset or 0))
            statement = owner or statement_at(line, position.col_offset or 0)
            if statement is None:
                continue
            if instruction.opname in GLOBAL_READS:
                statement.reads.append(Use(instruction.argval, line, where.get(line, MODULE_LEVEL), "global"))
            elif instruction.opname == "STORE_GLOBAL" or (
                owner is None and instruction.opname in ("STORE_NAME", "DELETE_NAME")
            ):
                statement.binds.add(instruction.argval)
        for index, constant in enumerate(code.co_consts):
            if isinstance(constant, types.CodeType):
                read(constant, owner or statement_at(constant.co_firstlineno, 0))
                continue
            if index not in const_positions and owner is None:
                continue
            # A function's docstring is no instruction's constant: it stands at the function's first line.
            line, column = const_positions.get(index, (code.co_firstlineno, 0))
            statement = owner or statement_at(line, column)
            if statement is not None:
                for text in _strings(constant):
                    _read_string(text, statement, line, where.get(line, MODULE_LEVEL), depth)

    read(module, None)


def _strings(constant: object) -> Iterator[str]:
    if isinstance(constant, str):
        yield constant
    elif isinstance(constant, bytes):
        try:
            yield constant.decode()
        except UnicodeDecodeError:
            pass
    elif isinstance(constant, (tuple, frozenset)):
        for item in constant:
            yield from _strings(item)


def _read_string(text: str, statement: _Statement, line: int, where: str, depth: int) -> None:
    """A string that reads as Python is code the file may run or name: its names count where the string stands."""
    if depth >= DEEPEST_STRING_READ or len(text) > LONGEST_STRING_READ:
        return
    try:
        inner = _read(text, depth + 1)
    except (SyntaxError, ValueError):  # prose, a format, a path: not code
        return
    for part in inner:
        statement.binds |= part.binds
        statement.uses += [Use(use.name, line, where, "string") for use in part.uses]
        statement.reads += [Use(use.name, line, where, "string") for use in part.reads]
