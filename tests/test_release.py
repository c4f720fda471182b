"""make release: the students' repository holds nothing that could stand in for the work, and works."""

import ast
import fnmatch
import json
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

from grader.authoring.layers import GRADING_LAYERS
from grader.authoring.release import CHECKS_CONFTEST, NEVER_SHIPPED, build_release, learner_entry_points
from grader.authoring.shipping import closure, data_files, layer_modules
from grader.authoring.stubs import BEGIN, END
from grader.core.course import course_text
from grader.core.points import points_in_use
from grader.core.stages import CORE, STAGE_MODULES, stages_of
from grader.judge.plugin import planned_checks
from tests.grading import REPO, batch, learner_copy
from tests.grading import make as run_make
from tests.watching import Watcher

ALLOWED = [
    ".gitignore",
    "Makefile",
    "README.md",
    "course.toml",
    "pyproject.toml",
    ".github/workflows/classroom.yml",
    "docs/stage?.md",
    "docs/errata.md",
    "docs/troubleshooting.md",
    "docs/figures/*.png",
    "exercises/*.py",
    "grader/*.py",
    "grader/*.toml",
    "grader/runner/*.py",
    "grader/judge/checks/*.py",
    "grader/judge/checks/pytest.ini",
]
STAGES = stages_of((CORE,))  # a release built without course.toml: the core stages


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    folder = tmp_path_factory.mktemp("release") / "student"
    archive = build_release(folder)
    return folder, archive


def release_files(folder) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def text_of(folder) -> dict[str, str]:
    return {
        name: (folder / name).read_text(encoding="utf-8") for name in release_files(folder) if not name.endswith(".png")
    }


def secret_lines() -> set[str]:
    """Lines only a solution region holds, outside constructors (whose attributes the guides document)."""
    secret, public = set(), set()
    for path in sorted((REPO / "solutions").glob("stage*.py")):
        source = path.read_text()
        constructors = {
            line
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.FunctionDef) and node.name == "__init__"
            for line in range(node.lineno, node.end_lineno + 1)
        }
        inside = False
        for number, line in enumerate(source.splitlines(), start=1):
            if line.strip() in (BEGIN, END):
                inside = line.strip() == BEGIN
            elif inside and number not in constructors:
                secret.add(line.strip())
            else:
                public.add(line.strip())
    # Block openers (`with torch.no_grad():`) and a call's opening line (`raise ValueError(`, as a formatter
    # writes any long call) say nothing of a solution; statements do.
    return {
        line
        for line in secret - public
        if len(line) >= 8 and not line.startswith("#") and not line.endswith((":", "(", "[", "{"))
    }


def test_the_released_course_file_holds_the_tracks_setting_alone(tmp_path):
    """The instructor's due dates and penalty are theirs: the students' copy says which stages it grades."""
    course = tmp_path / "course.toml"
    course.write_text(
        '[due]\nassignment = 2026-03-14T23:59:00-05:00\n\n[late_penalty]\nper = "day"\npenalty = 10\n\n'
        "[stages]\nbonus = false\n"
    )
    build_release(tmp_path / "student", course)
    released = (tmp_path / "student" / "course.toml").read_text(encoding="utf-8")
    assert released == course_text(STAGES) and "due" not in released and "penalty" not in released


def test_only_allowed_files(release):
    folder, _ = release
    outside = [name for name in release_files(folder) if not any(fnmatch.fnmatch(name, p) for p in ALLOWED)]
    assert not outside
    for absent in ("solutions", "tests", "grader/authoring", "grader/core/schemas", "docs/instructors.md"):
        assert not (folder / absent).exists()


def test_the_grader_is_what_its_users_and_visible_checks_import(release):
    """Read in the release itself: every grader import resolves there, and no module is there that no
    learner command or visible check imports (a module only hidden checks use stays behind)."""
    folder, _ = release
    checks = [f"grader.judge.checks.test_stage{n}" for n in STAGES]
    modules = closure(
        [*learner_entry_points(), CHECKS_CONFTEST, *checks, *layer_modules(GRADING_LAYERS, root=folder)],
        never=NEVER_SHIPPED,
        root=folder,
    )
    # every module of the layers that grade one submission, as they are here: a new module can never stay behind
    assert set(layer_modules(GRADING_LAYERS)) <= set(modules)
    shipped = {str(path.relative_to(folder)) for path in modules.values()}
    shipped |= {str(path.relative_to(folder)) for path in data_files(modules, root=folder)}
    assert shipped == {name for name in release_files(folder) if name.startswith("grader/")}
    assert not any(module.startswith(("grader.classroom", "grader.cli.batch")) for module in modules)  # a class's tools
    for module in (
        "grader.core.toml_file",
        "grader.intake.notebook_files",
        "grader.cli.grade",
        "grader.notebook",
        "grader.runner.zygote",
    ):
        assert module in modules  # imported inside a function, or run by name (-m), or by a notebook


