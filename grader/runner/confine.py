"""What a process that runs learner code gives up before the first line of it runs.

A worker, in this order: every file descriptor but its channel to the judge; the uid it was
started with when it was root (it becomes an unprivileged one); every capability; the right to
be ptraced or have its memory read (non-dumpable); resources beyond fixed limits; on Linux
without bubblewrap, every file outside the Python installation, its stage files and its scratch
folder (Landlock); new processes, and every system call that reaches another process or the
kernel's global state (seccomp: grader/runner/seccomp.py); and finally the grader's own packages
(an import guard). They apply with or without bubblewrap: the sandbox adds a private file system
and no network.

The zygote and a student's first process use some of the same steps on themselves (non-dumpable,
capabilities, parent-death signal), so that nothing a worker can do reaches them.
"""

import ctypes
import os
import platform
import resource
import signal
import struct
import sys
from importlib.abc import MetaPathFinder
from pathlib import Path

# Room for learner tensors above what torch itself maps: a tens-of-GB allocation fails fast.
MEMORY_HEADROOM_BYTES = 3 * 1024**3
CPU_SECONDS = 120  # a backstop: the judge's per-call wall-clock limit normally comes first
FILE_SIZE_BYTES = 64 * 1024**2  # Python ignores SIGXFSZ, so a larger write raises OSError
# Open files: torch needs a few dozen; each pipe or socket can hold buffered memory no limit counts.
OPEN_FILES = 256
PROCESSES = 4096  # where seccomp is missing (macOS); Linux refuses new processes outright
UNPRIVILEGED_UID = 65534  # "nobody": what a worker becomes when the grader runs as root
# Each lane of a batch its own uid below "nobody", so that no per-uid limit (RLIMIT_NPROC counts every thread of
# a uid) one lane's workers use up touches another's: 65000-65533 are reserved, never given to an account.
LANE_UIDS = range(UNPRIVILEGED_UID, 65000 - 1, -1)
CAP_KILL, CAP_SETGID, CAP_SETUID = 5, 6, 7

FORBIDDEN_PACKAGES = ("solutions", "grader", "tests")

_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 1, 4, 38
_PR_SET_CHILD_SUBREAPER = 36
_CAPABILITY_VERSION_3 = 0x20080522
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def prctl(option: int, *args: int) -> int:
    padded = [ctypes.c_ulong(a) for a in (*args, 0, 0, 0, 0)[:4]]  # unsigned long: a pointer must not be cut to int
    return _libc.prctl(ctypes.c_int(option), *padded)


def die_with_parent(parent: int | None = None, signal_number: int = signal.SIGKILL) -> None:
    """Have the kernel send ``signal_number`` to this process when its parent ends (Linux); elsewhere
    the parent's kill does.

    ``parent``: the pid the caller expects as parent; if it is already gone, the signal comes now (so a
    handler of it still runs).
    """
    if sys.platform == "linux":
        prctl(_PR_SET_PDEATHSIG, signal_number)
    if parent is not None and os.getppid() != parent:
        os.kill(os.getpid(), signal_number)
        os._exit(1)  # the signal was handled, or ignored: this process ends all the same


def become_reaper() -> None:
    """Orphaned descendants come to this process, which can then wait until every one is gone."""
    if sys.platform == "linux":
        prctl(_PR_SET_CHILD_SUBREAPER, 1)


def make_undumpable() -> None:
    """No ptrace, /proc/PID/mem, /proc/PID/fd or pidfd_getfd from a process without CAP_SYS_PTRACE."""
    if sys.platform == "linux":
        prctl(_PR_SET_DUMPABLE, 0)


