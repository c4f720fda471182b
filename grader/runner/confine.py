"""Limits a worker puts on itself before it imports learner code.

Resource limits (memory, CPU seconds, file size, core dumps), a seccomp filter that refuses new
processes and signals to other processes, and an import guard that keeps the grader's own
packages out of reach. They apply with or without bubblewrap: the sandbox adds a private view of
the file system and no network on top.
"""

import ctypes
import platform
import resource
import signal
import struct
import sys
from importlib.abc import MetaPathFinder

# Room for learner tensors above what torch itself maps: a tens-of-GB allocation fails fast.
MEMORY_HEADROOM_BYTES = 3 * 1024**3
CPU_SECONDS = 120  # a backstop: the judge's per-call wall-clock limit normally comes first
FILE_SIZE_BYTES = 64 * 1024**2  # Python ignores SIGXFSZ, so a larger write raises OSError
PROCESSES = 4096  # where seccomp is missing (macOS); Linux refuses new processes outright

FORBIDDEN_PACKAGES = ("solutions", "grader", "tests")


def die_with_parent() -> None:
    """Have the kernel end this process when its parent ends (Linux); elsewhere the parent's kill does."""
    if sys.platform == "linux":
        PR_SET_PDEATHSIG = 1
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def limit_resources(device: str) -> None:
    if device == "cpu":  # CUDA maps far more address space than it uses: no RLIMIT_AS there
        with open("/proc/self/statm") as statm:
            mapped = int(statm.read().split()[0]) * resource.getpagesize()
        _lower(resource.RLIMIT_AS, mapped + MEMORY_HEADROOM_BYTES)
    _lower(resource.RLIMIT_CPU, CPU_SECONDS)
    _lower(resource.RLIMIT_FSIZE, FILE_SIZE_BYTES)
    _lower(resource.RLIMIT_NPROC, PROCESSES)
    _lower(resource.RLIMIT_CORE, 0)


def _lower(limit: int, value: int) -> None:
    soft, hard = resource.getrlimit(limit)
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(limit, (value, value))


# seccomp ------------------------------------------------------------------------------------
# A classic BPF program over struct seccomp_data {int nr; u32 arch; u64 ip; u64 args[6];}.
# Threads (clone with CLONE_THREAD) stay allowed: torch needs them. Root ignores RLIMIT_NPROC,
# so this filter is what stops a fork bomb on Linux.

_ARCHES = {  # AUDIT_ARCH_*, and the syscall numbers that matter on it
    "x86_64": (0xC000003E, {"clone": 56, "fork": 57, "vfork": 58, "kill": 62, "tkill": 200, "tgkill": 234,
                            "ptrace": 101, "clone3": 435, "process_vm_writev": 311, "pidfd_send_signal": 424}),
    "aarch64": (0xC00000B7, {"clone": 220, "kill": 129, "tkill": 130, "tgkill": 131, "ptrace": 117,
                             "clone3": 435, "process_vm_writev": 271, "pidfd_send_signal": 424}),
}
_LD_W_ABS, _JEQ, _JSET, _JGE, _RET = 0x20, 0x15, 0x45, 0x35, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
_EPERM, _ENOSYS = 1, 38
_CLONE_THREAD = 0x00010000
_X32_BIT = 0x40000000


def forbid_new_processes(own_pid: int) -> bool:
    """Refuse fork/vfork/clone (but threads), ptrace, and signals to any process but our own.

    False where seccomp is not available (not Linux, an unknown CPU): the rlimits still apply.
    """
    arch = _ARCHES.get(platform.machine())
    if sys.platform != "linux" or arch is None:
        return False
    audit_arch, nr = arch
    program: list[tuple[int, int, int, int]] = []

    def ret(value: int):
        program.append((_RET, 0, 0, value))

    # Instructions are appended in order; jumps count forward from the next instruction.
    program.append((_LD_W_ABS, 0, 0, 4))                        # A = arch
    program.append((_JEQ, 1, 0, audit_arch))                    # our ABI: go on
    ret(_ERRNO | _EPERM)                                        # any other ABI: refuse everything
    program.append((_LD_W_ABS, 0, 0, 0))                        # A = syscall number
    program.append((_JGE, 0, 1, _X32_BIT))                      # the x32 ABI on x86_64: refuse
    ret(_ERRNO | _EPERM)
    for name in ("fork", "vfork", "ptrace", "process_vm_writev", "pidfd_send_signal", "tkill"):
        if name in nr:
            program.append((_JEQ, 0, 1, nr[name]))
            ret(_ERRNO | _EPERM)
    program.append((_JEQ, 0, 1, nr["clone3"]))                  # glibc falls back to clone
    ret(_ERRNO | _ENOSYS)
    program.append((_JEQ, 0, 4, nr["clone"]))
    program.append((_LD_W_ABS, 0, 0, 16))                       # A = flags (args[0], low word)
    program.append((_JSET, 1, 0, _CLONE_THREAD))
    ret(_ERRNO | _EPERM)
    ret(_ALLOW)
    for name in ("kill", "tgkill"):                            # only to ourselves
        program.append((_JEQ, 0, 4, nr[name]))
        program.append((_LD_W_ABS, 0, 0, 16))                   # A = pid (args[0], low word)
        program.append((_JEQ, 1, 0, own_pid))
        ret(_ERRNO | _EPERM)
        ret(_ALLOW)
    ret(_ALLOW)

    filters = b"".join(struct.pack("HBBI", *instruction) for instruction in program)
    buffer = ctypes.create_string_buffer(filters)
    fprog = struct.pack("HxxxxxxP", len(program), ctypes.addressof(buffer))
    fprog_buffer = ctypes.create_string_buffer(fprog)
    PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
    return (_prctl(PR_SET_NO_NEW_PRIVS, 1) == 0
            and _prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog_buffer)) == 0)


def _prctl(option: int, *args: int) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    padded = [ctypes.c_ulong(a) for a in (*args, 0, 0, 0, 0)[:4]]  # unsigned long: a pointer must not be cut to int
    return libc.prctl(ctypes.c_int(option), *padded)


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