def test_the_pyproject_installs_every_package_and_data_file(release):
    import tomllib

    folder, _ = release
    settings = tomllib.loads((folder / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert sorted(settings["packages"]) == sorted(
        str(p.parent.relative_to(folder)).replace("/", ".") for p in folder.rglob("__init__.py")
    )
    assert sorted(
        f"{package.replace('.', '/')}/{name}" for package, names in settings["package-data"].items() for name in names
    ) == [n for n in release_files(folder) if n.startswith("grader/") and not n.endswith(".py")]


def test_no_solution_and_no_hidden_check(release):
    folder, _ = release
    texts = text_of(folder)
    secrets = secret_lines()
    assert len(secrets) > 20, "the test must have solution lines to look for"
    for name, text in texts.items():
        assert not secrets & {line.strip() for line in text.splitlines()}, name
        assert BEGIN not in text and "BEGIN HIDDEN TESTS" not in text, name
    hidden = [c for c in planned_checks(STAGES, points_in_use()) if c.visibility == "hidden"]
    assert hidden
    for check in hidden:  # the whole id: a hidden structure.MultiHeadAttention is no visible ...Wrapper
        whole = re.compile(re.escape(check.id) + r"(?![A-Za-z0-9_])")
        assert not [name for name, text in texts.items() if whole.search(text)], check.id
    assert "reference_state(reference" not in "".join(texts.values())


def test_points_are_the_visible_checks_points(release):
    folder, _ = release
    import tomllib

    table = tomllib.loads((folder / "grader" / "core" / "stages.toml").read_text())
    visible = {
        (f"stage{c.stage}", c.id): c.points
        for c in planned_checks(STAGES, points_in_use())
        if c.visibility == "visible"
    }
    assert {
        (stage, check): points for stage, entry in table.items() for check, points in entry["points"].items()
    } == visible


def test_the_zip_holds_the_folder(release):
    folder, archive = release
    with zipfile.ZipFile(archive) as bundle:
        assert sorted(n.removeprefix("student/") for n in bundle.namelist()) == release_files(folder)


def make(folder, *args: str) -> subprocess.CompletedProcess:
    """`make` in the release, on this interpreter (SETUP= skips creating the release's own .venv)."""
    return run_make(folder, *args, f"PY={sys.executable}", "SETUP=", f"PYTHON={sys.executable}")


def test_make_grade_in_the_release(release, tmp_path):
    folder, _ = release
    stubbed = make(
        folder, "grade", f"GRADE_ARGS=--json {tmp_path / 'stubs.json'}", f"HTML_REPORT={tmp_path / 'stubs.html'}"
    )
    assert stubbed.returncode == 0, stubbed.stderr
    report = json.loads((tmp_path / "stubs.json").read_text())
    assert report["score"] == 0 and "provisional" in report["flags"]
    visible_points = sum(c.points for c in planned_checks(STAGES, points_in_use()) if c.visibility == "visible")
    assert f"Provisional total (visible checks only): 0/{visible_points:g}" in stubbed.stdout
    solved = shutil.copytree(folder, tmp_path / "solved")
    learner_copy(solved / "exercises")
    full = make(solved, "grade", f"GRADE_ARGS=--json {tmp_path / 'solved.json'}")
    report = json.loads((tmp_path / "solved.json").read_text())
    assert report["score"] == report["max_score"] == visible_points, full.stdout
    assert {c["visibility"] for s in report["stages"] for c in s["checks"]} == {"visible"}
    assert full.stdout.rstrip("\n").split("\n")[-1] == "Heat maps and details: grade-report.html"
    assert (
        f"Provisional total (visible checks only): {visible_points:g}/{visible_points:g}"
        in (solved / "grade-report.html").read_text()
    )


def test_make_submit_gives_what_the_batch_grader_takes(release, tmp_path):
    folder, _ = release
    solved = shutil.copytree(folder, tmp_path / "solved")
    learner_copy(solved / "exercises")
    assert make(solved, "submit").returncode == 2  # no STUDENT: a usage line, no zip
    done = make(solved, "submit", "STUDENT=ada")
    assert done.returncode == 0, done.stderr
    quoted = make(solved, "submit", "STUDENT=O'Neil Bo")  # a name, never shell syntax
    assert quoted.returncode == 0 and quoted.stdout.startswith("O'Neil Bo.zip holds"), quoted.stderr
    with zipfile.ZipFile(solved / "O'Neil Bo.zip") as bundle:
        assert sorted(bundle.namelist()) == sorted(f"{STAGE_MODULES[n]}.py" for n in STAGES)
    class_folder = tmp_path / "class"
    class_folder.mkdir()
    shutil.move(solved / "ada.zip", class_folder / "ada.zip")
    with zipfile.ZipFile(class_folder / "ada.zip") as bundle:
        assert sorted(bundle.namelist()) == sorted(f"{STAGE_MODULES[n]}.py" for n in STAGES)
    result = batch(class_folder, tmp_path / "grades")
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "grades" / "students" / "ada.json").read_text())["score"] == 100
    missing = f"{STAGE_MODULES[5]}.py"
    (solved / "exercises" / missing).unlink()
    partial = make(solved, "submit", "STUDENT=bo")
    assert partial.returncode == 0 and partial.stdout.startswith(f"bo.zip lacks {missing}: not in exercises/"), partial
    with zipfile.ZipFile(solved / "bo.zip") as bundle:
        assert missing not in bundle.namelist() and len(bundle.namelist()) == len(STAGES) - 1


