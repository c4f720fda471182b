"""Gradescope's export: a folder (or .zip) per submission and submission_metadata.yml naming its submitters
and when it was created."""

from datetime import datetime
from pathlib import Path

from grader.intake.students import Found, Student, display_name, entries_of, read_text_bounded, student_id, suffix_of
from grader.intake.times import not_a_time, parse_time
from grader.runner.escaping import printable

GRADESCOPE_METADATA = "submission_metadata.yml"
MAX_METADATA_BYTES = 64 * 1024 * 1024
GRADESCOPE_ID_FIELDS = ("sid", "email", "name")  # a submitter's id: the first of these they have


def list_gradescope(folder: Path, skipped: list[tuple[str, str]]) -> Found:
    """One student per submitter: a group's submission is graded once for each of its members."""
    metadata = _gradescope_metadata(folder / GRADESCOPE_METADATA)
    on_disk: dict[str, Path] = {}
    for entry, is_folder in entries_of(folder, skipped):
        key = entry.name if is_folder else entry.stem if suffix_of(entry) == ".zip" else None
        if key in metadata:
            on_disk[key] = entry
        elif entry.name != GRADESCOPE_METADATA:
            skipped.append((entry.name, f"not a submission of {GRADESCOPE_METADATA}"))
    found: Found = []
    for key, value in sorted(metadata.items()):
        record: dict = value if isinstance(value, dict) else {}
        submitters = _field(record, "submitters")
        listed = submitters if isinstance(submitters, list) else []
        people = [(id, submitter) for submitter in listed if (id := _submitter_id(submitter))]
        ids = [id for id, _ in people]
        if key not in on_disk:
            skipped.append((key, f"in {GRADESCOPE_METADATA}, but not in the folder"))
        elif not ids:
            skipped.append((key, f"no submitter with a sid, email or name in {GRADESCOPE_METADATA}"))
        else:
            submitted, unread = _gradescope_time(_field(record, "created_at"), key)
            found.extend(
                (Student(student_id(id), on_disk[key], submitted, time_unread=unread, name=_name(submitter)), key)
                for id, submitter in people
            )
    return found


def _gradescope_metadata(path: Path) -> dict[str, object]:
    """submission_metadata.yml: Ruby symbols for keys (``:submitters:``), a mapping per submission folder."""
    import yaml  # an instructor extra, as Gradescope exports are

    refusal = f"{GRADESCOPE_METADATA} cannot be read"
    try:
        text = read_text_bounded(path, MAX_METADATA_BYTES)
    except OSError as error:
        raise ValueError(f"{refusal}: {error.strerror or error}") from None
    if text is None:
        raise ValueError(f"{refusal}: over {MAX_METADATA_BYTES // 1024**2} MiB")
    try:
        metadata = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as error:  # its message spans lines: the problem and where it is say what
        problem = getattr(error, "problem", None) or (str(error).splitlines() or [type(error).__name__])[0]
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise ValueError(f"{refusal}: {printable(problem, keep_newlines=False)}{where}") from None
    if not isinstance(metadata, dict):
        raise ValueError(f"{GRADESCOPE_METADATA} holds no submissions (it is not a mapping)")
    return {str(key): record for key, record in metadata.items()}


def _field(record: dict, name: str) -> object:
    """A field of Gradescope's metadata, written as a Ruby symbol (``:sid``) or plainly."""
    return record.get(f":{name}", record.get(name))


def _submitter_id(submitter: object) -> str | None:
    if not isinstance(submitter, dict):
        return None
    values = (_field(submitter, name) for name in GRADESCOPE_ID_FIELDS)
    return next((str(value).strip() for value in values if value is not None and str(value).strip()), None)


def _name(submitter: dict) -> str | None:
    return display_name(_field(submitter, "name"))


def _gradescope_time(value: object, key: str) -> tuple[datetime | None, str | None]:
    """``:created_at:`` of submission ``key``: YAML reads Gradescope's ``2024-09-01 10:00:00.123456000 -07:00``
    as a datetime. Where the field is there but gives no time, None and why (one line)."""
    if value is None:
        return None, None
    submitted = value if isinstance(value, datetime) else parse_time(value, None) if isinstance(value, str) else None
    if submitted is not None and submitted.tzinfo is not None:
        return submitted, None
    where = printable(f"{GRADESCOPE_METADATA} {key}", keep_newlines=False)
    return None, f"{where} :created_at: is not a time with a UTC offset: {not_a_time(str(value))}"
