"""Take a submission (a folder or a .zip) and stage its five stage files, and nothing else."""

import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from grader.runner.implementation import STAGE_MODULES

STAGE_FILES = {f"{name}.py" for name in STAGE_MODULES.values()}
MAX_STAGE_FILE_BYTES = 1024 * 1024


class SubmissionError(Exception):
    """The grader cannot read this submission at all (as opposed to a wrong or missing stage)."""


@dataclass
class StagedSubmission:
    folder: Path
    found: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)


def stage_submission(source: Path, into: Path) -> StagedSubmission:
    """Copy the stage files of ``source`` into the empty folder ``into``; list what was left out.

    Stage files may sit at the top or in sub-folders (the shallowest copy of each wins).
    """
    source = Path(source)
    if source.is_dir():
        entries = {p.relative_to(source).as_posix(): p for p in source.rglob("*") if p.is_file()}
        read = lambda key: entries[key].read_bytes()  # noqa: E731
        names = list(entries)
    elif source.is_file() and zipfile.is_zipfile(source):
        archive = zipfile.ZipFile(source)
        members = {i.filename: i for i in archive.infolist() if not i.is_dir()}
        read = lambda key: archive.read(members[key])  # noqa: E731
        names = list(members)
    elif source.exists():
        raise SubmissionError(f"{source} is neither a folder nor a .zip file")
    else:
        raise SubmissionError(f"{source} does not exist")

    staged = StagedSubmission(Path(into))
    chosen: dict[str, str] = {}
    for name in sorted(names, key=lambda n: (n.count("/"), n)):
        base = PurePosixPath(name).name
        if base in STAGE_FILES and base not in chosen and "__MACOSX" not in name:
            chosen[base] = name
        elif "__pycache__" not in name and base != "__init__.py":  # package scaffolding is expected
            staged.ignored.append(name)
    for base, name in sorted(chosen.items()):
        data = read(name)
        if len(data) > MAX_STAGE_FILE_BYTES:
            staged.ignored.append(f"{name} (over {MAX_STAGE_FILE_BYTES // 1024} KiB)")
            continue
        (staged.folder / base).write_bytes(data)
        staged.found.append(base)
    return staged



