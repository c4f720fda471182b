"""Take a submission (a folder or a .zip) and read its five stage files, and nothing else, into the judge.

A submission is untrusted input. Staging ends with the stage files in memory, or with
SubmissionError and a one-line reason, whatever the submission holds: an encrypted or damaged
zip, a member that unpacks to more than it declares, folders nested thousands deep, more files
than anyone submits, a symbolic link loop. Links are never followed, a file with a second hard
link is not read, and what is listed and read is bounded, so the worst submission costs milliseconds.
"""

import copy
import errno
import os
import stat
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from grader.runner.implementation import STAGE_MODULES
from grader.runner.text import printable

STAGE_FILES = {f"{name}.py" for name in STAGE_MODULES.values()}
MAX_STAGE_FILE_BYTES = 1024 * 1024
MAX_ENTRIES = 10_000  # files and folders, listed before any is read
MAX_DEPTH = 64  # folders within folders
# What may be read of a .zip, whatever its records claim: first its table of contents (which
# Python parses whole, so its size bounds the listing), then the members that are stage files.
MAX_ZIP_DIRECTORY_BYTES = 2 * 1024 * 1024
MAX_ZIP_MEMBER_BYTES = 16 * 1024 * 1024
ENCRYPTED = 0x1  # bit 0 of a zip member's general purpose flags (APPNOTE 4.4.4)
# zipfile unpacks these in pieces no larger than asked for; bzip2 and LZMA chunks unpack whole
UNPACKED_METHODS = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED}


class SubmissionError(Exception):
    """The grader cannot read this submission at all (as opposed to a wrong or missing stage)."""


@dataclass
class StagedSubmission:
    files: dict[str, bytes] = field(default_factory=dict)  # stage file name -> its bytes, held by the judge
    ignored: list[str] = field(default_factory=list)
    problem: str | None = None  # why nothing could be read, when the batch grades it as empty


@dataclass
class _Entry:
    name: str  # relative, with / separators
    size: int = 0  # as listed (a zip member's is what it declares)
    read: Callable[[], bytes] | None = None  # at most MAX_STAGE_FILE_BYTES + 1 bytes; None: never read
    not_read: str | None = None  # why not, whatever its name


def stage_submission(source: Path) -> StagedSubmission:
    """Read the stage files of ``source`` into memory; list what was left out.

    Stage files may sit at the top or in sub-folders (the shallowest copy of each wins). Any
    failure to read ``source`` is a SubmissionError whose message is one printable line.
    """
    staged = StagedSubmission()
    ignored: list[str] = []
    try:
        files = _read_stage_files(Path(source), ignored)
    except Exception as error:  # parsing untrusted bytes can fail in more ways than any list names
        raise SubmissionError(printable(_reason(error), keep_newlines=False)) from None
    staged.ignored = [printable(name, keep_newlines=False) for name in ignored]
    staged.files = dict(sorted(files.items()))
    return staged


def _reason(error: Exception) -> str:
    if isinstance(error, SubmissionError):
        return str(error)
    if isinstance(error, (zipfile.BadZipFile, EOFError, zlib.error)):
        return f"truncated or damaged zip ({error})" if str(error) else "truncated or damaged zip"
    if isinstance(error, UnicodeDecodeError):
        return "a file name in the zip is not valid UTF-8 text"
    if isinstance(error, NotImplementedError):  # zipfile, on a zip feature it does not support
        return f"the zip uses a feature the grader cannot read ({error})"
    if isinstance(error, OSError):
        return f"cannot be read ({error.strerror or error})"
    return f"cannot be read ({type(error).__name__}: {error})"


def _read_stage_files(source: Path, ignored: list[str]) -> dict[str, bytes]:
    """The stage files of ``source`` by name; every other entry's name goes to ``ignored``."""
    try:
        mode = os.stat(source).st_mode
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise SubmissionError(f"{source} is a symbolic link loop") from None
        if error.errno == errno.ENOENT:
            raise SubmissionError(f"{source} does not exist") from None
        raise
    if stat.S_ISDIR(mode):
        return _take(_folder_entries(source), ignored)
    if stat.S_ISREG(mode) and (source.suffix.lower() == ".zip" or zipfile.is_zipfile(source)):
        return _zip_stage_files(source, ignored)
    raise SubmissionError(f"{source} is neither a folder nor a .zip file")


