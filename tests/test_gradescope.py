"""The Gradescope autograder zip, run as Gradescope would, in a temporary /autograder tree: with bubblewrap,
without it (Landlock, or the unprivileged user "nobody"), and where isolation cannot be proven."""

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import jsonschema
import pytest

from grader.authoring.gradescope import NEVER_SHIPPED, build, entry_points
from grader.authoring.layers import GRADING_LAYERS
from grader.authoring.shipping import closure, data_files, layer_modules
from grader.core.inputs_key import KEY_FILE
from grader.runner.confine import UNPRIVILEGED_UID, landlock_abi
from grader.runner.zygote import _readable_as
from grader.sandbox import confinement
from grader.sandbox import zygote as sandbox
from tests import without_landlock
from tests.conftest import REPO
from tests.grading import learner_copy
from tests.test_repricing import points_file

SCHEMA = json.loads((REPO / "grader" / "core" / "schemas" / "gradescope.schema.json").read_text())
BUBBLEWRAP = sandbox.confinement("auto")
needs_bubblewrap = pytest.mark.skipif(not BUBBLEWRAP.confined, reason=f"no sandbox here: {BUBBLEWRAP.detail}")
needs_landlock = pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="Gradescope runs the autograder as root")
can_hide_landlock = pytest.mark.skipif(not without_landlock.supported(), reason="seccomp filter for x86_64/aarch64")
can_remount = pytest.mark.skipif(not (shutil.which("unshare") and shutil.which("mount")), reason="no unshare/mount")
SOLUTION = (REPO / "solutions" / "stage1_softmax.py").read_text()
# Reads the reference wherever it may lie, prints what it found and raises with it: whatever it reads would
# reach the visible checks' output, as what the file printed and as the import error's message.
HOSTILE = """
import glob
PLACES = [ROOT + "/source/solutions/stage1_softmax.py", ROOT + "/source/grader/document_values.toml",
          "/autograder/source/solutions/stage1_softmax.py", "../solutions/stage1_softmax.py",
          *glob.glob("/proc/*/cwd/solutions/stage1_softmax.py"), *glob.glob("/proc/*/root" + ROOT + "/source/solutions/*")]
seen = []
for place in PLACES:
    try:
        with open(place) as found:
            seen.append(place + " READ: " + found.read())
    except Exception as error:
        seen.append(place + " " + type(error).__name__)
print("HOSTILE-RAN", *seen, sep="\\n")
raise RuntimeError("HOSTILE-RAN " + " | ".join(seen))
"""


@pytest.fixture(scope="module")
def autograder_zip(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("dist") / "autograder.zip")


@pytest.fixture
def root(autograder_zip):
    """/autograder as Gradescope lays it out, in a folder every user may enter (as /autograder is): only
    run_autograder's own chmod keeps the reference from another user."""
    folder = Path(tempfile.mkdtemp(prefix="autograder-"))
    folder.chmod(0o755)
    try:
        yield install(autograder_zip, folder)
    finally:
        shutil.rmtree(folder)


def install(autograder_zip: Path, root: Path) -> Path:
    """Lay out /autograder as Gradescope does: the zip in source/, run_autograder beside it."""
    with zipfile.ZipFile(autograder_zip) as archive:
        archive.extractall(root / "source")
        for info in archive.infolist():  # extractall drops the executable bit
            os.chmod(root / "source" / info.filename, info.external_attr >> 16 & 0o777)
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")
    (root / "submission").mkdir()
    return root


