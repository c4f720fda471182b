"""The entries of a submission, listed before any is read: the files under a folder (never through a link,
bounded in number and depth) and the members of a zip (read through a meter, since a zip's records may lie).
Whatever goes wrong is a SubmissionError with a one-line reason."""

import copy
import os
import stat
import zipfile
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

MAX_ENTRIES = 10_000  # files and folders, listed before any is read
MAX_DEPTH = 64  # folders within folders
# What may be read of a .zip, whatever its records claim: first its table of contents (which
# Python parses whole, so its size bounds the listing), then the members that are read.
MAX_ZIP_DIRECTORY_BYTES = 2 * 1024 * 1024
MAX_ZIP_MEMBER_BYTES = 16 * 1024 * 1024
ENCRYPTED = 0x1  # bit 0 of a zip member's general purpose flags (APPNOTE 4.4.4)
# zipfile unpacks these in pieces no larger than asked for; bzip2 and LZMA chunks unpack whole
UNPACKED_METHODS = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED}


class SubmissionError(Exception):
    """The grader cannot read this submission at all (as opposed to a wrong or missing stage)."""


@dataclass
class Entry:
    name: str  # relative, with / separators
    size: int = 0  # as listed (a zip member's is what it declares)
    read: Callable[[int], bytes] | None = None  # at most the given limit + 1 bytes; None: never read
    not_read: str | None = None  # why not, whatever its name
    path: str | None = None  # a file on disk (not a zip member): a .zip can be opened from it
    own_failure: bool = False  # failing to read it costs only this entry (it is in a zip found inside)


def size_text(limit: int) -> str:
    return f"{limit // 1024**2} MiB" if limit >= 1024**2 and limit % 1024**2 == 0 else f"{limit // 1024} KiB"


def folder_entries(source: Path, prefix: str = "") -> list[Entry]:
    """Every file under ``source``, listed folder by folder with a stack rather than recursion (the
    submission chooses the depth), never through a link, and no more than MAX_ENTRIES of them."""
    entries: list[Entry] = []
    listed = 0
    pending = [(str(source), prefix, 0)]  # folders to list: path, name prefix, depth
    while pending:
        folder, prefix, depth = pending.pop()
        try:
            with os.scandir(folder) as listing:
                for item in listing:
                    listed += 1
                    if listed > MAX_ENTRIES:
                        raise SubmissionError(f"too many files (over {MAX_ENTRIES})")
                    name = prefix + item.name
                    if item.is_dir(follow_symlinks=False):
                        if depth == MAX_DEPTH:
                            raise SubmissionError(f"nested deeper than {MAX_DEPTH} folders")
                        pending.append((item.path, f"{name}/", depth + 1))
                    else:
                        entries.append(file_entry(name, item.path, item.stat(follow_symlinks=False)))
        except OSError as error:
            raise SubmissionError(f"{prefix or './'} cannot be listed ({error.strerror or error})") from None
    return entries


def file_entry(name: str, path: str, status: os.stat_result) -> Entry:
    if stat.S_ISLNK(status.st_mode):  # never followed: it could point at another student's work
        return Entry(name, not_read="a symbolic link")
    if not stat.S_ISREG(status.st_mode):  # a FIFO or device would block or never end
        return Entry(name, not_read="not a regular file")
    if status.st_nlink > 1:  # its other name may be in another student's folder: whose work it is, no one can say
        return Entry(name, not_read="a hard link")
    return Entry(name, status.st_size, lambda limit: read_file(path, limit), path=path)


def open_file(path: str) -> BinaryIO:
    # O_NOFOLLOW and O_NONBLOCK: a file swapped for a link or a FIFO since it was listed is not followed or waited on
    return os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb")


def read_file(path: str, limit: int) -> bytes:
    with open_file(path) as handle:
        return handle.read(limit + 1)


def zip_entries(handle: BinaryIO, prefix: str, opened: ExitStack, own_failure: bool = False) -> list[Entry]:
    """The members of the zip open as ``handle``, named under ``prefix``; it stays open in ``opened``."""
    metered = MeteredFile(
        handle,
        MAX_ZIP_DIRECTORY_BYTES,
        f"too many files (the zip's table of contents is over {size_text(MAX_ZIP_DIRECTORY_BYTES)})",
    )
    archive = opened.enter_context(zipfile.ZipFile(metered))
    members = archive.infolist()
    if len(members) > MAX_ENTRIES:
        raise SubmissionError(f"too many files (over {MAX_ENTRIES})")
    metered.allow(
        MAX_ZIP_MEMBER_BYTES, f"the files read from the zip take over {size_text(MAX_ZIP_MEMBER_BYTES)} to unpack"
    )
    return [
        Entry(prefix + name, member.file_size, _member_reader(archive, member), own_failure=own_failure)
        for member in members
        if not (name := member_name(member)).endswith("/")
    ]


def _member_reader(archive: zipfile.ZipFile, member: zipfile.ZipInfo) -> Callable[[int], bytes]:
    return lambda limit: read_member(archive, member, limit)


def member_name(member: zipfile.ZipInfo) -> str:
    """``member``'s name with / between folders. Windows PowerShell 5's Compress-Archive writes \\
    (``attention\\stage1_softmax.py``), as the zip format forbids (APPNOTE 4.4.17) and every Windows tool
    reads it: as a folder. The name is only ever a name (intake reads into memory, never to a path it
    builds), so ``..`` in it reaches nothing; litter folders and depth are judged on the / form."""
    return member.filename.replace("\\", "/")


def read_member(archive: zipfile.ZipFile, member: zipfile.ZipInfo, limit: int) -> bytes:
    """``member`` unpacked, stopped by the bytes that come out rather than by the size it declares."""
    if member.flag_bits & ENCRYPTED:
        raise SubmissionError(f"encrypted zip ({member.filename})")
    if member.compress_type not in UNPACKED_METHODS:
        raise SubmissionError(
            f"{member.filename} is compressed with a method the grader does not unpack "
            f"(method {member.compress_type}; zip it with deflate, any zip tool's default)"
        )
    bounded = copy.copy(member)
    bounded.file_size = limit + 1  # zipfile stops at file_size: let it run past the declared one
    with archive.open(bounded) as unpacked:
        data = unpacked.read(member.file_size)
        if unpacked.read(1):
            raise SubmissionError(f"{member.filename} unpacks to more than the {member.file_size} bytes it declares")
    return data


class MeteredFile:
    """A .zip file opened for zipfile, refusing to read past a budget: sizes in its records may lie,
    the bytes actually read are what is counted."""

    def __init__(self, handle, budget: int, refusal: str):
        self._handle = handle
        self._size = os.fstat(handle.fileno()).st_size
        self.allow(budget, refusal)

    def allow(self, budget: int, refusal: str) -> None:
        """From now on, read at most ``budget`` bytes; past that, SubmissionError(``refusal``)."""
        self._budget, self._refusal = budget, refusal

    def read(self, size: int = -1) -> bytes:
        left_in_file = max(0, self._size - self._handle.tell())
        size = left_in_file if size is None or size < 0 else min(size, left_in_file)
        if size > self._budget:
            raise SubmissionError(self._refusal)
        self._budget -= size
        return self._handle.read(size)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return self._handle.seek(offset, whence)

    def tell(self) -> int:
        return self._handle.tell()

    def seekable(self) -> bool:
        return True
