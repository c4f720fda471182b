"""Take a submission and read its five stage files, and nothing else, into the judge.

A submission is a folder, a .zip, or the parts an LMS stored apart from one another (a Canvas
download keeps each student's files side by side with everyone else's, under longer names): a
tuple of SubmittedPart, each a file or folder under the name it has in the submission. Within
any of them a stage file is found:
  * as itself, at any depth; the shallowest copy of each wins (ties: by path);
  * in a .zip inside a folder (a Moodle folder holding the `make submit` zip, a Gradescope
    upload left zipped), opened only while a stage file is still missing; a zip in a zip is not;
  * in a notebook's ``%%writefile <stage file>`` cell (grader/intake/notebook_files.py), read only while
    a stage file is still missing; a .py file of that name at the notebook's depth or shallower wins.

A submission is untrusted input. Reading it ends with the stage files in memory, or with
SubmissionError and a one-line reason, whatever the submission holds: an encrypted or damaged
zip, a member that unpacks to more than it declares, folders nested thousands deep, more files
than anyone submits, a symbolic link loop. Links are never followed, a file with a second hard
link is not read, and what is listed and read is bounded: refusing the worst submission costs
milliseconds, and reading the zips and notebooks inside one, within their bounds (10,000 files
in all, four zips, 16 MiB of notebooks), well under a second. A zip or notebook found inside a
submission that cannot be read costs only itself: it is listed as ignored, with why.
"""

import errno
import hashlib
import heapq
import itertools
import json
import os
import re
import stat
import zipfile
import zlib
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from grader.core.stages import STAGE_MODULES
from grader.intake.entries import (
    MAX_ENTRIES,
    Entry,
    SubmissionError,
    file_entry,
    folder_entries,
    open_file,
    size_text,
    zip_entries,
)
from grader.intake.notebook_files import NotANotebook, written_files
from grader.runner.escaping import printable

STAGE_FILES = {f"{name}.py" for name in STAGE_MODULES.values()}
MAX_STAGE_FILE_BYTES = 1024 * 1024
MAX_INNER_ZIPS = 4  # zips opened inside one submission
MAX_NOTEBOOK_BYTES = 16 * 1024 * 1024  # notebooks read from one submission, in all
# Folders that tools leave beside the work, whose copies of it are not the work
LITTER_FOLDERS = ("__MACOSX", ".ipynb_checkpoints")
# Files an operating system leaves in any folder it has shown (thumbnails, view settings): never anyone's work
LITTER_FILES = (".DS_Store", "Thumbs.db", "ehthumbs.db", "desktop.ini")
_LITTER_NAMES = frozenset(litter.casefold() for litter in (*LITTER_FOLDERS, *LITTER_FILES))
LMS_RECORDS = {"timestamp.txt"}  # nbgrader's record of when the work came, beside it
# What is added to a file's name when a second copy is saved: " (1)", "-1", " copy", " copy 2"
COPY_MARK = re.compile(r"(\s*\(\d+\)|-\d+|\s+copy(\s+\d+)?)$", re.IGNORECASE)


@dataclass(frozen=True)
class SubmittedPart:
    """A file or folder of a submission that the LMS stored apart from the rest; ``name`` is what it
    is called in the submission (a folder's files are under ``name/``)."""

    name: str
    path: Path


Source = Path | tuple[SubmittedPart, ...]


@dataclass
class SubmissionFiles:
    files: dict[str, bytes] = field(default_factory=dict)  # stage file name -> its bytes, held by the judge
    ignored: list[str] = field(default_factory=list)
    renamed: list[str] = field(default_factory=list)  # "<name as found> as <stage file>", for each near name taken
    problem: str | None = None  # why nothing could be read, when the batch grades it as empty

    def digest(self) -> str:
        """sha256 of the files read in (names and bytes) and of what intake left out or could not read: what a
        report was graded from (grader.classroom.fingerprint) and what a hidden check's inputs are drawn from
        (grader.judge.drawn_inputs)."""
        digest = hashlib.sha256()
        for name, data in sorted(self.files.items()):
            feed(digest, name.encode(), data)
        left = {"ignored": self.ignored, "renamed": self.renamed, "problem": self.problem}
        feed(digest, json.dumps(left).encode())
        return f"sha256:{digest.hexdigest()}"


def feed(digest, *parts: bytes) -> None:
    """Each part with its length first: no two lists of parts feed the same bytes."""
    for part in parts:
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)