def close_descriptors(keep: list[int]) -> None:
    """Close every inherited descriptor but ``keep``; 0, 1 and 2 become /dev/null."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        if fd not in keep:
            os.dup2(devnull, fd)
    low = 3
    for fd in sorted({*keep, devnull}):
        if fd >= low:
            os.closerange(low, fd)
            low = fd + 1
    os.closerange(low, 1 << 20)
    if devnull not in keep and devnull > 2:
        os.close(devnull)


def drop_privileges(uid: int | None = None, keep: tuple[int, ...] = ()) -> None:
    """Become ``uid`` (from root), then keep no capability but those in ``keep`` (CAP_* above), and
    no way to gain one (no_new_privs)."""
    if sys.platform != "linux":
        return
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    mask = sum(1 << cap for cap in keep)
    header = struct.pack("Ii", _CAPABILITY_VERSION_3, 0)
    data = struct.pack("6I", mask, mask, 0, 0, 0, 0)  # effective, permitted, inheritable; two 32-bit words
    if _libc.capset(ctypes.c_char_p(header), ctypes.c_char_p(data)) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def volunteer_for_oom() -> None:
    """Be the first process the kernel kills when memory runs out (its lane's cgroup, or the machine): a
    worker, not the zygote or a student's first process, pays for what learner code allocated. Before the
    uid changes and the process turns undumpable: after that, /proc/self is root's to write."""
    try:
        with open("/proc/self/oom_score_adj", "w") as adjust:
            adjust.write("1000")
    except OSError:  # not Linux, or /proc not mounted: the per-process limits still hold
        pass


def limit_resources(device: str) -> None:
    if device == "cpu":  # CUDA maps far more address space than it uses: no RLIMIT_AS there
        with open("/proc/self/statm") as statm:
            mapped = int(statm.read().split()[0]) * resource.getpagesize()
        _lower(resource.RLIMIT_AS, mapped + MEMORY_HEADROOM_BYTES)
    _lower(resource.RLIMIT_CPU, CPU_SECONDS)
    _lower(resource.RLIMIT_FSIZE, FILE_SIZE_BYTES)
    _lower(resource.RLIMIT_NPROC, PROCESSES)
    _lower(resource.RLIMIT_CORE, 0)
    _lower(resource.RLIMIT_NOFILE, OPEN_FILES)


def _lower(limit: int, value: int) -> None:
    soft, hard = resource.getrlimit(limit)
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(limit, (value, value))


# Landlock -----------------------------------------------------------------------------------
# Without bubblewrap the file system is the machine's own. Landlock (Linux 5.13+) lets a process
# give up every path but those it names, without privileges. Each ABI version handles more: all
# that the running kernel knows is handled, so nothing it could restrict is left open.

_LANDLOCK_CREATE_RULESET, _LANDLOCK_ADD_RULE, _LANDLOCK_RESTRICT_SELF = 444, 445, 446
_LANDLOCK_RULE_PATH_BENEATH = 1
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_TRUNCATE, _IOCTL_DEV = 1 << 14, 1 << 15
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV  # the rights a rule on a file may hold


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 where there is none."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "aarch64"):
        return 0
    return max(0, _libc.syscall(_LANDLOCK_CREATE_RULESET, None, 0, 1))


def restrict_files(readable: list[Path], writable: list[Path], devices: list[Path]) -> bool:
    """Give up every path but ``readable`` (read and execute), ``writable`` (anything) and ``devices``
    (read and write); TCP, abstract sockets and signals out of this process too where the kernel
    can. False where Landlock is missing. Paths that do not exist are skipped."""
    abi = landlock_abi()
    if abi < 1:
        return False
    handled = (
        (1 << 13) - 1 | (1 << 13 if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0) | (_IOCTL_DEV if abi >= 5 else 0)
    )
    attr = struct.pack("QQQ", handled, 0b11 if abi >= 4 else 0, 0b11 if abi >= 6 else 0)[
        : 8 if abi < 4 else 16 if abi < 6 else 24
    ]
    ruleset = _libc.syscall(_LANDLOCK_CREATE_RULESET, ctypes.c_char_p(attr), len(attr), 0)
    if ruleset < 0:
        return False
    rules = [(path, _EXECUTE | _READ_FILE | _READ_DIR) for path in readable]
    rules += [(path, handled) for path in writable] + [
        (path, _READ_FILE | _WRITE_FILE | _IOCTL_DEV) for path in devices
    ]
    try:
        for path, access in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            allowed = (access if os.path.isdir(path) else access & _FILE_RIGHTS) & handled
            rule = struct.pack("=Qi", allowed, fd)
            added = _libc.syscall(_LANDLOCK_ADD_RULE, ruleset, _LANDLOCK_RULE_PATH_BENEATH, ctypes.c_char_p(rule), 0)
            os.close(fd)
            if added != 0:
                return False
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        return _libc.syscall(_LANDLOCK_RESTRICT_SELF, ruleset, 0) == 0
    finally:
        os.close(ruleset)


def reachable(paths: list[str]) -> list[str]:
    """Those of ``paths`` this process can open for reading: a confined worker's answer to the isolation
    probe (grader.sandbox.zygote.Sandbox._prove_isolation), which must be none of the grader's own files."""
    opened = []
    for path in paths:
        try:
            os.close(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
        except OSError:
            continue
        opened.append(path)
    return opened


# imports ------------------------------------------------------------------------------------


class ForbiddenImport(ImportError):
    pass


class ImportGuard(MetaPathFinder):
    """Refuses the grader's packages to learner code, and remembers that it was asked."""

    def __init__(self):
        self.attempts: list[str] = []

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in FORBIDDEN_PACKAGES:
            self.attempts.append(fullname)
            raise ForbiddenImport(f"`import {fullname}` is not allowed while grading", name=fullname)
        return None


def forget_grader_modules() -> None:
    """Take the grader's packages out of sys.modules, so that importing them has to ask the guard.

    The zygote calls this once everything a worker needs is imported; workers keep their
    references to the modules they use.
    """
    prefixes = tuple(f"{package}." for package in FORBIDDEN_PACKAGES)
    for name in [n for n in sys.modules if n in FORBIDDEN_PACKAGES or n.startswith(prefixes)]:
        del sys.modules[name]


def guard_imports() -> ImportGuard:
    """Refuse the grader's packages from now on (they must be forgotten already: see above)."""
    guard = ImportGuard()
    sys.meta_path.insert(0, guard)
    return guard
