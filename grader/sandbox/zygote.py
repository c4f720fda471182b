"""The confined child that runs learner code: a zygote (torch preloaded) inside bubblewrap.

One Sandbox serves one student at a time and any number of students in turn: a class pays the torch
import once per lane. Inside bubblewrap the zygote sees the system and the Python environment
read-only, the runner package (no references, no expected values), the current student's stage
files read-only and a private size-limited scratch directory; no network, a PID namespace of its
own. Without bubblewrap it is a plain child with the same limits (grader.runner.confine), and
`confined` says so.

"isolated" (for Gradescope's container, where bubblewrap may not run) takes bubblewrap where it
works; without it, workers run as an unprivileged uid where that uid can read the Python
installation, and under Landlock where the kernel has it. Either way no student is graded until a
worker confined exactly so has tried to open the grader's own files and failed (Sandbox._prove_isolation).

Standard library only: importing this module must stay instant, so that the zygote starts
before the judge imports torch and both imports run side by side.
"""

import contextlib
import glob
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import IO, cast

from grader.core.operators import allowed_operators
from grader.core.options import SANDBOX_MODES
from grader.core.stages import runner_stages
from grader.runner import folders
from grader.runner.commands import ISOLATION_PROBE, receive_command, send_command
from grader.runner.confine import UNPRIVILEGED_UID
from grader.runner.route_names import SwitchedOff
from grader.sandbox import lane_bounds
from grader.sandbox.confinement import (
    HIDDEN_PACKAGES,
    INSIDE,
    REPO,
    SCRATCH_BYTES,
    SandboxError,
    confinement,
    grading_binds,
    landlock_paths,
    namespace_options,
    probe_paths,
    site_folders,
    system_binds,
)
from grader.sandbox.lane_bounds import LaneBound, lane_bound, lane_memory_bytes

READY_SECONDS = 120.0  # the zygote's torch import, on a busy machine
END_SECONDS = 60.0  # killing a student's processes and reaping them
MODES = SANDBOX_MODES
# What a student reads when --sandbox isolated refuses: the instructor finds the reason in the grader's stderr.
NOT_ISOLATED = "the grader could not isolate your code, please tell your instructor"
PROBE_SECONDS = 60.0  # the probe worker's fork, set-up and answer, on a busy machine

# what the zygote keeps of the judge's environment
KEPT_ENVIRONMENT = ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "LANG", "PATH")


