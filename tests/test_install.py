"""How `make grade` and `make test` set up .venv, here and in the students' repository: on Linux the CPU
wheel of the pinned torch comes from PyTorch's CPU index first (the default index's Linux wheel is the
CUDA build, GBs of nvidia-* packages), the default index only where that index cannot be reached;
macOS and Windows take the default index's wheels. tests/test_artefacts_fresh.py runs the recipe."""

import os
import re
import socket
import subprocess
import sys
import time
import tomllib

import pytest
import yaml

from grader.authoring.release import CLASSROOM_WORKFLOW, build_release
from grader.core.index_reachable import PROXY_VARIABLES
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


def fake_venv(folder, log) -> None:
    """A .venv whose python answers the reachability question for real and records every other call
    (pip's installs) instead of running it: the recipe's choices, without an install."""
    (folder / "bin").mkdir(parents=True)
    python = folder / "bin" / "python"
    python.write_text(
        "#!/bin/sh\n"
        f'if [ "$2" = grader.core.index_reachable ]; then exec {sys.executable} "$@"; fi\n'
        f'echo "$@" >> {log}\n'
    )
    python.chmod(0o755)


@pytest.mark.parametrize("where", ["repository", "release"])
def test_an_unreachable_cpu_index_is_said_at_once_and_skipped(release, tmp_path, where):
    """The first setup on a machine that cannot reach PyTorch's CPU index: no pip call waits on it, the
    fallback line is printed, and the project's own install goes on."""
    folder = REPO if where == "repository" else release
    stamp = ".runtime-installed" if where == "repository" else ".installed"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST") and k not in PROXY_VARIABLES}
    with socket.socket() as listening:  # a port on this machine that is open, then one that is closed
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        open_index = f"http://127.0.0.1:{listening.getsockname()[1]}/whl/cpu"
        for index, reached in [(open_index, True), ("http://127.0.0.1:1/whl/cpu", False)]:
            venv, log = tmp_path / f"venv-{reached}", tmp_path / f"pip-{reached}.log"
            fake_venv(venv, log)
            started = time.monotonic()
            done = subprocess.run(
                ["make", "-s", f"{venv}/{stamp}", f"VENV={venv}", "UNAME_S=Linux", f"TORCH_CPU_INDEX={index}"],
                cwd=folder,
                capture_output=True,
                text=True,
                env=env,
                timeout=120,
            )
            assert done.returncode == 0, done.stderr
            assert time.monotonic() - started < 30
            calls = log.read_text().splitlines()
            said = f"PyTorch's CPU index ({index}) could not be reached" in done.stdout
            assert said is not reached, done.stdout
            cpu_wheel = [c for c in calls if f"--index-url {index}" in c]
            assert len(cpu_wheel) == int(reached) and all("--retries 1 --timeout 15" in c for c in cpu_wheel)
            assert calls[-1].endswith("pip install --quiet --disable-pip-version-check -e .")


def test_the_index_question_answers_without_waiting(tmp_path, monkeypatch):
    from grader.core.index_reachable import reachable

    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        assert reachable(f"http://127.0.0.1:{listening.getsockname()[1]}/whl/cpu")
    assert not reachable("http://127.0.0.1:1/whl/cpu")
    assert not reachable("https://no-such-host.invalid/whl/cpu", timeout=2)
    assert reachable(tmp_path.as_uri()) and not reachable((tmp_path / "none").as_uri())
    monkeypatch.setenv("https_proxy", "http://127.0.0.1:1")  # behind a proxy, pip finds out itself
    assert reachable("https://no-such-host.invalid/whl/cpu")


def test_every_apt_get_install_is_preceded_by_an_update():
    """A fresh runner's package lists may be stale or empty: install alone can fail to find bubblewrap."""
    scripts = {
        "classroom.yml": "\n".join(
            step.get("run", "")
            for step in yaml.safe_load(CLASSROOM_WORKFLOW.read_text())["jobs"]["run-autograding-tests"]["steps"]
        ),
        "setup.sh": (REPO / "grader" / "authoring" / "gradescope" / "setup.sh").read_text(),
        ".ci/run": (REPO / ".ci" / "run").read_text(),
    }
    for name, text in scripts.items():
        installs = [m.start() for m in re.finditer(r"apt-get install", text)]
        updates = [m.start() for m in re.finditer(r"apt-get update", text)]
        assert installs and updates and min(updates) < min(installs), name