def read_submission(source: Source) -> SubmissionFiles:
    """Read the stage files of ``source`` (a folder, a .zip, or a tuple of SubmittedPart) into
    memory; list what was left out.

    Any failure to read ``source`` is a SubmissionError whose message is one printable line.
    """
    staged = SubmissionFiles()
    ignored: list[str] = []
    renamed: list[str] = []
    damaged: list[str] = []
    try:
        with ExitStack() as opened:  # the zips whose members are listed, open until they are read
            files = _take(_source_entries(source, opened), ignored, renamed, opened, damaged)
    except Exception as error:  # parsing untrusted bytes can fail in more ways than any list names
        raise SubmissionError(printable(_reason(error), keep_newlines=False)) from None
    if not files and damaged and damaged == ignored:  # all there was is zips that cannot be read, as a zip alone
        staged.problem = printable("; ".join(damaged), keep_newlines=False)
    staged.ignored = [printable(name, keep_newlines=False) for name in ignored]
    staged.renamed = [printable(name, keep_newlines=False) for name in renamed]
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


def _source_entries(source: Source, opened: ExitStack) -> list[Entry]:
    """The entries of ``source``, listed, none read yet."""
    if isinstance(source, tuple):
        entries = [entry for part in source for entry in _part_entries(part)]
        if len(entries) > MAX_ENTRIES:
            raise SubmissionError(f"too many files (over {MAX_ENTRIES})")
        return entries
    source = Path(source)
    try:
        mode = os.stat(source).st_mode
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise SubmissionError(f"{source} is a symbolic link loop") from None
        if error.errno == errno.ENOENT:
            raise SubmissionError(f"{source} does not exist") from None
        raise
    if stat.S_ISDIR(mode):
        return folder_entries(source)
    if stat.S_ISREG(mode) and (source.suffix.lower() == ".zip" or zipfile.is_zipfile(source)):
        return zip_entries(opened.enter_context(open(source, "rb")), "", opened)
    raise SubmissionError(f"{source} is neither a folder nor a .zip file")


def _part_entries(part: SubmittedPart) -> list[Entry]:
    try:
        status = os.lstat(part.path)
    except OSError as error:
        raise SubmissionError(f"{part.name} cannot be read ({error.strerror or error})") from None
    if stat.S_ISDIR(status.st_mode):
        return folder_entries(part.path, f"{part.name}/")
    return [file_entry(part.name, str(part.path), status)]


# Choosing the stage files ---------------------------------------------------------------------


def _order(entry: Entry) -> tuple[int, int, str]:
    """Shallowest first; at one depth, files before notebooks before zips (what they hold comes second)."""
    suffix = PurePosixPath(entry.name).suffix.lower()
    return entry.name.count("/"), {".ipynb": 1, ".zip": 2}.get(suffix, 0), entry.name


def _take(
    entries: list[Entry], ignored: list[str], renamed: list[str], opened: ExitStack, damaged: list[str]
) -> dict[str, bytes]:
    """The stage files among ``entries`` by name, each entry visited in _order (a zip's members
    join the queue when it is opened); every other entry's name goes to ``ignored``. A stage file
    found under no name of its own but under a near one (see stage_file_meant) is taken from the
    first such entry, and said in ``renamed``; a zip among them that cannot be opened goes to ``damaged`` too."""
    files: dict[str, bytes] = {}
    near: dict[str, Entry] = {}  # stage file -> the first entry named near it
    decided: set[str] = set()  # stage files taken, or whose shallowest copy could not be
    budget = {"zips": MAX_INNER_ZIPS, "notebook bytes": MAX_NOTEBOOK_BYTES, "entries": MAX_ENTRIES - len(entries)}
    arrival = itertools.count()  # ties (a zip may hold one name twice) go in listing order
    queue = [(_order(entry), next(arrival), entry) for entry in entries]
    heapq.heapify(queue)
    while queue:
        _, _, entry = heapq.heappop(queue)
        base = PurePosixPath(entry.name).name
        suffix = PurePosixPath(base).suffix.lower()
        if entry.not_read:
            ignored.append(f"{entry.name} ({entry.not_read})")
        elif "__pycache__" in entry.name or base == "__init__.py" or entry.name in LMS_RECORDS:
            continue  # package scaffolding, and what the LMS itself files beside the work, are expected
        elif any(litter in entry.name.split("/") for litter in LITTER_FOLDERS):
            ignored.append(entry.name)
        elif base in STAGE_FILES and base not in decided:
            decided.add(base)
            if (data := _read_bounded(entry, MAX_STAGE_FILE_BYTES, ignored)) is not None:
                files[base] = data
        elif (meant := stage_file_meant(base)) and meant not in decided and meant not in near:
            near[meant] = entry
        elif decided >= STAGE_FILES or suffix not in (".ipynb", ".zip"):
            ignored.append(entry.name)
        elif suffix == ".ipynb":
            _take_from_notebook(entry, files, decided, budget, ignored)
        elif entry.path is None:
            ignored.append(f"{entry.name} (a zip inside a zip, not opened)")
        elif budget["zips"] == 0:
            ignored.append(f"{entry.name} (not opened: only {MAX_INNER_ZIPS} zips of a submission are)")
        else:
            budget["zips"] -= 1
            try:
                members = zip_entries(
                    opened.enter_context(open_file(entry.path)), f"{entry.name}/", opened, own_failure=True
                )
            except Exception as error:  # a zip found inside costs only itself
                ignored.append(f"{entry.name} ({_reason(error)})")
                damaged.append(ignored[-1])
                continue
            if len(members) > budget["entries"]:  # what any one zip holds is bounded, and so is what they all do
                ignored.append(f"{entry.name} (not opened: over {MAX_ENTRIES} files in the submission)")
                continue
            budget["entries"] -= len(members)
            for member in members:
                heapq.heappush(queue, (_order(member), next(arrival), member))
    for meant, entry in near.items():
        if meant in decided:  # the file under its own name wins, wherever it was
            ignored.append(entry.name)
        elif (data := _read_bounded(entry, MAX_STAGE_FILE_BYTES, ignored)) is not None:
            files[meant] = data
            renamed.append(f"{entry.name} as {meant}")
    return files


