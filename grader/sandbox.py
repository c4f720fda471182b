"""The confined child that runs learner code: a zygote (torch preloaded) inside bubblewrap.

One Sandbox serves one student at a time and any number of students in turn, so a class pays
the torch import once per lane, not once per student. Inside bubblewrap the zygote sees the
system and the Python environment read-only, the runner package (no references, no expected
values), the current student's stage files read-only and a private size-limited scratch
directory; it has no network and its own PID namespace. Without bubblewrap it is a plain child
with the same resource limits (grader.runner.confine), and `confined` says so.

Standard library only: importing this module must stay instant, so that the zygote starts
before the judge imports torch and both imports run side by side.
"""

import functools
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader.submission import StagedSubmission, stage_submission

REPO = Path(__file__).resolve().parents[1]
INSIDE = Path("/grading")
SCRATCH_BYTES = 256 * 1024**2
# What a sandbox may read besides the Python installation: the dynamic loader's configuration
# and the like. Everything else on the machine stays out of sight.
SYSTEM_PATHS = ["/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc/ld.so.cache", "/etc/ld.so.conf",
                "/etc/ld.so.conf.d", "/etc/localtime", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf"]
MODES = ("auto", "bwrap", "none")


class SandboxError(RuntimeError):
    """The sandbox could not start: the grader cannot run learner code at all."""


@dataclass(frozen=True)
class Confinement:
    confined: bool
    detail: str  # how, or why not


def confinement(mode: str = "auto") -> Confinement:
    """bubblewrap where it works ("auto"), insisted on ("bwrap"), or refused ("none")."""
    if mode == "none":
        return Confinement(False, "the sandbox was turned off (--sandbox none)")
    found = _probe_bubblewrap()
    if mode == "bwrap" and not found.confined:
        raise SandboxError(f"--sandbox bwrap was asked for, but {found.detail}")
    return found


@functools.cache
def _probe_bubblewrap() -> Confinement:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Confinement(False, "bubblewrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)")
    probe = subprocess.run([bwrap, *_namespace_options(), *_system_binds(), "--remount-ro", "/", "--",
                            sys.executable, "-c", "pass"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        reason = probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else f"exit {probe.returncode}"
        return Confinement(False, f"bubblewrap cannot create a sandbox here ({reason})")
    return Confinement(True, "bubblewrap")


class Sandbox:
    """A running zygote and the folders it shares with the judge."""

    def __init__(self, device: str = "cpu", mode: str = "auto", many_students: bool = False):
        """``many_students``: the zygote moves to huge pages first (grader.runner.hugepages)."""
        self.confinement = confinement(mode)
        self._root = Path(tempfile.mkdtemp(prefix="grader-sandbox-"))
        self.submission = self._root / "submission"  # the current student's staged stage files
        for folder in (self.submission, self._root / "judge", self._root / "scratch"):
            folder.mkdir()
        self.socket_path = self._root / "judge" / "judge.sock"
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(self.socket_path))
        self.listener.listen(8)
        self._device: str | None = None
        self._zygote = self._start(device, many_students)

    @property
    def device(self) -> str:
        """The device workers use ("auto" resolved by the zygote, which has imported torch)."""
        if self._device is None:
            line = self._zygote.stdout.readline()
            if not line:
                raise SandboxError("the process that runs learner code failed to start (could it import torch?)")
            self._device = json.loads(line)["device"]
        return self._device

    def stage(self, source: Path) -> StagedSubmission:
        """Make ``source`` the current student: its stage files in, the last student's traces out."""
        _empty(self.submission)
        if self.alive and self._device is not None:
            self.command({"reset": True})
        return stage_submission(source, self.submission)

    def inside(self, path: Path) -> str:
        """``path`` (under the sandbox's folders) as the zygote sees it."""
        if not self.confinement.confined:
            return str(path)
        return str(INSIDE / Path(path).relative_to(self._root))

    def command(self, command: dict, answered: bool = True) -> dict | None:
        """Send a zygote command (see grader.runner.zygote); its answer, when it gives one."""
        self.device  # the zygote takes commands once it is ready
        try:
            self._zygote.stdin.write(json.dumps(command) + "\n")
            self._zygote.stdin.flush()
        except BrokenPipeError:
            raise SandboxError("the process that runs learner code has stopped") from None
        if not answered:
            return None
        line = self._zygote.stdout.readline()
        if not line:
            raise SandboxError("the process that runs learner code has stopped")
        return json.loads(line)

    @property
    def alive(self) -> bool:
        return self._zygote.poll() is None

    def close(self) -> None:
        if self._zygote.poll() is None:
            self._zygote.kill()
            self._zygote.wait()
        for stream in (self._zygote.stdin, self._zygote.stdout):
            stream.close()
        self.listener.close()
        shutil.rmtree(self._root, ignore_errors=True)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self, device: str, many_students: bool) -> subprocess.Popen:
        scratch = self._root / "scratch"
        zygote = [sys.executable, "-P", "-m", "grader.runner.zygote", self.inside(self.submission),
                  self.inside(scratch), device, *(["--many-students"] if many_students else [])]
        environment = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1"}
        for name in ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "LANG", "PATH"):
            if name in os.environ:
                environment[name] = os.environ[name]
        if self.confinement.confined:
            environment.update(PYTHONPATH=str(INSIDE / "lib"), HOME=self.inside(scratch), TMPDIR=self.inside(scratch))
            # The sandbox's own root (where bwrap made the mount points) turns read-only last.
            command = ["bwrap", *_namespace_options(), *_system_binds(), *self._grading_binds(device),
                       "--remount-ro", "/", "--chdir", "/", "--", *zygote]
        else:
            environment.update(PYTHONPATH=str(REPO), HOME=str(scratch), TMPDIR=str(scratch))
            command = zygote
        return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                cwd=scratch if not self.confinement.confined else None, env=environment, text=True)

    def _grading_binds(self, device: str) -> list[str]:
        runner = REPO / "grader" / "runner"
        lib = INSIDE / "lib" / "grader"
        binds = ["--ro-bind", str(REPO / "grader" / "__init__.py"), str(lib / "__init__.py"),
                 "--ro-bind", str(runner), str(lib / "runner"),
                 "--ro-bind", str(self._root / "judge"), self.inside(self._root / "judge"),
                 "--ro-bind", str(self.submission), self.inside(self.submission),
                 "--size", str(SCRATCH_BYTES), "--tmpfs", self.inside(self._root / "scratch")]
        # A non-editable install would put the references in site-packages: cover them.
        for entry in sys.path:
            for package in ("solutions", "grader"):
                if entry and os.path.isdir(os.path.join(entry, package)) and Path(entry).resolve() != REPO:
                    binds += ["--tmpfs", os.path.join(entry, package)]
        if device != "cpu":  # CUDA needs the driver's device nodes and sysfs
            for node in sorted(glob.glob("/dev/nvidia*")):
                binds += ["--dev-bind", node, node]
            binds += ["--ro-bind-try", "/sys", "/sys"]
        return binds


def _namespace_options() -> list[str]:
    # --unshare-all: no network, own PID/IPC/UTS namespaces; --new-session: no terminal injection.
    return ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--proc", "/proc",
            "--dev", "/dev"]


@functools.cache
def _system_binds() -> tuple[str, ...]:
    binds: list[str] = []
    for path in SYSTEM_PATHS:
        binds += ["--ro-bind-try", path, path]
    prefixes = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    for prefix in sorted(prefixes):
        if not any(prefix.is_relative_to(p) for p in ("/usr", "/lib", "/bin")):
            binds += ["--ro-bind", str(prefix), str(prefix)]
    return tuple(binds)


def _empty(folder: Path) -> None:
    """Remove what is in ``folder`` but keep the folder: the sandbox has it bind-mounted."""
    for entry in folder.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
