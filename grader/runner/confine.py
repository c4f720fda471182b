"""What a process that runs learner code gives up before the first line of it runs.

A worker, in this order: every file descriptor but its channel to the judge; the uid it was
started with when it was root (it becomes an unprivileged one); every capability; the right to
be ptraced or have its memory read (non-dumpable); resources beyond fixed limits; on Linux
without bubblewrap, every file outside the Python installation, its stage files and its scratch
folder (Landlock); new processes, and every system call that reaches another process or the
kernel's global state (seccomp); and finally the grader's own packages (an import guard). They
apply with or without bubblewrap: the sandbox adds a private file system and no network.

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
CAP_KILL, CAP_SETGID, CAP_SETUID = 5, 6, 7

FORBIDDEN_PACKAGES = ("solutions", "grader", "tests")

_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP = 1, 4, 38, 22
_PR_SET_CHILD_SUBREAPER = 36
_SECCOMP_MODE_FILTER = 2
_CAPABILITY_VERSION_3 = 0x20080522
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def _prctl(option: int, *args: int) -> int:
    padded = [ctypes.c_ulong(a) for a in (*args, 0, 0, 0, 0)[:4]]  # unsigned long: a pointer must not be cut to int
    return _libc.prctl(ctypes.c_int(option), *padded)


def die_with_parent(parent: int | None = None, signal_number: int = signal.SIGKILL) -> None:
    """Have the kernel send ``signal_number`` to this process when its parent ends (Linux); elsewhere
    the parent's kill does.

    ``parent``: the pid the caller expects as parent; if it is already gone, the signal comes now (so a
    handler of it still runs).
    """
    if sys.platform == "linux":
        _prctl(_PR_SET_PDEATHSIG, signal_number)
    if parent is not None and os.getppid() != parent:
        os.kill(os.getpid(), signal_number)
        os._exit(1)  # the signal was handled, or ignored: this process ends all the same


def become_reaper() -> None:
    """Orphaned descendants come to this process, which can then wait until every one is gone."""
    if sys.platform == "linux":
        _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def make_undumpable() -> None:
    """No ptrace, /proc/PID/mem, /proc/PID/fd or pidfd_getfd from a process without CAP_SYS_PTRACE."""
    if sys.platform == "linux":
        _prctl(_PR_SET_DUMPABLE, 0)


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
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)


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
    handled = (1 << 13) - 1 | (1 << 13 if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0) \
        | (_IOCTL_DEV if abi >= 5 else 0)
    attr = struct.pack("QQQ", handled, 0b11 if abi >= 4 else 0, 0b11 if abi >= 6 else 0)[:8 if abi < 4 else 16 if abi < 6 else 24]
    ruleset = _libc.syscall(_LANDLOCK_CREATE_RULESET, ctypes.c_char_p(attr), len(attr), 0)
    if ruleset < 0:
        return False
    rules = [(path, _EXECUTE | _READ_FILE | _READ_DIR) for path in readable]
    rules += [(path, handled) for path in writable] + [(path, _READ_FILE | _WRITE_FILE | _IOCTL_DEV) for path in devices]
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
        _prctl(_PR_SET_NO_NEW_PRIVS, 1)
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


# seccomp ------------------------------------------------------------------------------------
# A classic BPF program over struct seccomp_data {int nr; u32 arch; u64 ip; u64 args[6];}.
# A deny-list: what learner code must never do is to make processes (threads stay allowed: torch
# needs them; root would ignore RLIMIT_NPROC), reach another process (signals, ptrace, pidfds,
# its memory, its scheduling), or change what the kernel shows every process (namespaces,
# mounts, modules, keys, BPF, io_uring, which runs system calls this filter would not see).

_DENIED = {  # refused outright
    "fork", "vfork", "ptrace", "tkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open",
    "pidfd_send_signal", "pidfd_getfd", "process_vm_readv", "process_vm_writev", "process_madvise",
    "process_mrelease", "kcmp", "migrate_pages", "move_pages", "unshare", "setns", "mount", "umount2",
    "pivot_root", "chroot", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    "bpf", "perf_event_open", "keyctl", "add_key", "request_key", "userfaultfd", "open_by_handle_at",
    "name_to_handle_at", "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "reboot", "swapon", "swapoff", "acct", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "quotactl",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "iopl", "ioperm",
    # Memory no process maps (so no RLIMIT_AS counts it), and CPUs of the caller's choosing: a
    # lane's workers keep the core the lane was given.
    "memfd_create", "sched_setaffinity",
}
# Asking the kernel to signal another process on I/O: fcntl F_SETOWN, F_SETSIG, F_SETOWN_EX, and
# ioctl FIOSETOWN, SIOCSPGRP, TIOCSPGRP.
_DENIED_COMMANDS = {"fcntl": (8, 10, 15), "ioctl": (0x8901, 0x8902, 0x5410)}
# Signals only to this process: kill(0, …) would reach the zygote's process group.
_OWN_PID_ONLY = {"kill", "tgkill"}
_SELF_ONLY = {"prlimit64", "sched_setscheduler", "sched_setparam", "sched_setattr"}  # 0 or own pid
_PROCESS_ONLY = {"setpriority", "ioprio_set"}  # allowed for "this process" (which=1/PRIO_PROCESS=0, who=0)

_SYSCALLS = {
    "x86_64": (0xC000003E, {
        "clone": 56, "fork": 57, "vfork": 58, "clone3": 435, "ptrace": 101, "kill": 62, "tkill": 200, "tgkill": 234,
        "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297, "pidfd_open": 434, "pidfd_send_signal": 424,
        "pidfd_getfd": 438, "process_vm_readv": 310, "process_vm_writev": 311, "process_madvise": 440,
        "process_mrelease": 448, "kcmp": 312, "migrate_pages": 256, "move_pages": 279, "unshare": 272, "setns": 308,
        "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "open_tree": 428, "move_mount": 429,
        "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "bpf": 321,
        "perf_event_open": 298, "keyctl": 250, "add_key": 248, "request_key": 249, "userfaultfd": 323,
        "open_by_handle_at": 304, "name_to_handle_at": 303, "init_module": 175, "finit_module": 313,
        "delete_module": 176, "kexec_load": 246, "kexec_file_load": 320, "reboot": 169, "swapon": 167,
        "swapoff": 168, "acct": 163, "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305,
        "adjtimex": 159, "quotactl": 179, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "iopl": 172, "ioperm": 173, "prlimit64": 302, "sched_setaffinity": 203, "sched_setscheduler": 144,
        "sched_setparam": 142, "sched_setattr": 314, "setpriority": 141, "ioprio_set": 251, "memfd_create": 319,
        "fcntl": 72, "ioctl": 16, "socket": 41,
    }),
    "aarch64": (0xC00000B7, {  # the generic table: no fork, vfork, iopl or ioperm
        "clone": 220, "clone3": 435, "ptrace": 117, "kill": 129, "tkill": 130, "tgkill": 131,
        "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240, "pidfd_open": 434, "pidfd_send_signal": 424,
        "pidfd_getfd": 438, "process_vm_readv": 270, "process_vm_writev": 271, "process_madvise": 440,
        "process_mrelease": 448, "kcmp": 272, "migrate_pages": 238, "move_pages": 239, "unshare": 97, "setns": 268,
        "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "open_tree": 428, "move_mount": 429,
        "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "bpf": 280,
        "perf_event_open": 241, "keyctl": 219, "add_key": 217, "request_key": 218, "userfaultfd": 282,
        "open_by_handle_at": 265, "name_to_handle_at": 264, "init_module": 105, "finit_module": 273,
        "delete_module": 106, "kexec_load": 104, "kexec_file_load": 294, "reboot": 142, "swapon": 224,
        "swapoff": 225, "acct": 89, "settimeofday": 170, "clock_settime": 112, "clock_adjtime": 266,
        "adjtimex": 171, "quotactl": 60, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "prlimit64": 261, "sched_setaffinity": 122, "sched_setscheduler": 119, "sched_setparam": 118,
        "sched_setattr": 274, "setpriority": 140, "ioprio_set": 30, "memfd_create": 279, "fcntl": 25,
        "ioctl": 29, "socket": 198,
    }),
}
_LD_W_ABS, _JEQ, _JSET, _JGE, _RET = 0x20, 0x15, 0x45, 0x35, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
_EPERM, _ENOSYS = 1, 38
_CLONE_THREAD = 0x00010000
_X32_BIT = 0x40000000
_ARG0, _ARG1 = 16, 24  # offsets of args[0] and args[1] (their low words on little-endian machines)


def forbid_new_processes(own_pid: int, sockets: bool = False) -> bool:
    """Install the filter above; False where seccomp is not available (not Linux, an unknown CPU).

    ``sockets``: whether new sockets are allowed (a GPU's driver may want one); a worker's one
    socket is made before it starts, and without bubblewrap a new one could reach the machine.
    """
    arch = _SYSCALLS.get(platform.machine())
    if sys.platform != "linux" or arch is None:
        return False
    audit_arch, numbers = arch
    Block = list[tuple[int, int, int, int]]

    def ret(value: int) -> Block:
        return [(_RET, 0, 0, value)]

    def on_arg(offset: int, values: tuple[int, ...], match: int, otherwise: int) -> Block:
        """Return ``match`` when the argument at ``offset`` is one of ``values``, else ``otherwise``."""
        jumps = [(_JEQ, len(values) - index, 0, value) for index, value in enumerate(values)]
        return [(_LD_W_ABS, 0, 0, offset), *jumps, *ret(otherwise), *ret(match)]

    def when(name: str, block: Block) -> Block:
        """``block`` for the syscall ``name``; every other syscall skips it, with A still its number
        (a block that matched has returned)."""
        return [(_JEQ, 0, len(block), numbers[name]), *block]

    def each(names, block_for) -> Block:
        return [step for name in sorted(names) for step in when(name, block_for(name))]

    refuse, allow = _ERRNO | _EPERM, _ALLOW
    denied = (_DENIED | (set() if sockets else {"socket"})) & numbers.keys()
    # Instructions run in order; jumps count forward from the next instruction.
    program = [
        (_LD_W_ABS, 0, 0, 4), (_JEQ, 1, 0, audit_arch), *ret(refuse),   # another ABI: refuse everything
        (_LD_W_ABS, 0, 0, 0), (_JGE, 0, 1, _X32_BIT), *ret(refuse),     # A = syscall number; x32: refuse
        *each(denied, lambda name: ret(refuse)),
        *each(_DENIED_COMMANDS, lambda name: on_arg(_ARG1, _DENIED_COMMANDS[name], refuse, allow)),
        *when("clone3", ret(_ERRNO | _ENOSYS)),                         # glibc falls back to clone
        *when("clone", [(_LD_W_ABS, 0, 0, _ARG0), (_JSET, 1, 0, _CLONE_THREAD), *ret(refuse), *ret(allow)]),
        *each(_OWN_PID_ONLY, lambda name: on_arg(_ARG0, (own_pid,), allow, refuse)),
        *each(_SELF_ONLY, lambda name: on_arg(_ARG0, (0, own_pid), allow, refuse)),
        # "This process": which is IOPRIO_WHO_PROCESS (1) or PRIO_PROCESS (0), and who is 0 or our pid.
        *each(_PROCESS_ONLY, lambda name: [(_LD_W_ABS, 0, 0, _ARG0), (_JEQ, 1, 0, 1 if name == "ioprio_set" else 0),
                                           *ret(refuse), *on_arg(_ARG1, (0, own_pid), allow, refuse)]),
        *ret(allow),
    ]

    filters = b"".join(struct.pack("HBBI", *instruction) for instruction in program)
    buffer = ctypes.create_string_buffer(filters)
    fprog = struct.pack("HxxxxxxP", len(program), ctypes.addressof(buffer))
    fprog_buffer = ctypes.create_string_buffer(fprog)
    return (_prctl(_PR_SET_NO_NEW_PRIVS, 1) == 0
            and _prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog_buffer)) == 0)


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
