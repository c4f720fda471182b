"""Take a submission (a folder or a .zip) and read its five stage files, and nothing else, into the judge."""

import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from grader.runner.implementation import STAGE_MODULES

STAGE_FILES = {f"{name}.py" for name in STAGE_MODULES.values()}
MAX_STAGE_FILE_BYTES = 1024 * 1024


class SubmissionError(Exception):
    """The grader cannot read this submission at all (as opposed to a wrong or missing stage)."""


@dataclass
class StagedSubmission:
    files: dict[str, bytes] = field(default_factory=dict)  # stage file name -> its bytes, held by the judge
    found: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    problem: str | None = None  # why nothing could be read, when the batch grades it as empty


@dataclass
class _Entry:
    name: str  # relative, with / separators
    size: int
    link: bool
    read: Callable[[], bytes]


def stage_submission(source: Path) -> StagedSubmission:
    """Read the stage files of ``source`` into memory; list what was left out.

    Stage files may sit at the top or in sub-folders (the shallowest copy of each wins).
    """
    source = Path(source)
    if source.is_dir():
        entries = _folder_entries(source)
    elif source.is_file() and zipfile.is_zipfile(source):
        entries = _zip_entries(source)
    elif source.exists():
        raise SubmissionError(f"{source} is neither a folder nor a .zip file")
    else:
        raise SubmissionError(f"{source} does not exist")

    staged = StagedSubmission()
    chosen: dict[str, _Entry] = {}
    for entry in sorted(entries, key=lambda e: (e.name.count("/"), e.name)):
        base = PurePosixPath(entry.name).name
        if entry.link:  # never followed: it could point at another student's work
            staged.ignored.append(f"{entry.name} (a symbolic link)")
        elif base in STAGE_FILES and base not in chosen and "__MACOSX" not in entry.name:
            chosen[base] = entry
        elif "__pycache__" not in entry.name and base != "__init__.py":  # package scaffolding is expected
            staged.ignored.append(entry.name)
    for base, entry in sorted(chosen.items()):
        if entry.size > MAX_STAGE_FILE_BYTES:  # checked before reading: a zip entry may unpack to gigabytes
            staged.ignored.append(f"{entry.name} (over {MAX_STAGE_FILE_BYTES // 1024} KiB)")
            continue
        try:
            data = entry.read()
        except (zipfile.BadZipFile, OSError, EOFError) as error:
            raise SubmissionError(f"{source}: {entry.name} cannot be read ({error})") from None
        staged.files[base] = data
        staged.found.append(base)
    return staged


def _folder_entries(source: Path) -> list[_Entry]:
    return [_Entry(p.relative_to(source).as_posix(), p.lstat().st_size, p.is_symlink(), p.read_bytes)
            for p in source.rglob("*") if p.is_symlink() or p.is_file()]


def _zip_entries(source: Path) -> list[_Entry]:
    try:
        archive = zipfile.ZipFile(source)
        members = [i for i in archive.infolist() if not i.is_dir()]
    except (zipfile.BadZipFile, OSError) as error:
        raise SubmissionError(f"{source} is a damaged .zip file ({error})") from None
    return [_Entry(i.filename, i.file_size, False, lambda i=i: archive.read(i)) for i in members]
