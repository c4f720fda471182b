"""OUT/.grader/class.toml: which class a folder of reports holds, and the input files it was graded with, so
that a run with another class, or one that forgets a file the last run gave, is refused in one line."""

import json
from pathlib import Path

from grader.classroom.out_folder import state_file, written
from grader.core.output_files import write_atomic
from grader.core.toml_file import read_toml
from grader.runner.escaping import printable

# In OUT: which class its reports are of (a file no student's report or feedback can be named)
CLASS_RECORD = "class.toml"
RECORD_SCHEMA = Path(__file__).parents[1] / "core" / "schemas" / "class-record.schema.json"

# The files of a run whose loss would change other students' rows: class.toml key -> the option that gives
# it, and what a run without it would do
_LATE_LOST = "every student's submission time and late penalty there is lost"
INPUT_FILE_OPTIONS = {
    "times": ("--times", _LATE_LOST),
    "course": ("--course", _LATE_LOST),
    "points": (
        "--points",
        "the whole class is graded again with the default points and the course's note prices (python -m "
        "grader.cli.points --course course.toml writes those as a file, to give if that is what you mean)",
    ),
}


def check_class_record(out: Path, layout: str, submissions: Path, files: dict[str, Path | None]) -> str | None:
    """Refuse (ValueError, one line) to grade a ``layout`` class into an ``out`` that holds the reports of a
    class of another layout: ids of two LMSs can meet (a Gradescope SID that is a Canvas user id), and one
    report would replace the other's. Refuse too a run that omits a file of ``files`` (--times, --course,
    --points) the last run into ``out`` gave: every student's time and penalty would be wiped from grades.csv
    and the reports, or the class silently graded with other points (another file is taken: a due date
    moves, a table changes). The folder ``out`` was last graded from, when that
    was another one (a fresh download of the same class is graded into the same ``out``: a regrade)."""
    _check_out(out, submissions)
    if not state_file(out, CLASS_RECORD).exists():
        return None  # a new OUT, or one graded before it held a record
    record = read_record(out)
    if record.get("layout") != layout:
        raise ValueError(
            f"{out} holds the reports of a {printable(str(record.get('layout')), keep_newlines=False)} "
            f"class (graded from {printable(str(record.get('folder')), keep_newlines=False)}), and "
            f"{submissions} is a {layout} class: give each class its own --out"
        )
    for key, (option, lost) in INPUT_FILE_OPTIONS.items():
        if files[key] is None and key in record:
            earlier_file = printable(str(record[key]), keep_newlines=False)
            raise ValueError(
                f"{out} was last graded with {option} {earlier_file}: give {option} {earlier_file} "
                f"again (or the file that replaces it), or {lost}"
            )
    earlier = printable(str(record.get("folder")), keep_newlines=False)
    return earlier if earlier != _path_text(submissions) else None


def read_record(out: Path) -> dict:
    """``out``'s class record, checked against its schema; ValueError (one line) naming the file where it is not
    what the grader writes: it is never replaced unread, or the next run could mix two classes in one folder."""
    import jsonschema  # an instructor's dependency, as this module is

    path = state_file(out, CLASS_RECORD)
    try:
        record = read_toml(path)
        jsonschema.validate(record, json.loads(RECORD_SCHEMA.read_text(encoding="utf-8")))
    except (ValueError, jsonschema.ValidationError) as error:
        said = error.message if isinstance(error, jsonschema.ValidationError) else str(error)
        raise ValueError(
            f"{path} is not the grader's record of a class ({printable(said, keep_newlines=False)[:160]}): delete it "
            f"if {out} holds this class's reports, or give this class its own --out"
        ) from None
    return record


def recorded_anonymous(out: Path) -> bool:
    """Whether the last run into ``out`` graded anonymously: the next keeps names out too, until --reveal (a
    record that cannot be read says no here; check_class_record names it before anyone is graded)."""
    try:
        return read_record(out).get("anonymous") is True
    except (OSError, ValueError):
        return False


def _check_out(out: Path, submissions: Path) -> None:
    """Refuse (ValueError) an ``out`` that is a file, or lies in the class folder: its reports would be
    graded as a student (or make the folder look like another class) on the next run."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file, not a folder: name the folder the reports go to")
    if out.resolve().is_relative_to(submissions.resolve()):
        raise ValueError(
            f"--out {out} is inside the class folder {submissions}: the next run would take the reports "
            "for a submission; give an --out outside it"
        )


def write_class_record(
    out: Path, layout: str, submissions: Path, files: dict[str, Path | None], anonymous: bool = False
) -> None:
    """Say in ``out`` which class its reports are of, the ``files`` they were graded with (check_class_record
    reads it), and whether it is graded anonymously (recorded_anonymous)."""
    lines = [
        f"layout = {json.dumps(layout)}",
        f"folder = {_toml_text(submissions)}",
        *[f"{key} = {_toml_text(path)}" for key, path in files.items() if path is not None],
        *(["anonymous = true"] if anonymous else []),
    ]
    write_atomic(
        written(state_file(out, CLASS_RECORD)),
        "# The class whose reports this folder holds: grader batch refuses another\n"
        + "".join(f"{line}\n" for line in lines),
    )


def _path_text(path: Path) -> str:
    """``path``, absolute and printable: TOML and a terminal both take it as it is."""
    return printable(str(path.resolve()), keep_newlines=False)


def _toml_text(path: Path) -> str:
    return json.dumps(_path_text(path), ensure_ascii=False)  # a TOML basic string, as JSON writes one
