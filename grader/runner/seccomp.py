"""seccomp: the system calls a worker gives up before any learner code runs.

A classic BPF program over struct seccomp_data {int nr; u32 arch; u64 ip; u64 args[6];}.
A deny-list: what learner code must never do is to make processes (threads stay allowed: torch
needs them; root would ignore RLIMIT_NPROC; but not where autograd is off, as a new thread would start
with it on: grader.runner.routes), reach another process (signals, ptrace, pidfds,
its memory, its scheduling), or change what the kernel shows every process (namespaces,
mounts, modules, keys, BPF, io_uring, which runs system calls this filter would not see), or
re-plumb its channel to the judge: the descriptor may not be closed, nor another put in its place
(close, close_range, dup2, dup3 onto its number), and without a GPU no socket or socket pair can be
made, so no other end exists to relay the judge's requests through.
"""

import ctypes
import platform
import struct
import sys

from grader.runner.confine import PR_SET_NO_NEW_PRIVS, prctl

_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2

_DENIED = {  # refused outright
    "fork",
    "vfork",
    "ptrace",
    "tkill",
    "rt_sigqueueinfo",
    "rt_tgsigqueueinfo",
    "pidfd_open",
    "pidfd_send_signal",
    "pidfd_getfd",
    "process_vm_readv",
    "process_vm_writev",
    "process_madvise",
    "process_mrelease",
    "kcmp",
    "migrate_pages",
    "move_pages",
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "bpf",
    "perf_event_open",
    "keyctl",
    "add_key",
    "request_key",
    "userfaultfd",
    "open_by_handle_at",
    "name_to_handle_at",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "quotactl",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "iopl",
    "ioperm",
    # Memory no process maps (so no RLIMIT_AS counts it: a System V segment keeps its pages after
    # it is detached, a message queue its messages), and CPUs of the caller's choosing: a lane's
    # workers keep the core the lane was given.
    "memfd_create",
    "shmget",
    "msgget",
    "sched_setaffinity",
}
# Asking the kernel to signal another process on I/O: fcntl F_SETOWN, F_SETSIG, F_SETOWN_EX, and
# ioctl FIOSETOWN, SIOCSPGRP, TIOCSPGRP.
_DENIED_COMMANDS = {"fcntl": (8, 10, 15), "ioctl": (0x8901, 0x8902, 0x5410)}
# Signals only to this process: kill(0, …) would reach the zygote's process group.
_OWN_PID_ONLY = {"kill", "tgkill"}
_SELF_ONLY = {"prlimit64", "sched_setscheduler", "sched_setparam", "sched_setattr"}  # 0 or own pid
_PROCESS_ONLY = {"setpriority", "ioprio_set"}  # allowed for "this process" (which=1/PRIO_PROCESS=0, who=0)

