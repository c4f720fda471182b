"""Load the stage modules of an implementation: the solutions, or a submission folder."""

import importlib
import importlib.abc
import importlib.util
import sys
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from grader.runner.book_calls import book_constructor
from grader.runner.capture import last_learner_line

# The stages are the judge's to name (grader/core/stages.py): the runner sees no registry, only the
# stage number -> module name mapping each call is given.

# Learner code imports its other stages as `exercises.<module>`, wherever the folder lives.
SUBMISSION_PACKAGE = "exercises"


@dataclass
class Implementation:
    """Stage modules by number; a stage that is missing or fails to import has a reason instead."""

    modules: dict[int, ModuleType] = field(default_factory=dict)
    problems: dict[int, str] = field(default_factory=dict)
    # stage -> file:line in the learner's files where its import failed (None: no line of theirs)
    where: dict[int, str | None] = field(default_factory=dict)
    # In a worker: tells the judge the public name a recipe is about to call (grader.runner.probes.recipes)
    announce: Callable[[str], None] | None = None

    def name(self, public_name: str) -> object:
        """The object called ``public_name`` in whichever stage module defines it."""
        for module in self.modules.values():
            if hasattr(module, public_name):
                return getattr(module, public_name)
        raise LookupError(f"no stage module defines {public_name}")

    def book(self, public_name: str) -> object:
        """``public_name``, one of the book's classes as a callable that builds it the way the book calls it
        (book_calls.book_constructor); anything else as it is. What the recipes and probes call."""
        return book_constructor(self.name(public_name), public_name)

    def __getattr__(self, public_name: str) -> object:
        if public_name.startswith("_") or public_name in ("modules", "problems", "where", "announce"):
            raise AttributeError(public_name)
        try:
            return self.book(public_name)
        except LookupError as missing:
            raise AttributeError(str(missing)) from None


def announcing(impl: Implementation) -> object:
    """``impl`` as a recipe (grader.runner.document_examples) sees it: each public name says itself through
    ``impl.announce`` as it is called, so that the judge knows which function a recipe that hangs was in."""
    return _Announcing(impl)


class _Announcing:
    """Said at the call, not at the lookup: `impl.softmax_naive(impl.attention_scores(x, q))` looks
    softmax_naive up first but calls it last."""

    def __init__(self, impl: Implementation):
        self._impl = impl

    def __getattr__(self, public_name: str) -> object:
        target = getattr(self._impl, public_name)
        announce = self._impl.announce
        if announce is None or not callable(target):
            return target

        def announced(*args, **kwargs):
            announce(public_name)
            return target(*args, **kwargs)

        return announced


def load_package(package: str, modules: dict[int, str]) -> Implementation:
    """The stage modules (stage -> module name) of an importable package, e.g. ``solutions``."""
    return _import_stages(package, modules)


def load_stage(folder: Path, stage: int, modules: dict[int, str]) -> Implementation:
    """Only stage ``stage`` of a submission folder, the other stages as already-installed stand-ins."""
    register_package(Path(folder).resolve(), modules.values())
    implementation = Implementation()
    for number, module_name in modules.items():
        name = f"{SUBMISSION_PACKAGE}.{module_name}"
        if number != stage:
            implementation.modules[number] = sys.modules[name]
    graded = _import_stages(SUBMISSION_PACKAGE, modules, Path(folder).resolve(), only=stage)
    implementation.modules.update(graded.modules)
    implementation.problems.update(graded.problems)
    implementation.where.update(graded.where)
    implementation.modules = dict(sorted(implementation.modules.items()))
    return implementation


def register_package(folder: Path, stage_modules: Iterable[str] = ()) -> None:
    """Make ``folder`` the package ``exercises``, so its stage files import one another as learners write it:
    `from exercises.stage2_self_attention import ...`, or by the bare name of ``stage_modules`` (`import
    stage4_causal_attention`, as a notebook beside the files does), which is the same module."""
    spec = importlib.util.spec_from_loader(SUBMISSION_PACKAGE, loader=None, is_package=True)
    package = importlib.util.module_from_spec(spec)
    package.__path__ = [str(folder)]
    sys.modules[SUBMISSION_PACKAGE] = package
    bare = _BareStageNames(frozenset(stage_modules))
    sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, _BareStageNames)] + [bare]


class _BareStageNames(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """`import stage4_causal_attention` as `exercises.stage4_causal_attention`: one module, under both names
    (a stand-in where the judge put one). Asked last, so nothing else on the path changes."""

    def __init__(self, names: frozenset[str]):
        self.names = names

    def find_spec(self, fullname, path=None, target=None):
        if fullname in self.names:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        return importlib.import_module(f"{SUBMISSION_PACKAGE}.{spec.name}")

    def exec_module(self, module) -> None:
        pass  # ran as its exercises.<name>


def _import_stages(
    package: str, modules: dict[int, str], folder: Path | None = None, only: int | None = None
) -> Implementation:
    implementation = Implementation()
    for stage, module_name in modules.items():
        if only is not None and stage != only:
            continue
        if folder is not None and not (folder / f"{module_name}.py").is_file():
            implementation.problems[stage] = f"{module_name}.py is missing"
            continue
        try:
            implementation.modules[stage] = importlib.import_module(f"{package}.{module_name}")
        except Exception as error:  # any failure at import is the learner's to see, not ours
            # said once: a SyntaxError's own words name its line too, which `where` says
            words = error.msg if isinstance(error, SyntaxError) else str(error)
            implementation.problems[stage] = f"{module_name}.py failed to import: {type(error).__name__}: {words}"
            implementation.where[stage] = _import_location(error, folder)
    return implementation


def _import_location(error: Exception, folder: Path | None) -> str | None:
    """file:line where ``error`` stopped the import: a syntax error's line, else the last line of the learner's
    files (under ``folder``) that ran."""
    if isinstance(error, SyntaxError) and error.filename:
        return f"{Path(error.filename).name}:{error.lineno}" if error.lineno else Path(error.filename).name
    return None if folder is None else last_learner_line(traceback.extract_tb(error.__traceback__), str(folder))