def is_litter(name: str) -> bool:
    """Whether a file or folder named ``name`` is one a tool or an operating system left (LITTER_FOLDERS,
    LITTER_FILES), whatever the case of its letters (Windows and macOS ignore it)."""
    return name.casefold() in _LITTER_NAMES


def stage_file_meant(name: str) -> str | None:
    """The stage file a ``.py`` file named ``name`` stands for when it has not that name itself:
    the same letters in another case, with spaces or hyphens for underscores, or with the mark a
    browser, an operating system or an LMS adds to a second copy (``stage3_weight_transfer (1).py``,
    ``-1``, `` copy``). None for any other name."""
    stem, dot, suffix = name.rpartition(".")
    if not dot or suffix.lower() != "py":
        return None
    meant = re.sub(r"[\s-]+", "_", COPY_MARK.sub("", stem.strip()).strip()).lower() + ".py"
    return meant if meant in STAGE_FILES and meant != name else None


def _read_bounded(entry: Entry, limit: int, ignored: list[str], own_failure: bool = False) -> bytes | None:
    """``entry``'s bytes, or None with why in ``ignored`` (over ``limit``; unreadable, where that
    costs only the entry: ``own_failure`` or the entry's own)."""
    if entry.size <= limit:  # a file listed as larger is not read at all
        assert entry.read is not None  # an entry never to read (not_read) is set aside before
        try:
            data = entry.read(limit)
        except Exception as error:
            if not (own_failure or entry.own_failure):
                if isinstance(error, OSError):
                    raise SubmissionError(f"{entry.name} cannot be read ({error.strerror or error})") from None
                raise
            ignored.append(f"{entry.name} ({_reason(error)})")
            return None
        if len(data) <= limit:
            return data
    ignored.append(f"{entry.name} (over {size_text(limit)})")
    return None


def _take_from_notebook(
    entry: Entry, files: dict[str, bytes], decided: set[str], budget: dict[str, int], ignored: list[str]
) -> None:
    """The stage files still missing that ``entry``'s ``%%writefile`` cells write."""
    if entry.size > budget["notebook bytes"]:
        ignored.append(f"{entry.name} (not read: notebooks over {size_text(MAX_NOTEBOOK_BYTES)} in all)")
        return
    # a notebook is read only for want of a stage file: failing to read it costs only itself
    if (raw := _read_bounded(entry, budget["notebook bytes"], ignored, own_failure=True)) is None:
        return
    budget["notebook bytes"] -= len(raw)
    try:
        written = {name: text for name, text in written_files(raw).items() if name in STAGE_FILES}
    except NotANotebook as error:
        ignored.append(f"{entry.name} ({error})")
        return
    if not written:
        ignored.append(f"{entry.name} (no %%writefile cell of a stage file)")
        return
    taken = [name for name in sorted(written) if name not in decided]
    for name in taken:
        decided.add(name)
        data = written[name].encode("utf-8", errors="surrogateescape")
        if len(data) <= MAX_STAGE_FILE_BYTES:
            files[name] = data
        else:
            ignored.append(f"{entry.name}: %%writefile {name} (over {size_text(MAX_STAGE_FILE_BYTES)})")
    if not taken:  # every stage file it writes was found as a file first
        ignored.append(entry.name)