class Sandbox:
    """A running zygote: the judge's end of its command socket, and one student at a time."""

    def __init__(
        self,
        device: str = "cpu",
        mode: str = "auto",
        many_students: bool = False,
        lane: int = 0,
        lane_memory: int | None = None,
        switched_off: SwitchedOff = SwitchedOff(),
        record_operators: bool = False,
    ):
        """``many_students``: the zygote moves to huge pages first (grader.runner.hugepages); ``lane``: which of
        a batch's lanes this is, whose workers run as a uid of their own (grader.runner.confine.LANE_UIDS);
        ``lane_memory``: the bytes its processes may hold together, where the kernel keeps such a bound
        (lane_bounds; None: the share of a single lane); ``switched_off``: torch's routes (grader.runner.routes)
        that no worker of this sandbox may take, switched off once in the zygote; ``record_operators``: instead of
        refusing every operator outside grader/core/operators.toml, the zygote's workers tell the judge which
        operators each request reached, gathered in ``recorded`` (python -m grader.authoring.operators alone)."""
        self.confinement = confinement(mode)
        self.switched_off = switched_off
        self.recorded: set[str] | None = set() if record_operators else None
        # "isolated" grades no one until _prove_isolation has passed in this zygote, with bubblewrap or without.
        self._must_prove = mode == "isolated"
        self._options = (device, many_students, lane)
        self._lane_memory = lane_memory or lane_memory_bytes(1)
        self._bound: LaneBound | None = None
        self._host_folders: Path | None = None  # unsandboxed only: the stage files and scratch live on the host
        self._students = itertools.count()
        self._launch()

    def restart(self) -> None:
        """A fresh zygote, after the last one failed: the grader's own failure, never a student's."""
        self.close()
        self._launch()

    def _launch(self) -> None:
        self._control, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._ending: list[int] = []  # students told to end whose "ended" has not been read yet
        self._ready: dict | None = None
        self._proven: int | None = None  # files of the hidden packages a probe worker failed to open
        self._bound = lane_bound(self._options[2], self._lane_memory)
        try:
            self._zygote = self._start(*self._options, zygote_end)
        finally:
            zygote_end.close()

    @property
    def device(self) -> str:
        """The device workers use ("auto" resolved by the zygote, which has imported torch)."""
        return self._hello()["device"]

    @property
    def isolation(self) -> str:
        """What kept learner code in, in words, for the report."""
        found = self._hello()["isolation"]
        parts = [self.confinement.detail]
        parts.append("no PID namespace per student" if found["namespaces"] == "none" else "a PID namespace per student")
        if found.get("private_mounts"):
            parts.append("fresh folders and /proc per student")
        another_user = found.get("uid") is not None
        # The same words alone and in every lane of a batch: a report does not depend on the lane that graded it.
        parts.append(
            f"workers as uid {UNPRIVILEGED_UID} or below (one per lane)" if another_user else "workers as this user"
        )
        if not self.confinement.confined:
            parts.append(
                f"Landlock ABI {found['landlock']}: only the Python installation, the stage files and a scratch folder"
                if found.get("landlock")
                else "no Landlock"
                if another_user
                else "no Landlock: this user's files were reachable"
            )
        if self._proven is not None:
            parts.append(
                f"checked before grading: a worker could open none of {self._proven} files of "
                f"{', '.join(HIDDEN_PACKAGES)}"
            )
        if self._bound is not None:
            parts.append(self._bound.detail)
        return "; ".join(parts)

    def start_student(self, files: dict[str, bytes]) -> socket.socket:
        """Lay out a new student's stage files and start their first process; the judge's end of its channel.

        The zygote ends the previous student first, whatever happened to it: everything that ran their
        code is gone, and their scratch folder with it, before this student's code can load.
        """
        self._hello()  # where isolation must be proven, the zygote's first answer is followed by the proof
        if self._must_prove and self._proven is None:
            raise SandboxError(f"{NOT_ISOLATED} (the isolation probe has not passed)")
        return self._start_student(files)

    def _start_student(self, files: dict[str, bytes]) -> socket.socket:
        self._collect_ended()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        handles = [_in_memory_file(name, data) for name, data in files.items()]
        try:
            self._command({"student": next(self._students), "files": list(files)}, [theirs.fileno(), *handles])
        finally:
            theirs.close()
            for handle in handles:
                os.close(handle)
        return ours

    def end_student(self) -> None:
        """Have the zygote end the current student; start_student and close() check that it did."""
        number = next(self._students)
        self._command({"end": number})
        self._ending.append(number)

    def _prove_isolation(self) -> None:
        """Grade no one until a worker, confined exactly as a learner's is (bubblewrap, or its uid and
        Landlock; seccomp, limits), has tried to open every probed file of the grader's own packages, and
        could open none. A student with no files is started for it, and ended before any real one: its
        answer is trusted only because no learner code has run in it, nor in the zygote it comes from.

        Raises SandboxError, starting with NOT_ISOLATED, when the probe read anything or gave no answer.
        """
        paths = probe_paths()
        student = self._start_student({})
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            send_command(student, {"fork": ISOLATION_PROBE, "worker": 0}, [theirs.fileno()])
            theirs.close()
            send_command(ours, {"paths": paths})
            ours.settimeout(PROBE_SECONDS)
            answer, fds = receive_command(ours)
            for fd in fds:
                os.close(fd)
        except (OSError, ValueError):
            answer = None
        finally:
            for sock in (theirs, ours, student):
                sock.close()
            self.end_student()
        if not (isinstance(answer, dict) and isinstance(answer.get("reachable"), list)):
            raise SandboxError(f"{NOT_ISOLATED} (the isolation probe gave no answer)")
        if answer["reachable"]:
            raise SandboxError(
                f"{NOT_ISOLATED} ({self.confinement.detail}: a worker could open {answer.get('count')} of "
                f"{len(paths)} files of {', '.join(HIDDEN_PACKAGES)}: {', '.join(answer['reachable'])})"
            )
        self._proven = len(paths)

    def memory_kills(self) -> int:
        """How many of this lane's processes the kernel has killed for the lane's memory bound (0 without one)."""
        return 0 if self._bound is None else self._bound.memory_kills()

    def keep_kernel_memory_down(self) -> None:
        """Past KERNEL_RECLAIMED_ABOVE of kernel memory in the lane, have the kernel reclaim its caches."""
        if self._bound is not None and self._bound.kernel_bytes() > lane_bounds.KERNEL_RECLAIMED_ABOVE:
            self._bound.reclaim()

    @property
    def lane_memory(self) -> int | None:
        """The bytes this lane's processes may hold together, where the kernel keeps that bound."""
        return None if self._bound is None else self._lane_memory

    @property
    def alive(self) -> bool:
        return self._zygote.poll() is None

    def close(self) -> None:
        """End the zygote and everything below it at once (bubblewrap's death ends its namespace)."""
        self._control.close()
        self._zygote.kill()
        self._zygote.wait()
        if self._bound is not None:
            self._bound.remove()
            self._bound = None
        if self._host_folders is not None:
            folders.remove(self._host_folders)
            self._host_folders = None

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _hello(self) -> dict:
        if self._ready is None:
            self._ready = self._answer(READY_SECONDS, "ready")
            if self._must_prove:
                self._prove_isolation()
        return self._ready

    def _command(self, command: dict, fds: Sequence[int] = ()) -> None:
        self._hello()  # the zygote takes commands once it is ready
        try:
            send_command(self._control, command, fds)
        except OSError:
            raise SandboxError("the process that runs the submitted code has stopped") from None

    def _collect_ended(self) -> None:
        while self._ending:
            answer = self._answer(END_SECONDS, "ended")
            if answer["ended"] != self._ending.pop(0):
                raise SandboxError("the process that runs the submitted code answered out of order")

    def _answer(self, seconds: float, key: str) -> dict:
        """The zygote's next message, which must hold ``key``; SandboxError when it does not come."""
        self._control.settimeout(seconds)
        try:
            answer, fds = receive_command(self._control)
        except (OSError, ValueError):
            answer, fds = None, []
        for fd in fds:
            os.close(fd)
        if not isinstance(answer, dict) or key not in answer:
            raise SandboxError(
                "the process that runs the submitted code stopped or failed to start (could it import torch?)"
            )
        return answer

    def _start(self, device: str, many_students: bool, lane: int, control: socket.socket) -> subprocess.Popen:
        confined = self.confinement.confined
        if confined:
            submission, scratch = INSIDE / "submission", INSIDE / "scratch"
        else:
            self._host_folders = Path(tempfile.mkdtemp(prefix="grader-unsandboxed-"))
            submission, scratch = self._host_folders / "submission", self._host_folders / "scratch"
            submission.mkdir()
            scratch.mkdir()
        options = {
            "control": control.fileno(),
            "device": device,
            "many_students": many_students,
            "submission": str(submission),
            "scratch": str(scratch),
            "sandboxed": confined,
            "scratch_bytes": SCRATCH_BYTES,
            "stages": runner_stages(),
            "landlock": None if confined else landlock_paths(),
            "judge": os.getpid(),
            "host_folder": None if self._host_folders is None else str(self._host_folders),
            # the folders "nobody" must be able to read before unsandboxed workers may become it
            "unprivileged_reads": sorted(site_folders()) if self._must_prove and not confined else None,
            "lane": lane,
            "switched_off": asdict(self.switched_off),
            # every operator outside these refuses in every worker; None: none refuses, each is recorded
            "operators": None if self.recorded is not None else allowed_operators(),
        }
        # The command line is anyone's to read (/proc/1/cmdline): the judge's pid alone there, the rest on stdin
        zygote = [sys.executable, "-P", "-m", "grader.runner.zygote", str(os.getpid())]
        environment = dict(PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1", HOME=str(scratch), TMPDIR=str(scratch))
        environment |= {n: os.environ[n] for n in KEPT_ENVIRONMENT if n in os.environ}
        if confined:
            end_stranded_sandboxes()
            environment["PYTHONPATH"] = str(INSIDE / "lib")
            # The sandbox's own root (where bwrap made the mount points) turns read-only last.
            command = [
                "bwrap",
                *namespace_options(),
                *system_binds(),
                *grading_binds(device),
                "--remount-ro",
                "/",
                "--chdir",
                "/",
                "--",
                *zygote,
            ]
        else:
            environment["PYTHONPATH"] = str(REPO)
            command = zygote
        if self._bound is not None:
            command = self._bound.enter_then(command)
        process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(control.fileno(),),
            env=environment,
            cwd=scratch if not confined else None,
        )
        # a few KiB, which the pipe holds without waiting; a zygote dead at once never says hello, said there
        with contextlib.suppress(BrokenPipeError), cast(IO[bytes], process.stdin) as stdin:
            stdin.write(json.dumps(options).encode())
        return process


