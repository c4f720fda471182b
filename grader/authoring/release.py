"""make release: the students' repository, with nothing in it that could stand in for the work.

    python -m grader.authoring.release [OUT] [--course FILE]   # default: dist/student/ and dist/student.zip

It holds the stages the course grades (course.toml: the core, and the bonus stages when it says so):
their stubs (written from solutions/ as `make stubs` does), the learners' docs, the
grader with the visible checks only (each check module rewritten without its hidden checks and
whatever only they used) and the modules that they and the learners' commands import, found by
reading them (grader.authoring.shipping), the GitHub Classroom workflow, a Makefile whose `make grade`
labels its score provisional and whose `make submit` zips the stage files as `make grade-all` takes them,
and a README. No solutions/, no hidden check, no points or data of one, no tests.
"""

import argparse
import ast
import json
import re
import shutil
import sys
import zipfile
from pathlib import Path

from grader.authoring.layers import GRADING_LAYERS
from grader.authoring.shipping import layer_modules, packages, script_modules, shipment
from grader.authoring.stubs import expected_exercises
from grader.core.course import built_course_text, course_stages
from grader.core.points import points_in_use
from grader.core.stages import BONUS, REGISTRY_FILE, Stage, registry
from grader.judge.plugin import planned_checks

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / "dist" / "student"
RELEASE_DIR = Path(__file__).with_name("release")  # the student Makefile, README, pyproject
CLASSROOM_WORKFLOW = Path(__file__).with_name("classroom") / "classroom.yml"
TEMPLATES = {"Makefile", "README.md", "pyproject.template.toml"}  # their @...@ are the release's stages and packages
# Files of RELEASE_DIR released under another name: a pyproject.toml here would be read as this
# repository's tools' settings
RELEASED_AS = {"gitignore.release": ".gitignore", "pyproject.template.toml": "pyproject.toml"}
LEARNER_DOCS = ["errata.md", "troubleshooting.md"]  # and each stage's guide
# What the learners run: `make grade` and the Classroom workflow run `python -m grader` (read from
# their text), a notebook imports grader.notebook; pytest loads the checks' conftest and the visible
# check modules. The release ships these and whatever they import (grader.authoring.shipping).
NOTEBOOK_ENTRY = "grader.notebook"
CHECKS_CONFTEST = "grader.judge.checks.conftest"
# The fixtures a released check may ask for (grader.judge.plugin): the learner's workers, their files and the
# device. `reference` loads solutions/, which the release never holds; a visible check that asked for it would
# give every learner "the grader could not finish this check", the right code included.
RELEASED_FIXTURES = frozenset({"learner", "learner_source", "device"})
NEVER_SHIPPED = (
    "grader.authoring",
    "grader.classroom",
    "solutions",
    "tests",
)  # the build stops if the closure reaches them


def _is_hidden_check(node: ast.AST) -> bool:
    for decorator in getattr(node, "decorator_list", []):
        if isinstance(decorator, ast.Call) and getattr(decorator.func, "id", None) == "check":
            visible = next((k.value for k in decorator.keywords if k.arg == "visible"), None)
            return not (isinstance(visible, ast.Constant) and visible.value is True)
    return False


def fixtures_out_of_reach(source: str) -> dict[str, list[str]]:
    """Check function -> the fixtures it asks for that the release cannot give (RELEASED_FIXTURES)."""
    return {
        node.name: unknown
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
        if (unknown := [a.arg for a in node.args.args if a.arg not in RELEASED_FIXTURES])
    }


