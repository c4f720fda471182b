"""How `make grade` and `make test` set up .venv, here and in the students' repository: on Linux the CPU
wheel of the pinned torch comes from PyTorch's CPU index first (the default index's Linux wheel is the
CUDA build, GBs of nvidia-* packages), the default index only where that index cannot be reached;
macOS and Windows take the default index's wheels. tests/test_artefacts_fresh.py runs the recipe."""

import re
import tomllib

import pytest

from grader.authoring.release import build_release
from tests.conftest import REPO
from tests.grading import make

CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"
PIN = next(
    d
    for d in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    if d.startswith("torch==")
)


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    folder = tmp_path_factory.mktemp("release") / "student"
    build_release(folder)
    return folder


def dry_run(folder, target: str, venv, system: str) -> list[str]:
    """The commands `make TARGET` would run on ``system`` for a .venv that does not exist yet."""
    done = make(folder, "-n", target, f"VENV={venv}", f"UNAME_S={system}")
    assert done.returncode == 0, done.stderr
    return done.stdout.replace("\\\n", " ").splitlines()


def installs(commands: list[str]) -> list[str]:
    return [c for c in commands if re.search(r"-m pip install", c)]


@pytest.mark.parametrize("where, target", [("repository", "grade"), ("repository", "test"), ("release", "grade")])
def test_on_linux_torch_comes_from_the_cpu_index_first(release, tmp_path, where, target):
    folder = REPO if where == "repository" else release
    steps = installs(dry_run(folder, target, tmp_path / "venv", "Linux"))
    torch, project = steps[0], steps[1]
    assert CPU_INDEX in torch and f'"{PIN}"' in torch and "--no-deps" in torch
    assert "|| echo" in torch  # the CPU index out of reach: the default index's torch, and the setup goes on
    assert project.endswith("-m pip install --quiet --disable-pip-version-check -e .")
    assert all(CPU_INDEX not in step for step in steps[1:])


@pytest.mark.parametrize("system", ["Darwin", "MINGW64_NT-10.0"])
@pytest.mark.parametrize("where", ["repository", "release"])
def test_elsewhere_the_default_index(release, tmp_path, where, system):
    folder = REPO if where == "repository" else release
    steps = installs(dry_run(folder, "grade", tmp_path / "venv", system))
    assert steps and all(CPU_INDEX not in step for step in steps)


def test_the_release_pins_the_same_torch(release):
    assert PIN in tomllib.loads((release / "pyproject.toml").read_text())["project"]["dependencies"]
