"""python -m tests.without_landlock COMMAND...: run COMMAND as on a kernel without Landlock.

A seccomp filter, inherited by everything COMMAND starts, answers Landlock's three system calls
with ENOSYS, which is what a kernel without Landlock (or a container whose seccomp profile leaves it
out) answers. It takes a protection away and adds none, so a test that uses it can only see the
grader weaker than it is.
"""

import ctypes
import os
import platform
import struct
import sys

LANDLOCK_SYSCALLS = (444, 445, 446)  # create_ruleset, add_rule, restrict_self: the same on x86_64 and aarch64
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_LD_W_ABS, _JEQ, _RET = 0x20, 0x15, 0x06
_ALLOW, _ERRNO, _ENOSYS = 0x7FFF0000, 0x00050000, 38


def supported() -> bool:
    return sys.platform == "linux" and platform.machine() in ("x86_64", "aarch64")


def deny_landlock() -> None:
    """Install the filter in this process (and so in everything it starts from now on)."""
    count = len(LANDLOCK_SYSCALLS)
    program = [(_LD_W_ABS, 0, 0, 0)]  # the system call's number
    program += [(_JEQ, count - index, 0, number) for index, number in enumerate(LANDLOCK_SYSCALLS)]
    program += [(_RET, 0, 0, _ALLOW), (_RET, 0, 0, _ERRNO | _ENOSYS)]
    filters = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *step) for step in program))
    fprog = ctypes.create_string_buffer(struct.pack("HxxxxxxP", len(program), ctypes.addressof(filters)))
    libc = ctypes.CDLL(None, use_errno=True)

    def prctl(option: int, *args: int) -> int:
        return libc.prctl(option, *(ctypes.c_ulong(a) for a in (*args, 0, 0, 0, 0)[:4]))

    if (
        prctl(_PR_SET_NO_NEW_PRIVS, 1) != 0
        or prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog)) != 0
    ):
        raise OSError(ctypes.get_errno(), "the seccomp filter could not be installed")


if __name__ == "__main__":
    deny_landlock()
    os.execvp(sys.argv[1], sys.argv[1:])