def end_stranded_sandboxes() -> int:
    """Kill every bubblewrap of a zygote whose judge is gone; how many there were.

    bwrap's --die-with-parent has a gap (containers/bubblewrap#633): a judge killed in the
    milliseconds while bwrap starts kills bwrap's outer process before it lets the inner one (PID 1 of
    the sandbox) go on, and that one then waits forever, outside anyone's reach. No learner code has
    run in it, but it must not stay: the next judge to start a sandbox ends it. A judge's pid is
    written in its zygote's options; one whose pid no longer exists has died.
    """
    ended = 0
    for entry in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(entry, "rb") as file:
                argv = file.read().split(b"\0")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if len(argv) < 2 or os.path.basename(argv[0]) != b"bwrap" or b"grader.runner.zygote" not in argv:
            continue
        try:
            judge = int(argv[argv.index(b"grader.runner.zygote") + 1])
            os.kill(judge, 0)
        except ProcessLookupError:
            try:
                os.kill(int(entry.split("/")[2]), signal.SIGKILL)
                ended += 1
            except OSError:
                pass
        except (ValueError, KeyError, IndexError, TypeError, OSError):  # not one of ours, or not ours to signal
            continue
    return ended


def _in_memory_file(name: str, data: bytes) -> int:
    """A descriptor holding ``data`` that leaves nothing on disk, whatever happens to this process."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create(name, os.MFD_CLOEXEC)
    else:  # macOS: an already-deleted temporary file
        handle = tempfile.TemporaryFile()
        fd = os.dup(handle.fileno())
        handle.close()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    return fd