def run_autograder(
    root: Path, python: str = sys.executable, path: str | None = None, wrapper: list[str] = ()
) -> tuple[dict, str]:
    """Gradescope's results.json and what run_autograder printed (which only instructors see)."""
    environment = {
        **os.environ,
        "AUTOGRADER_ROOT": str(root),
        "AUTOGRADER_PYTHON": python,
        **({"PATH": path} if path else {}),
    }
    result = subprocess.run(
        [*wrapper, str(root / "run_autograder")], env=environment, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    results = json.loads((root / "results" / "results.json").read_text())
    jsonschema.validate(results, SCHEMA)
    return results, result.stdout


def without_bubblewrap(folder: Path) -> str:
    """A PATH with every command of this one but bwrap, as in a container without bubblewrap."""
    folder.mkdir()
    for entry in os.environ["PATH"].split(os.pathsep):
        for command in Path(entry).glob("*") if Path(entry).is_dir() else []:
            if command.name != "bwrap" and not (folder / command.name).exists():
                (folder / command.name).symlink_to(command)
    assert shutil.which("bwrap", path=str(folder)) is None
    return str(folder)


def no_landlock() -> list[str]:
    """A command prefix: as on a kernel without Landlock (tests/without_landlock.py)."""
    return [sys.executable, str(REPO / "tests" / "without_landlock.py")]


def like_gradescopes_image(folder: Path) -> list[str]:
    """A command prefix: a private mount namespace that looks, where it matters here, like Gradescope's image.
    "nobody" can enter the folders above the Python installation (a tmpfs opens the first closed one, the
    installation bound back in), and the grader's packages exist in /autograder/source alone: every other copy
    this machine has (this checkout, an editable install's) is covered by an empty folder."""
    steps = [
        "set -e",
        *(f"mount -t tmpfs -o mode=0700 tmpfs {shlex.quote(str(hidden))}" for hidden in confinement.hidden_paths()),
    ]
    installation = Path(sys.base_prefix).resolve()
    closed = next((p for p in reversed(installation.parents) if not p.stat().st_mode & stat.S_IXOTH), None)
    if closed is not None:
        inside, kept = closed / installation.relative_to(closed).parts[0], folder / "kept"
        kept.mkdir()
        steps += [
            f"mount --bind {shlex.quote(str(inside))} {kept}",
            f"mount -t tmpfs -o mode=0755 tmpfs {shlex.quote(str(closed))}",
            f"mkdir -p {shlex.quote(str(inside))}",
            f"mount --bind {kept} {shlex.quote(str(inside))}",
        ]
    steps.append('exec "$@"')
    return [shutil.which("unshare"), "--mount", "--propagation", "private", "sh", "-c", "\n".join(steps), "sh"]


def nobody_reads_python() -> bool:
    return _readable_as(UNPRIVILEGED_UID, sorted(confinement.site_folders()))


def visible_text(results: dict) -> str:
    return "\n".join([results["output"], *(test["output"] for test in results["tests"])])


def write_hostile(root: Path) -> None:
    (root / "submission" / "stage1_softmax.py").write_text(f"ROOT = {str(root)!r}\n{HOSTILE}")


def assert_graded_without_the_reference(results: dict) -> None:
    """A hostile stage 1 ran (its printout is in the visible checks' output) and read none of the reference."""
    text = visible_text(results)
    assert "HOSTILE-RAN" in text and "READ:" not in text, text[:3000]
    assert "Error" in text  # PermissionError, FileNotFoundError: each attempt failed
    assert not [line for line in SOLUTION.splitlines() if len(line) > 30 and line in text]


# The zip ---------------------------------------------------------------------------------


def test_the_zip_holds_what_grading_needs_and_nothing_else(autograder_zip):
    with zipfile.ZipFile(autograder_zip) as archive:
        names = archive.namelist()
        modes = {i.filename: i.external_attr >> 16 for i in archive.infolist()}
        requirements = archive.read("requirements.txt").decode()
    assert {
        "setup.sh",
        "run_autograder",
        "requirements.txt",
        "grader/judge/checks/test_stage5.py",
        "grader/judge/document_values.toml",
        "solutions/stage5_multihead_attention.py",
    } <= set(names)
    assert not [
        n for n in names if n.startswith(("tests/", "exercises/", "grader/authoring/", ".venv")) or "__pycache__" in n
    ], names
    assert modes["run_autograder"] & stat.S_IXUSR and modes["setup.sh"] & stat.S_IXUSR
    assert "torch==2.13.0\n" in requirements
    for script in ("setup.sh", "run_autograder"):
        subprocess.run(["bash", "-n", str(REPO / "grader" / "authoring" / "gradescope" / script)], check=True)


def test_a_points_table_in_the_zip_prices_every_submission_as_the_batch_does(tmp_path):
    """make gradescope POINTS=...: the zip holds the table and run_autograder grades with --points."""
    table = points_file(tmp_path / "my-points.toml", **{"document.softmax_naive": 5})
    folder = tmp_path / "autograder"
    folder.mkdir(mode=0o755)
    root = install(build(tmp_path / "autograder.zip", points=table), folder)
    learner_copy(root / "submission", stages=[1])
    results, _ = run_autograder(root)
    priced = next(t for t in results["tests"] if t["name"] == "stage 1: document.softmax_naive")
    assert priced["max_score"] == priced["score"] == 5  # the registry's 2, priced by the table
    (tmp_path / "refused.toml").write_text("[stage99]\n")
    with pytest.raises(ValueError, match="no stage"):  # a table the grader would refuse stops the build
        build(tmp_path / "refused.zip", points=tmp_path / "refused.toml")


def test_the_zip_holds_what_grading_imports(autograder_zip, tmp_path):
    """Read in the unpacked zip itself: every import of what grading runs resolves there, and nothing else is there."""
    with zipfile.ZipFile(autograder_zip) as archive:
        archive.extractall(tmp_path)
        names = {n for n in archive.namelist() if n.startswith(("grader/", "solutions/"))}
    modules = closure(
        [*entry_points(), *layer_modules(GRADING_LAYERS, root=tmp_path)], never=NEVER_SHIPPED, root=tmp_path
    )
    assert set(layer_modules(GRADING_LAYERS)) <= set(modules)  # a new module of a grading layer is never left out
    files = [*modules.values(), *data_files(modules, root=tmp_path)]
    assert {path.relative_to(tmp_path).as_posix() for path in files} == names
    assert {
        "grader.core.toml_file",
        "grader.intake.notebook_files",
        "grader.runner.zygote",
        "solutions.stage8_gqa",
    } <= set(modules)


def test_the_same_sources_and_key_give_the_same_zip(autograder_zip, tmp_path):
    (tmp_path / KEY_FILE).write_bytes(zipfile.ZipFile(autograder_zip).read(KEY_FILE))
    assert build(tmp_path / "again.zip", inputs_key=tmp_path / KEY_FILE).read_bytes() == autograder_zip.read_bytes()
    assert build(tmp_path / "new.zip").read_bytes() != autograder_zip.read_bytes()  # a new key, unless given


# What a student sees ---------------------------------------------------------------------


@needs_bubblewrap
def test_until_grades_are_published_a_student_sees_the_visible_score_alone(root):
    learner_copy(root / "submission")
    (root / "submission" / "notes.md").write_text("my notes")
    results, stdout = run_autograder(root)
    assert results["score"] == 100  # the gradebook's, which Gradescope hides while hidden tests are
    assert {t["visibility"] for t in results["tests"]} == {"visible", "after_published"}
    visible = [t for t in results["tests"] if t["visibility"] == "visible"]
    hidden_points = sum(t["max_score"] for t in results["tests"] if t["visibility"] == "after_published")
    assert results["output"].startswith(
        f"Visible checks: {sum(t['score'] for t in visible):g}/"
        f"{sum(t['max_score'] for t in visible):g} on cpu. The hidden checks "
        f"({hidden_points:g} of the 100 points) count once your instructor publishes"
    )
    assert not re.search(r"\b100/100\b", results["output"]) and "ignored: notes.md" in results["output"]
    assert results["stdout_visibility"] == "hidden" and "Total: 100/100" in stdout  # the instructor's view
    assert results["extra_data"]["sandbox"].startswith("bubblewrap; ")
    assert "checked before grading: a worker could open none of" in results["extra_data"]["sandbox"]


@pytest.mark.parametrize("upload", ["a zip", "notebooks"])
def test_a_zip_or_notebooks_uploaded_as_they_are_earn_full_marks(root, tmp_path, upload):
    """Gradescope leaves an uploaded .zip zipped and a notebook course's .ipynb files as they are."""
    files = sorted(learner_copy(tmp_path / "work").iterdir())
    if upload == "a zip":  # what `make submit` writes
        with zipfile.ZipFile(root / "submission" / "ada.zip", "w", zipfile.ZIP_DEFLATED) as archive:
            for path in files:
                archive.write(path, path.name)
    else:  # one notebook per stage, its answer cell writing the stage file
        for path in files:
            cell = {
                "cell_type": "code",
                "metadata": {},
                "execution_count": None,
                "outputs": [],
                "source": f"%%writefile {path.name}\n{path.read_text()}",
            }
            notebook = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
            (root / "submission" / f"{path.stem}.ipynb").write_text(json.dumps(notebook))
    results, _ = run_autograder(root)
    assert results["score"] == 100, results["output"]


def test_the_stubs_get_zero_and_a_hint_per_check(root):
    for stub in (REPO / "exercises").glob("stage*.py"):
        shutil.copy(stub, root / "submission")
    results, _ = run_autograder(root)
    assert results["score"] == 0
    assert all("hint [not-implemented]" in t["output"] for t in results["tests"])


def test_when_the_grader_cannot_run_the_student_is_told(root):
    shutil.rmtree(root / "submission")  # nothing was uploaded, so grading cannot start
    results, _ = run_autograder(root)
    assert results["score"] == 0 and "could not grade this submission" in results["output"]
    assert "does not exist" in results["output"]


# Where learner code runs -----------------------------------------------------------------


@needs_bubblewrap
def test_with_bubblewrap_a_hostile_submission_reads_nothing_of_the_reference(root):
    write_hostile(root)
    results, _ = run_autograder(root)
    assert_graded_without_the_reference(results)


@needs_landlock
def test_without_bubblewrap_landlock_keeps_the_reference_out_and_the_results_say_so(root, tmp_path):
    learner_copy(root / "submission")
    results, _ = run_autograder(root, path=without_bubblewrap(tmp_path / "bin"))
    assert results["score"] == 100
    assert "unsandboxed: your code ran without a sandbox, because bubblewrap is not installed" in results["output"]
    assert "Landlock ABI" in results["output"]
    assert "checked before grading: a worker could open none of" in results["output"]


@needs_landlock
def test_without_bubblewrap_a_hostile_submission_reads_nothing_of_the_reference(root, tmp_path):
    write_hostile(root)
    results, _ = run_autograder(root, path=without_bubblewrap(tmp_path / "bin"))
    assert_graded_without_the_reference(results)


@needs_root
@can_hide_landlock
@can_remount
def test_without_bubblewrap_or_landlock_learner_code_runs_as_nobody_with_the_reference_out_of_reach(root, tmp_path):
    write_hostile(root)
    learner_copy(root / "submission", stages=[2, 3, 4, 5])
    results, _ = run_autograder(
        root, path=without_bubblewrap(tmp_path / "bin"), wrapper=[*no_landlock(), *like_gradescopes_image(tmp_path)]
    )
    assert (
        f"workers as uid {UNPRIVILEGED_UID} or below (one per lane); no Landlock; checked before" in results["output"]
    )
    assert results["score"] == 80  # stage 1 is the hostile one
    assert_graded_without_the_reference(results)


@needs_root
@can_hide_landlock
def test_where_isolation_cannot_be_proven_nothing_runs_and_the_student_is_told(root, tmp_path):
    if nobody_reads_python():
        pytest.skip("'nobody' can read this Python installation: workers would run as nobody and be isolated")
    # As root, without bubblewrap or Landlock, and with a Python installation "nobody" cannot read (in
    # /root), workers would keep root's uid: the probe opens the reference, and nothing is graded.
    write_hostile(root)
    learner_copy(root / "submission", stages=[2, 3, 4, 5])
    results, stdout = run_autograder(root, path=without_bubblewrap(tmp_path / "bin"), wrapper=no_landlock())
    assert results == {
        "score": 0,
        "execution_time": 0,
        "tests": [],
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "output": sandbox.NOT_ISOLATED,
    }
    assert "HOSTILE-RAN" not in stdout  # no learner code ran at all
    assert "could open" in stdout and str(root / "source") in stdout  # the instructor learns why