def test_visible_only_drops_hidden_checks_with_their_data():
    from grader.authoring.release import visible_only

    source = '''"""A check module."""

import torch

from grader.judge.checks.support import check, generator

SHAPES = [(3, 2), (4, 4)]  # hidden inputs
SEED = 123


def helper(x):
    return x


@check("document.thing", visible=True)
def test_document_thing(learner):
    return helper(SEED)


@check("random.thing")
def test_random_thing(learner):
    return [generator("random.thing") for _ in SHAPES]
'''
    released = visible_only(source)
    compile(released, "released.py", "exec")
    assert "test_document_thing" in released and "helper" in released and "SEED = 123" in released
    for secret in ("SHAPES", "random.thing", "generator", "hidden inputs"):
        assert secret not in released


def test_make_watch_in_the_release_grades_each_save_with_the_visible_checks(release, tmp_path):
    folder, _ = release
    solved = shutil.copytree(folder, tmp_path / "solved")
    learner_copy(solved / "exercises")
    stage_file = solved / "exercises" / "stage2_self_attention.py"
    command = ["make", "-s", "watch", "STAGE=2", f"PY={sys.executable}", "SETUP=", f"HTML_REPORT={tmp_path / 'w.html'}"]
    with Watcher(command, solved) as watcher:
        first = watcher.report()
        assert "Provisional total (visible checks only)" in first and "stage 2" in first
        unscaled, _ = watcher.saved(stage_file, stage_file.read_text().replace(" ** 0.5", " ** 0.0"))
        assert "missing-scaling" in unscaled or "wrong-scaling" in unscaled, unscaled


def test_no_visible_check_of_any_stage_asks_for_what_the_release_lacks():
    """The release has no solutions/: a visible check that asks for the `reference` fixture errs for every
    learner, the right code included ("the grader could not finish this check"). Bonus stages too, which
    a release built without course.toml leaves out."""
    from grader.authoring.release import fixtures_out_of_reach, visible_only
    from grader.core.stages import registry

    assert fixtures_out_of_reach("def test_a(learner, reference):\n    pass\n") == {"test_a": ["reference"]}
    for number in registry():
        source = (REPO / "grader" / "judge" / "checks" / f"test_stage{number}.py").read_text(encoding="utf-8")
        assert fixtures_out_of_reach(visible_only(source)) == {}, number


def test_the_released_texts_name_only_commands_the_release_has(release):
    """A guide that says `make figures` or `make bench-…` sends a learner to a command their repository lacks."""
    folder, _ = release
    makefile = (folder / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, re.MULTILINE))
    assert {"grade", "watch", "submit"} <= targets
    guides = {f"docs/{p.name}": p.read_text(encoding="utf-8") for p in (REPO / "docs").glob("stage*.md")}
    for name, text in (text_of(folder) | guides).items():  # every stage's guide, the bonus ones too
        if name.endswith((".md", "Makefile")):
            named = set(re.findall(r"`make ([a-z][a-z-]*)", text))
            assert named <= targets, (name, named - targets)
            assert "make figures" not in text and "from `solutions/`" not in text, name