def _take(entries: list[_Entry], ignored: list[str]) -> dict[str, bytes]:
    chosen: dict[str, _Entry] = {}
    for entry in sorted(entries, key=lambda e: (e.name.count("/"), e.name)):
        base = PurePosixPath(entry.name).name
        if entry.not_read:
            ignored.append(f"{entry.name} ({entry.not_read})")
        elif base in STAGE_FILES and base not in chosen and "__MACOSX" not in entry.name:
            chosen[base] = entry
        elif "__pycache__" not in entry.name and base != "__init__.py":  # package scaffolding is expected
            ignored.append(entry.name)
    files = {}
    for base, entry in chosen.items():
        if entry.size <= MAX_STAGE_FILE_BYTES:  # a file listed as larger is not read at all
            try:
                data = entry.read()
            except OSError as error:
                raise SubmissionError(f"{entry.name} cannot be read ({error.strerror or error})") from None
            if len(data) <= MAX_STAGE_FILE_BYTES:
                files[base] = data
                continue
        ignored.append(f"{entry.name} (over {MAX_STAGE_FILE_BYTES // 1024} KiB)")
    return files


# Folders ------------------------------------------------------------------------------------


def _folder_entries(source: Path) -> list[_Entry]:
    """Every file under ``source``, listed folder by folder with a stack rather than recursion (the
    submission chooses the depth), never through a link, and no more than MAX_ENTRIES of them."""
    entries: list[_Entry] = []
    listed = 0
    pending = [(str(source), "", 0)]  # folders to list: path, name prefix, depth
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
                    elif item.is_symlink():  # never followed: it could point at another student's work
                        entries.append(_Entry(name, not_read="a symbolic link"))
                    elif not item.is_file(follow_symlinks=False):  # a FIFO or device would block or never end
                        entries.append(_Entry(name, not_read="not a regular file"))
                    elif (status := item.stat(follow_symlinks=False)).st_nlink > 1:
                        # its other name may be in another student's folder: whose work it is, no one can say
                        entries.append(_Entry(name, not_read="a hard link"))
                    else:
                        entries.append(_Entry(name, status.st_size, lambda path=item.path: _read_file(path)))
        except OSError as error:
            raise SubmissionError(f"{prefix or './'} cannot be listed ({error.strerror or error})") from None
    return entries


def _read_file(path: str) -> bytes:
    # O_NOFOLLOW and O_NONBLOCK: a file swapped for a link or a FIFO since it was listed is not followed or waited on
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(descriptor, "rb") as handle:
        return handle.read(MAX_STAGE_FILE_BYTES + 1)


# Zips ---------------------------------------------------------------------------------------


def _zip_stage_files(source: Path, ignored: list[str]) -> dict[str, bytes]:
    with open(source, "rb") as handle:
        metered = _MeteredFile(handle, MAX_ZIP_DIRECTORY_BYTES, "too many files (the zip's table of contents "
                                                                f"is over {MAX_ZIP_DIRECTORY_BYTES // 1024**2} MiB)")
        with zipfile.ZipFile(metered) as archive:
            members = archive.infolist()
            if len(members) > MAX_ENTRIES:
                raise SubmissionError(f"too many files (over {MAX_ENTRIES})")
            metered.allow(MAX_ZIP_MEMBER_BYTES, f"the stage files take over {MAX_ZIP_MEMBER_BYTES // 1024**2} MiB "
                                                "of the zip to unpack")
            return _take([_Entry(m.filename, m.file_size, lambda m=m: _read_member(archive, m))
                          for m in members if not m.is_dir()], ignored)


def _read_member(archive: zipfile.ZipFile, member: zipfile.ZipInfo) -> bytes:
    """``member`` unpacked, stopped by the bytes that come out rather than by the size it declares."""
    if member.flag_bits & ENCRYPTED:
        raise SubmissionError(f"encrypted zip ({member.filename})")
    if member.compress_type not in UNPACKED_METHODS:
        raise SubmissionError(f"{member.filename} is compressed with a method the grader does not unpack "
                              f"(method {member.compress_type}; zip it with deflate, any zip tool's default)")
    bounded = copy.copy(member)
    bounded.file_size = MAX_STAGE_FILE_BYTES + 1  # zipfile stops at file_size: let it run past the declared one
    with archive.open(bounded) as unpacked:
        data = unpacked.read(member.file_size)
        if unpacked.read(1):
            raise SubmissionError(f"{member.filename} unpacks to more than the {member.file_size} bytes it declares")
    return data


class _MeteredFile:
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
