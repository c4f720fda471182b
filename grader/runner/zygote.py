"""The zygote: imports torch once, then gives each student a fresh process tree of their own.

    python -m grader.runner.zygote OPTIONS_JSON      (see grader.sandbox.zygote.Sandbox._start)

The judge sends commands as datagrams (grader.runner.commands):

- {"student": n, "files": [name, ...]} with descriptors [student channel, one per file]: ends
  the previous student, then lays out this student's stage files and an empty scratch folder,
  and forks the student's first process (the "student init", below) in a PID namespace of its
  own, holding the student channel;
- {"end": n}: ends student n and answers {"ended": n} once every process that ran their code
  is gone and their scratch folder with them.

The student init is PID 1 of its namespace: when it is killed, the kernel kills everything else
in the namespace, and the zygote's wait for it returns only after the last one has gone. On its
channel the judge sends {"fork": stage, "worker": n, "switched_off": {...}} with the worker's socket
attached (the worker is forked with it; nothing else links a worker to the judge, so identity never
rests on a worker's word), and {"kill": n}, which ends worker n (the pid recorded here, never one a
worker named).

Neither the zygote nor a student init can be reached from learner code: workers hold no
descriptor that leads to them, run as another uid where the grader is root, can neither signal
nor ptrace (seccomp), and both are non-dumpable, which closes /proc/PID/fd, /proc/PID/mem,
pidfd_getfd and process_vm_readv to anything without CAP_SYS_PTRACE. The zygote runs no torch
operation itself, so forks stay safe, and never imports learner code.
"""

import ctypes
import importlib
import json
import os
import signal
import socket
import sys
from pathlib import Path

from grader.runner import confine, folders
from grader.runner.commands import receive_command, send_command
from grader.runner.route_names import SwitchedOff

CLONE_NEWPID, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWNS = 0x20000000, 0x08000000, 0x10000000, 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT = 1, 2, 4, 32
SUBMISSION_BYTES = 16 * 1024**2
SHARED_MEMORY = Path("/dev/shm")
# Files in a student's scratch or /dev/shm (a few are ever used): each costs 1 KiB of the kernel's memory,
# which their extended attributes share, so 4096 bound both to 4 MiB a folder.
SCRATCH_INODES = 4096
# What torch imports on the first call of a function right code may use, imported once here so that no learner's
# first call pays it against its time limit (1 s, less on a loaded machine): torch.broadcast_shapes and symbolic
# shapes import sympy (0.5 s), torch.testing.assert_close imports torch.distributed.tensor (0.3 s more).
TORCH_LAZY_IMPORTS = ("torch.fx.experimental.symbolic_shapes", "torch.distributed.tensor")
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def main() -> None:
    options = json.loads(sys.stdin.buffer.read())  # the judge's pid alone is on the command line, for all to see
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # no worker inherits the pipe
    os.close(devnull)
    control = socket.socket(fileno=options["control"])
    if options["host_folder"]:  # unsandboxed: if the judge is killed, its folders are this process's to remove
        # Before torch's import, which takes seconds: a judge killed meanwhile leaves no folder behind.
        signal.signal(signal.SIGTERM, lambda *_: (folders.remove(Path(options["host_folder"])), os._exit(0)))
        confine.die_with_parent(options["judge"], signal.SIGTERM)
    zygote = Zygote(options)  # its probes fork: cheap before torch is imported, not after
    # Everything a worker needs, imported once, here.
    import torch

    from grader.runner import hugepages, operators, routes, worker

    for name in TORCH_LAZY_IMPORTS:  # before the operators and routes, which then cover what these register
        importlib.import_module(name)
    zygote.worker = worker
    routes.prepare()  # once here, not in every worker with routes switched off
    if options["operators"] is not None:  # before the routes, whose refusals then say which route it was
        operators.refuse_all_but(options["operators"])
    # What no worker may take, switched off once here: each worker then writes only its own few pages.
    routes.switch_off(SwitchedOff.from_wire(zygote.switched_off))
    if zygote.device == "auto":
        zygote.device = "cuda" if torch.cuda.is_available() else "cpu"  # does not initialise CUDA
    confine.make_undumpable()
    confine.become_reaper()  # without namespaces, a student's orphaned workers come here to be reaped
    confine.forget_grader_modules()  # once here, not in every worker: it touches all of sys.modules
    if options["many_students"]:
        hugepages.collapse_into_huge_pages()
    send_command(control, {"ready": True, "device": zygote.device, "isolation": zygote.isolation()})
    while True:
        command, fds = receive_command(control)
        if command is None:
            return  # the judge is gone
        if "student" in command:
            zygote.end_student()
            zygote.start_student(fds[0], dict(zip(command["files"], fds[1:])))
        elif "end" in command:
            zygote.end_student()
            try:
                send_command(control, {"ended": command["end"]})
            except OSError:
                return  # the judge has gone without waiting for the answer
        for fd in fds:
            os.close(fd)


