"""Huge pages for a zygote that forks a whole class's workers.

Forking copies the page tables of the zygote's ~145 MB of memory and exiting tears down the
copy: about 10 ms of kernel time per worker, five workers per student. Memory in 2 MB pages has
512 times fewer entries to copy. Moving it costs a few tenths of a second, once per zygote: worth
it for a class, not for the five workers of a single submission.
"""

import ctypes
import sys

HUGE_PAGE_BYTES = 2 * 1024**2
MADV_COLLAPSE = 25  # Linux 6.1 and later; elsewhere madvise refuses it and nothing changes


def collapse_into_huge_pages() -> int:
    """Back this process's private writable memory with huge pages where the kernel can; the bytes moved."""
    if sys.platform != "linux":
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    with open("/proc/self/maps") as maps:
        regions = [line.split() for line in maps]
    collapsed = 0
    for fields in regions:
        start, end = (int(address, 16) for address in fields[0].split("-"))
        name = fields[5] if len(fields) > 5 else ""
        if not fields[1].startswith("rw") or name not in ("", "[heap]"):
            continue  # a file's pages stay in the page cache: fork copies no table for them
        start = -(-start // HUGE_PAGE_BYTES) * HUGE_PAGE_BYTES
        end = end // HUGE_PAGE_BYTES * HUGE_PAGE_BYTES
        if end > start and libc.madvise(start, end - start, MADV_COLLAPSE) == 0:
            collapsed += end - start
    return collapsed