def _defined_names(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def visible_only(source: str) -> str:
    """A check module without its hidden checks, nor the constants, helpers and imports only they used."""
    lines = source.splitlines(keepends=True)
    body = ast.parse(source).body
    kept = [node for node in body if not _is_hidden_check(node)]
    while True:  # drop what nothing left refers to, until nothing changes
        used = {
            n.id for node in kept for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        }

        def unused(node: ast.stmt) -> bool:
            names = _defined_names(node)
            return (
                bool(names)
                and not names & used
                and not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_"))
            )

        dead = [node for node in kept if unused(node)]
        if not dead:
            break
        kept = [node for node in kept if node not in dead]
    out: list[str] = []
    previous_end = 0
    for node in body:  # each kept statement with the blank lines and comments just above it
        start, previous_end = previous_end, node.end_lineno
        if node not in kept:
            continue
        segment = lines[start : node.end_lineno]
        if isinstance(node, ast.ImportFrom):
            names = [a for a in node.names if (a.asname or a.name) in used]
            if not names:
                continue
            if len(names) != len(node.names):
                imported = ", ".join(ast.unparse(a) for a in names)
                segment = lines[start : node.lineno - 1] + [f"from {node.module} import {imported}\n"]
        out.extend(segment)
    return re.sub(r"\n{4,}", "\n\n\n", "".join(out)).rstrip("\n") + "\n"


def _released_registry(stages: list[Stage]) -> str:
    """stages.toml of the release: the released stages, each priced by its visible checks alone."""
    visible = [c for c in planned_checks([s.number for s in stages], points_in_use()) if c.visibility == "visible"]
    lines = [
        f"# The stages of this repository ({REGISTRY_FILE.name} of the instructor's, as released): the points\n"
        "# of the visible checks; the rest of each stage's points is in your instructor's hidden checks.\n"
    ]
    for stage in stages:
        lines.append(
            f"\n[{stage.id}]\ntitle = {json.dumps(stage.title)}\nfile = {json.dumps(stage.file)}\n"
            f"names = {json.dumps(list(stage.names))}\n"
        )
        if stage.stand_ins:
            pairs = ", ".join(f"{name} = {json.dumps(cls)}" for name, cls in stage.stand_ins.items())
            lines.append(f"stand_ins = {{ {pairs} }}\n")
        lines.append(f"track = {json.dumps(stage.track)}\n\n[{stage.id}.points]\n")
        lines += [f'"{c.id}" = {c.points:g}\n' for c in visible if c.stage == stage.number]
    return "".join(lines)


def _filled(name: str, text: str, stages: list[Stage], shipped: dict[str, bytes]) -> str:
    """A template of release/ with the released stages, and the packages and data files shipped, filled in."""
    if name not in TEMPLATES:
        return text
    table = "".join(
        f"| {s.number}{' (bonus)' if s.track == BONUS else ''} | `{s.file}` | {s.title} | "
        f"[docs/stage{s.number}.md](docs/stage{s.number}.md) |\n"
        for s in stages
    )
    data: dict[str, list[str]] = {}
    for path in shipped:
        if not path.endswith(".py"):
            data.setdefault(path.rpartition("/")[0].replace("/", "."), []).append(path.rpartition("/")[2])
    package_data = "".join(f"{json.dumps(package)} = {json.dumps(names)}\n" for package, names in sorted(data.items()))
    return (
        text.replace("@STAGE_FILES@", " ".join(s.file for s in stages))
        .replace("@STAGE_TABLE@\n", table)
        .replace("@PACKAGES@", json.dumps([*packages(shipped), "exercises"]))
        .replace("@PACKAGE_DATA@\n", package_data)
    )


def learner_entry_points() -> list[str]:
    """The grader modules the release's users run: what its Makefile and Classroom workflow run, and the
    notebook helper."""
    scripts = [RELEASE_DIR / "Makefile", CLASSROOM_WORKFLOW]
    return [*script_modules("".join(path.read_text(encoding="utf-8") for path in scripts)), NOTEBOOK_ENTRY]


def released_grader(stages: list[Stage]) -> dict[str, bytes]:
    """Path -> bytes of the grader the release holds: the visible check modules of ``stages`` (rewritten
    without their hidden checks) and every module and data file that they and the learners' commands import."""
    checks = {}
    for stage in stages:
        text = visible_only(
            (REPO / "grader" / "judge" / "checks" / f"test_stage{stage.number}.py").read_text(encoding="utf-8")
        )
        compile(text, f"test_stage{stage.number}.py", "exec")
        if unreachable := fixtures_out_of_reach(text):
            raise ValueError(f"visible checks of stage {stage.number} ask for what the release lacks: {unreachable}")
        checks[f"grader.judge.checks.test_stage{stage.number}"] = text
    shipped = shipment(
        [*learner_entry_points(), CHECKS_CONFTEST, *checks, *layer_modules(GRADING_LAYERS)], checks, NEVER_SHIPPED
    )
    shipped["grader/core/stages.toml"] = _released_registry(stages).encode()
    return shipped


def build_release(out: Path, course: Path | None = None) -> Path:
    """Write the students' repository to ``out`` (replacing it) and ``out``.zip; the zip's path. It holds
    the stages of the course file at ``course`` (None: this tree's course.toml, if any)."""
    stages = [registry()[number] for number in course_stages(course)]
    shutil.rmtree(out, ignore_errors=True)
    (out / "exercises").mkdir(parents=True)
    released_files = {"__init__.py", *(s.file for s in stages)}
    for name, text in expected_exercises().items():
        if name in released_files:
            (out / "exercises" / name).write_text(text, encoding="utf-8")
    (out / "docs" / "figures").mkdir(parents=True)
    guides = [f"stage{s.number}.md" for s in stages]
    for name in [*LEARNER_DOCS, *guides]:
        shutil.copy2(REPO / "docs" / name, out / "docs" / name)
    shown = "".join((REPO / "docs" / name).read_text(encoding="utf-8") for name in guides)
    for png in sorted((REPO / "docs" / "figures").glob("*.png")):
        if f"figures/{png.name}" in shown:
            shutil.copy2(png, out / "docs" / "figures" / png.name)
    shipped = released_grader(stages)
    for name, data in shipped.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
    (out / "course.toml").write_text(built_course_text([s.number for s in stages], course), encoding="utf-8")
    for path in sorted(RELEASE_DIR.iterdir()):
        target = out / RELEASED_AS.get(path.name, path.name)
        target.write_text(_filled(path.name, path.read_text(encoding="utf-8"), stages, shipped), encoding="utf-8")
        shutil.copymode(path, target)
    (out / ".github" / "workflows").mkdir(parents=True)
    shutil.copy2(CLASSROOM_WORKFLOW, out / ".github" / "workflows" / "classroom.yml")
    archive = out.with_suffix(".zip")
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as bundle:
        for path in sorted(p for p in out.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(f"{out.name}/{path.relative_to(out)}", date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            bundle.writestr(info, path.read_bytes(), zipfile.ZIP_DEFLATED)
    return archive


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--course",
        type=Path,
        metavar="FILE",
        help="the course settings (default: course.toml at the repository's root, if any)",
    )
    args = parser.parse_args(argv)
    try:
        archive = build_release(args.out.resolve(), args.course)
    except ValueError as error:  # CourseError, RegistryError: one line
        print(f"release: {error}", file=sys.stderr)
        return 2
    print(f"student repository: {args.out}/ and {archive.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