_SYSCALLS = {
    "x86_64": (
        0xC000003E,
        {
            "clone": 56,
            "fork": 57,
            "vfork": 58,
            "clone3": 435,
            "ptrace": 101,
            "kill": 62,
            "tkill": 200,
            "tgkill": 234,
            "rt_sigqueueinfo": 129,
            "rt_tgsigqueueinfo": 297,
            "pidfd_open": 434,
            "pidfd_send_signal": 424,
            "pidfd_getfd": 438,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "process_madvise": 440,
            "process_mrelease": 448,
            "kcmp": 312,
            "migrate_pages": 256,
            "move_pages": 279,
            "unshare": 272,
            "setns": 308,
            "mount": 165,
            "umount2": 166,
            "pivot_root": 155,
            "chroot": 161,
            "open_tree": 428,
            "move_mount": 429,
            "fsopen": 430,
            "fsconfig": 431,
            "fsmount": 432,
            "fspick": 433,
            "mount_setattr": 442,
            "bpf": 321,
            "perf_event_open": 298,
            "keyctl": 250,
            "add_key": 248,
            "request_key": 249,
            "userfaultfd": 323,
            "open_by_handle_at": 304,
            "name_to_handle_at": 303,
            "init_module": 175,
            "finit_module": 313,
            "delete_module": 176,
            "kexec_load": 246,
            "kexec_file_load": 320,
            "reboot": 169,
            "swapon": 167,
            "swapoff": 168,
            "acct": 163,
            "settimeofday": 164,
            "clock_settime": 227,
            "clock_adjtime": 305,
            "adjtimex": 159,
            "quotactl": 179,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "iopl": 172,
            "ioperm": 173,
            "prlimit64": 302,
            "sched_setaffinity": 203,
            "sched_setscheduler": 144,
            "sched_setparam": 142,
            "sched_setattr": 314,
            "setpriority": 141,
            "ioprio_set": 251,
            "memfd_create": 319,
            "shmget": 29,
            "msgget": 68,
            "fcntl": 72,
            "ioctl": 16,
            "socket": 41,
            "socketpair": 53,
            "close": 3,
            "close_range": 436,
            "dup2": 33,
            "dup3": 292,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {  # the generic table: no fork, vfork, iopl or ioperm
            "clone": 220,
            "clone3": 435,
            "ptrace": 117,
            "kill": 129,
            "tkill": 130,
            "tgkill": 131,
            "rt_sigqueueinfo": 138,
            "rt_tgsigqueueinfo": 240,
            "pidfd_open": 434,
            "pidfd_send_signal": 424,
            "pidfd_getfd": 438,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "process_madvise": 440,
            "process_mrelease": 448,
            "kcmp": 272,
            "migrate_pages": 238,
            "move_pages": 239,
            "unshare": 97,
            "setns": 268,
            "mount": 40,
            "umount2": 39,
            "pivot_root": 41,
            "chroot": 51,
            "open_tree": 428,
            "move_mount": 429,
            "fsopen": 430,
            "fsconfig": 431,
            "fsmount": 432,
            "fspick": 433,
            "mount_setattr": 442,
            "bpf": 280,
            "perf_event_open": 241,
            "keyctl": 219,
            "add_key": 217,
            "request_key": 218,
            "userfaultfd": 282,
            "open_by_handle_at": 265,
            "name_to_handle_at": 264,
            "init_module": 105,
            "finit_module": 273,
            "delete_module": 106,
            "kexec_load": 104,
            "kexec_file_load": 294,
            "reboot": 142,
            "swapon": 224,
            "swapoff": 225,
            "acct": 89,
            "settimeofday": 170,
            "clock_settime": 112,
            "clock_adjtime": 266,
            "adjtimex": 171,
            "quotactl": 60,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "prlimit64": 261,
            "sched_setaffinity": 122,
            "sched_setscheduler": 119,
            "sched_setparam": 118,
            "sched_setattr": 274,
            "setpriority": 140,
            "ioprio_set": 30,
            "memfd_create": 279,
            "shmget": 194,
            "msgget": 186,
            "fcntl": 25,
            "ioctl": 29,
            "socket": 198,
            "socketpair": 199,
            "close": 57,
            "close_range": 436,
            "dup3": 24,
        },
    ),
}
_LD_W_ABS, _JEQ, _JSET, _JGE, _JGT, _RET = 0x20, 0x15, 0x45, 0x35, 0x25, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
_EPERM, _EAGAIN, _ENOSYS = 1, 11, 38
_CLONE_THREAD = 0x00010000
_X32_BIT = 0x40000000
_ARG0, _ARG1 = 16, 24  # offsets of args[0] and args[1] (their low words on little-endian machines)


def forbid_new_processes(own_pid: int, channel: int, sockets: bool = False, threads: bool = True) -> bool:
    """Install the filter above; False where seccomp is not available (not Linux, an unknown CPU).

    ``channel``: the descriptor of the socket to the judge, which stays what it is; ``sockets``: whether
    new sockets and socket pairs are allowed (a GPU's driver may want one); a worker's one socket is made
    before it starts, and without bubblewrap a new one could reach the machine; ``threads``: whether new
    threads are allowed (the worker's own are running already; torch computes in its caller's thread).
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
    thread = allow if threads else _ERRNO | _EAGAIN  # pthread_create's "no more threads": RuntimeError in Python
    denied = (_DENIED | (set() if sockets else {"socket", "socketpair"})) & numbers.keys()
    channel_kept = [
        *when("close", on_arg(_ARG0, (channel,), refuse, allow)),
        *each({"dup2", "dup3"} & numbers.keys(), lambda name: on_arg(_ARG1, (channel,), refuse, allow)),
        # close_range(first, last, flags) refuses when first <= channel <= last
        *when(
            "close_range",
            [
                (_LD_W_ABS, 0, 0, _ARG0),
                (_JGT, 3, 0, channel),
                (_LD_W_ABS, 0, 0, _ARG1),
                (_JGE, 0, 1, channel),
                *ret(refuse),
                *ret(allow),
            ],
        ),
    ]
    # Instructions run in order; jumps count forward from the next instruction.
    program = [
        (_LD_W_ABS, 0, 0, 4),
        (_JEQ, 1, 0, audit_arch),
        *ret(refuse),  # another ABI: refuse everything
        (_LD_W_ABS, 0, 0, 0),
        (_JGE, 0, 1, _X32_BIT),
        *ret(refuse),  # A = syscall number; x32: refuse
        *each(denied, lambda name: ret(refuse)),
        *channel_kept,
        *each(_DENIED_COMMANDS, lambda name: on_arg(_ARG1, _DENIED_COMMANDS[name], refuse, allow)),
        *when("clone3", ret(_ERRNO | _ENOSYS)),  # glibc falls back to clone
        *when("clone", [(_LD_W_ABS, 0, 0, _ARG0), (_JSET, 1, 0, _CLONE_THREAD), *ret(refuse), *ret(thread)]),
        *each(_OWN_PID_ONLY, lambda name: on_arg(_ARG0, (own_pid,), allow, refuse)),
        *each(_SELF_ONLY, lambda name: on_arg(_ARG0, (0, own_pid), allow, refuse)),
        # "This process": which is IOPRIO_WHO_PROCESS (1) or PRIO_PROCESS (0), and who is 0 or our pid.
        *each(
            _PROCESS_ONLY,
            lambda name: [
                (_LD_W_ABS, 0, 0, _ARG0),
                (_JEQ, 1, 0, 1 if name == "ioprio_set" else 0),
                *ret(refuse),
                *on_arg(_ARG1, (0, own_pid), allow, refuse),
            ],
        ),
        *ret(allow),
    ]

    filters = b"".join(struct.pack("HBBI", *instruction) for instruction in program)
    buffer = ctypes.create_string_buffer(filters)
    fprog = struct.pack("HxxxxxxP", len(program), ctypes.addressof(buffer))
    fprog_buffer = ctypes.create_string_buffer(fprog)
    return (
        prctl(PR_SET_NO_NEW_PRIVS, 1) == 0
        and prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog_buffer)) == 0
    )