class Zygote:
    def __init__(self, options: dict):
        # Each student init mounts a fresh scratch over this one (_private_mounts); where the kernel
        # refuses, end_student empties it once the student is gone.
        self.submission, self.scratch = Path(options["submission"]), Path(options["scratch"])
        self.scratch_bytes = options["scratch_bytes"]
        self.sandboxed = options["sandboxed"]
        self.landlock = options["landlock"]  # unsandboxed: the paths a worker keeps (see worker.run)
        self.device = options["device"]  # "auto" is resolved once torch is imported
        self.stages = {int(number): stage for number, stage in options["stages"].items()}  # JSON keys are text
        self.switched_off = options["switched_off"]  # torch's routes switched off here, for every worker
        self.record_operators = options["operators"] is None  # workers tell which operators each request reached
        self.worker = None  # grader.runner.worker, once imported
        # Root in bubblewrap: workers become "nobody", or the uid of their lane. Unsandboxed, the Python
        # installation may not be readable by another uid (/root/.pyenv): workers keep the uid and Landlock
        # confines them; --sandbox isolated has them become that uid wherever it can read that installation.
        self.worker_uid = None
        uid = confine.LANE_UIDS[options["lane"] % len(confine.LANE_UIDS)]
        if os.geteuid() == 0 and (self.sandboxed or _readable_as(uid, options["unprivileged_reads"])):
            self.worker_uid = uid
            if not self.sandboxed:
                _open_to(self.worker_uid, Path(options["host_folder"]), self.submission, self.scratch)
        # The way back after each student's unshare (the "setns" method); the probe uses it too.
        self.own_pid_namespace = os.open("/proc/self/ns/pid", os.O_RDONLY) if sys.platform == "linux" else None
        self.namespaces, self.private_mounts = self._isolation_method()
        self.student_init: int | None = None

    def isolation(self) -> dict:
        return {
            "namespaces": self.namespaces,
            "uid": self.worker_uid,
            "landlock": confine.landlock_abi() if self.landlock else 0,
            "private_mounts": self.private_mounts,
        }

    def start_student(self, channel: int, files: dict[str, int]) -> None:
        self._lay_out(files)
        self.student_init = self._fork_into_namespace(channel)

    def end_student(self) -> None:
        """Kill the student init (and with it its namespace), then reap until no child is left."""
        if self.student_init is not None:
            try:
                os.kill(self.student_init, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.student_init = None
        while True:  # the namespace's processes, or (without one) the workers that came here as orphans
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break
        # Under the student's own mounts these stayed empty; /dev/shm only in the sandbox (else it is the machine's).
        for folder in (self.scratch, *([SHARED_MEMORY] if self.sandboxed else [])):
            if folder.is_dir():
                folders.empty(folder)

    def _lay_out(self, files: dict[str, int]) -> None:
        """This student's stage files (the student init makes them read-only to workers)."""
        folders.empty(self.submission)
        for name, fd in files.items():
            if "/" in name or name.startswith("."):
                continue  # the judge names only stage files; never write anywhere else
            # Copied by the kernel: a student's bytes never pass through this process's memory,
            # which every later student's workers are forked from.
            target = os.open(self.submission / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o444)
            try:
                offset = 0
                while offset < SUBMISSION_BYTES and (
                    sent := os.sendfile(target, fd, offset, SUBMISSION_BYTES - offset)
                ):
                    offset += sent
            finally:
                os.close(target)

    def _isolation_method(self) -> tuple[str, bool]:
        """How this process can give each student a PID namespace, and whether the student init can
        then mount its own folders (_private_mounts), tried in children so that nothing here changes:
        "setns" (unshare, then back again), "child" (unshare in a child), "user" (the same, in a user
        namespace of its own), or "none"."""
        if sys.platform != "linux":
            return "none", False
        for method, flags in (
            ("setns", CLONE_NEWPID | CLONE_NEWIPC),
            ("child", CLONE_NEWPID | CLONE_NEWIPC),
            ("user", CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWIPC),
        ):
            pid = os.fork()
            if pid == 0:
                if _libc.unshare(flags) != 0:
                    os._exit(2)
                student_init = os.fork()
                if student_init == 0:
                    os._exit(0 if _private_mounts(self) else 1)
                if method == "setns" and _libc.setns(self.own_pid_namespace, CLONE_NEWPID) != 0:
                    os._exit(2)
                os._exit(os.waitstatus_to_exitcode(os.waitpid(student_init, 0)[1]))
            code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
            if code in (0, 1):
                return method, code == 0
        return "none", False

    def _fork_into_namespace(self, channel: int) -> int:
        """Fork the student init, holding ``channel``, into a namespace of its own; its pid here."""
        zygote = os.getpid()
        if self.namespaces == "setns":  # this process may return to its own namespace after each student
            _unshare(CLONE_NEWPID | CLONE_NEWIPC)
            pid = os.fork()
            if pid == 0:  # PID 1 of the new namespace: its parent's pid is not visible from there
                _run_student_init(channel, self, zygote_is_parent=True)
            if _libc.setns(self.own_pid_namespace, CLONE_NEWPID) != 0:
                raise OSError(ctypes.get_errno(), "setns back to the zygote's PID namespace failed")
            return pid
        if self.namespaces == "none":
            pid = os.fork()
            if pid == 0:
                _run_student_init(channel, self, zygote_is_parent=True, zygote_pid=zygote)
            return pid
        # "child" / "user": a short-lived child makes the namespace and forks the student init
        # into it; the init then comes to this process, the reaper, when that child exits.
        read, write = os.pipe()
        intermediate = os.fork()
        if intermediate == 0:
            os.close(read)
            _unshare(CLONE_NEWPID | CLONE_NEWIPC | (CLONE_NEWUSER if self.namespaces == "user" else 0))
            pid = os.fork()
            if pid == 0:
                os.close(write)
                _run_student_init(channel, self, zygote_is_parent=False)
            os.write(write, str(pid).encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as answer:
            pid = int(answer.read() or b"0")
        os.waitpid(intermediate, 0)
        if not pid:
            raise OSError("the student's namespace could not be made")
        return pid


def _readable_as(uid: int, folders: list[str] | None) -> bool:
    """Whether ``uid`` can list every one of ``folders`` (False when there are none to check), tried in a child."""
    if not folders or sys.platform != "linux":
        return False
    pid = os.fork()
    if pid == 0:
        try:
            confine.drop_privileges(uid)
            for folder in folders:
                os.listdir(folder)
        except OSError:
            os._exit(1)
        os._exit(0)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def _open_to(uid: int, host_folder: Path, submission: Path, scratch: Path) -> None:
    """Unsandboxed workers as ``uid`` reach the stage files (read-only) and a scratch folder of their own."""
    os.chmod(host_folder, 0o711)
    os.chmod(submission, 0o755)
    os.chown(scratch, uid, uid)


def _run_student_init(channel: int, parent: Zygote, zygote_is_parent: bool, zygote_pid: int | None = None) -> None:
    """The student's first process: forks their workers, ends one on request. Never returns.

    When the zygote is its parent, the zygote's end ends it (``zygote_pid``: check that the zygote
    is still there, where this process can see its pid). Otherwise its parent is a child that exits
    at once, and the end of the judge's channel, or of the sandbox, ends this process instead.
    """
    try:
        os.setsid()  # out of the zygote's process group: no signal to a group reaches back
        if parent.private_mounts:
            _private_mounts(parent)
        if zygote_is_parent:
            confine.die_with_parent(zygote_pid)  # the zygote gone: this namespace goes too
        confine.close_descriptors(keep=[channel])
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps its workers
        # What lets each worker become the unprivileged uid, and what ends it then.
        confine.drop_privileges(
            keep=(confine.CAP_KILL, confine.CAP_SETGID, confine.CAP_SETUID) if parent.worker_uid is not None else ()
        )
        commands = socket.socket(fileno=channel)
        me = os.getpid()
        workers: dict[int, int] = {}  # the judge's number for each worker -> its pid
        while True:
            command, fds = receive_command(commands)
            if command is None:
                break  # the judge is done with this student
            if "fork" in command and len(fds) == 1:
                pid = os.fork()
                if pid == 0:
                    try:
                        parent.worker.run(
                            int(command["fork"]),
                            fds[0],
                            me,
                            parent.submission,
                            parent.scratch,
                            parent.device,
                            parent.worker_uid,
                            parent.landlock,
                            parent.stages,
                            command.get("switched_off") or {},
                            parent.switched_off,
                            parent.record_operators,
                        )
                    finally:
                        os._exit(0)
                workers[int(command["worker"])] = pid
            elif "kill" in command and int(command["kill"]) in workers:
                try:
                    os.kill(workers.pop(int(command["kill"])), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for fd in fds:
                os.close(fd)
    finally:
        os._exit(0)


def _private_mounts(zygote: Zygote) -> bool:
    """In a mount namespace of the student's own: a fresh scratch tmpfs and /dev/shm, the stage
    files and (in the sandbox) /dev read-only, and a /proc that shows the student's PID namespace alone (workers do
    not even see the zygote). All of it goes with the namespace when the student ends.

    Everything is made private first, so that nothing propagates back. False where the kernel
    refuses one of them: the zygote's probe then gives up on them for every student, and empties
    the folders between students instead.
    """
    MS_BIND, MS_REC, MS_PRIVATE, MS_NOEXEC = 0x1000, 0x4000, 0x40000, 8
    if _libc.unshare(CLONE_NEWNS) != 0:
        return False
    try:
        _mount(None, Path("/"), None, MS_REC | MS_PRIVATE, None)
        # nr_inodes bounds what no size= counts: the files themselves, and their extended attributes, which
        # the kernel keeps in its own memory and charges to the same budget
        scratch = f"size={zygote.scratch_bytes},nr_inodes={SCRATCH_INODES},mode=1777"
        _mount("tmpfs", zygote.scratch, "tmpfs", MS_NOSUID | MS_NODEV, scratch)
        if SHARED_MEMORY.is_dir():
            _mount("tmpfs", SHARED_MEMORY, "tmpfs", MS_NOSUID | MS_NODEV, scratch)
        # Bound onto themselves with what is mounted below them (/dev/null…), then made read-only.
        for folder in (zygote.submission, *([Path("/dev")] if zygote.sandboxed else [])):
            _mount(str(folder), folder, None, MS_BIND | MS_REC, None)
            # nodev and noexec too: a mount made in a more privileged namespace may have them locked on.
            # Device files below /dev are mounts of their own, which this leaves as they are.
            _mount(None, folder, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
        _mount("proc", Path("/proc"), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    except OSError:
        return False
    return True


def _unshare(flags: int) -> None:
    if _libc.unshare(flags) != 0:
        raise OSError(ctypes.get_errno(), "unshare failed")


def _mount(source: str | None, target: Path, fstype: str | None, flags: int, data: str | None) -> None:
    encode = lambda text: None if text is None else text.encode()  # noqa: E731
    if _libc.mount(encode(source), str(target).encode(), encode(fstype), ctypes.c_ulong(flags), encode(data)) != 0:
        raise OSError(ctypes.get_errno(), f"mount on {target} failed")


if __name__ == "__main__":
    main()
