"""Submissions as an attacker or a broken tool makes them: what cannot be read is refused in one
line (a batch flags it and goes on), and what the grader shows of them is escaped."""

import csv
import json
import os
import struct
import subprocess
import sys
import unicodedata
import zipfile
import zlib
from pathlib import Path

import pytest

from grader.core import report as report_model
from tests.conftest import REPO
from tests.grading import batch, learner_copy
from tests.hostile import STAGE1, Hostile, write_hostile

DEPTH = 1900  # deeper than Python's recursion limit
CROWD = 100_000
# What a stage-1 function raises: clear the screen, go home, print a fake total on a line of its
# own, reverse and hide the rest.
LIE = "\x1b[2J\x1b[H\u202eTotal: 100/100\r\nTotal: 100/100\x1b[8m\u2066hidden\u2069"
LIE_SHOWN = ["\\x1b[2J\\x1b[H\\u202eTotal: 100/100\\r", "Total: 100/100\\x1b[8m\\u2066hidden\\u2069"]
ODD_ENTRY = "notes\x1b[31m\u202e\n.txt"  # a zip entry name: colour, bidi override, newline
ODD_ENTRY_SHOWN = "notes\\x1b[31m\\u202e\\n.txt"


def encrypted_zip(path: Path) -> None:
    """A zip whose stage file is flagged encrypted (bit 0), as `zip -e` leaves it."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(STAGE1, (REPO / "solutions" / STAGE1).read_bytes())
    data = bytearray(path.read_bytes())
    central = data.rfind(b"PK\x01\x02")
    data[6] |= 1
    data[central + 8] |= 1
    path.write_bytes(bytes(data))


def truncated_zip(path: Path) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(STAGE1, (REPO / "solutions" / STAGE1).read_bytes())
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def lying_zip(path: Path) -> None:
    """A stage file that declares 1 KiB, with the checksum of that KiB, and inflates to 1 GiB:
    a reader that trusts the declared size takes the KiB; one that unpacks all of it, 1 GiB."""
    head = (REPO / "solutions" / STAGE1).read_bytes()[:1024]
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = deflate.compress(head) + deflate.flush(zlib.Z_FULL_FLUSH)
    block = deflate.compress(bytes(1 << 20)) + deflate.flush(zlib.Z_FULL_FLUSH)  # a full flush resets the
    raw = first + block * 1024 + deflate.flush()  # compressor, so the block repeats byte for byte
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr(STAGE1, bytes(len(raw)))
    data = bytearray(path.read_bytes())
    start = 30 + len(STAGE1)
    data[start : start + len(raw)] = raw
    central = data.rfind(b"PK\x01\x02")
    # method, (time and date kept), CRC, packed and unpacked size: in the local and the central header
    for offset in (8, central + 10):
        struct.pack_into("<H4xIII", data, offset, zipfile.ZIP_DEFLATED, zlib.crc32(head), len(raw), len(head))
    path.write_bytes(bytes(data))


def nested_folders(path: Path) -> None:
    path.mkdir()
    folder = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(DEPTH):  # each level made from the one above: os.makedirs recurses, once per level
        os.mkdir("d", dir_fd=folder)
        deeper = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=folder)
        os.close(folder)
        folder = deeper
    os.close(folder)


def remove_nested(path: Path) -> None:
    """shutil.rmtree (and pytest's clean-up) recurses once per level: remove the deepest first."""
    folders = [str(path)]
    while os.path.isdir(folders[-1] + "/d"):
        folders.append(folders[-1] + "/d")
    for folder in reversed(folders):
        os.rmdir(folder)


def crowded_folder(path: Path) -> None:
    """CROWD empty files: hard links to a few, which takes a second where as many new files take several."""
    path.mkdir()
    for index in range(CROWD):
        if index % 10_000 == 0:  # file systems cap the links to one file (ext4: 65,000)
            linked = path / f"empty{index}"
            linked.touch()
        else:
            os.link(linked, path / f"empty{index}")


def link_loop(path: Path) -> None:
    path.symlink_to(path.name)


# student -> (how to make it, what its refusal says)
UNREADABLE = {
    "encrypted": (lambda root: encrypted_zip(root / "encrypted.zip"), "encrypted zip"),
    "truncated": (lambda root: truncated_zip(root / "truncated.zip"), "truncated or damaged zip"),
    "lying": (lambda root: lying_zip(root / "lying.zip"), "unpacks to more than the 1024 bytes it declares"),
    "nested": (lambda root: nested_folders(root / "nested"), "nested deeper than"),
    "looped": (lambda root: link_loop(root / "looped.zip"), "symbolic link loop"),
    "crowded": (lambda root: crowded_folder(root / "crowded"), "too many files"),
}


@pytest.fixture(scope="module")
def submissions(tmp_path_factory):
    """A class: the unreadable ones, an honest student, a liar in stage 1, odd names in a zip and in the class."""
    root = tmp_path_factory.mktemp("untrusted") / "submissions"
    root.mkdir()
    for make, _ in UNREADABLE.values():
        make(root)
    learner_copy(root / "honest")
    write_hostile(root / "liar", Hostile("liar", f"raise RuntimeError({LIE!r})", at_import=False, hint=None))
    with zipfile.ZipFile(root / "odd-names.zip", "w") as archive:
        for path in learner_copy(root.parent / "odd-names").iterdir():
            archive.write(path, path.name)
        archive.writestr(ODD_ENTRY, "a note")
    learner_copy(root / "odd\x1b[2Jid", stages=[1])
    (root / "stray\u202etxt.exe").write_text("not a submission")
    yield root
    remove_nested(root / "nested")


@pytest.fixture(scope="module")
def graded_class(submissions, tmp_path_factory):
    out = tmp_path_factory.mktemp("untrusted-out")
    return batch(submissions, out, "--workers", "1"), out


def grade_alone(submission: Path, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "grader", str(submission), *options],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def raw_characters(text: str) -> list[str]:
    """The characters of ``text`` a terminal or an editor would act on (newlines aside)."""
    return [c for c in text if c != "\n" and unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")]


def strings_in(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in strings_in(item)]
    if isinstance(value, list):
        return [s for item in value for s in strings_in(item)]
    return []


@pytest.mark.parametrize("student", UNREADABLE)
def test_an_unreadable_submission_is_refused_in_one_line(submissions, student):
    path = next(submissions.glob(f"{student}*"))
    result = grade_alone(path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("grader: unreadable: ") and UNREADABLE[student][1] in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_a_batch_flags_each_unreadable_student_and_grades_the_rest(graded_class):
    result, out = graded_class
    with open(out / "grades.csv", newline="") as handle:
        rows = {row["student_id"]: row for row in csv.DictReader(handle)}
    assert "looped" not in rows and "skipped looped.zip (a symbolic link, not followed)" in result.stderr
    for student, (_, reason) in UNREADABLE.items():
        if student == "looped":  # a link in a class folder is skipped; given alone, it is refused
            continue
        flags = json.loads((out / "students" / f"{student}.json").read_text())["flags"]
        unreadable = [flag for flag in flags if flag.startswith("unreadable: ")]
        assert rows[student]["score"] == "0" and len(unreadable) == 1 and reason in unreadable[0], flags
    assert rows["honest"]["score"] == rows["odd-names"]["score"] == "100"
    assert "not graded" not in (out / "grades.csv").read_text()


def test_names_from_a_class_folder_reach_the_gradebook_and_the_log_escaped(graded_class):
    result, out = graded_class
    assert [p for p in (out / "students").glob("*.json") if p.stem.startswith("odd\\x1b[2Jid~")]  # escaped, so hashed
    assert "skipped stray\\u202etxt.exe" in result.stderr
    assert not raw_characters(result.stderr)
    gradebook = (out / "grades.csv").read_text(encoding="utf-8")
    assert ODD_ENTRY_SHOWN in gradebook and not raw_characters(gradebook)


@pytest.mark.parametrize("student", ["liar", "odd-names"])
def test_a_students_feedback_file_shows_their_text_escaped(graded_class, student):
    _, out = graded_class
    feedback = (out / "students" / f"{student}.txt").read_bytes().decode("utf-8")
    assert not raw_characters(feedback)
    assert all(shown in feedback for shown in (LIE_SHOWN if student == "liar" else [ODD_ENTRY_SHOWN]))


@pytest.fixture(scope="module")
def liar_graded_alone(submissions, tmp_path_factory):
    folder = tmp_path_factory.mktemp("liar-outputs")
    result = grade_alone(
        submissions / "liar",
        "--stage",
        "1",
        "--gradescope",
        str(folder / "results.json"),
        "--classroom",
        str(folder / "classroom.json"),
    )
    assert result.returncode == 0, result.stderr
    return result, folder


def test_a_learners_exception_reaches_the_terminal_escaped(liar_graded_alone):
    result, _ = liar_graded_alone
    assert all(shown in result.stdout for shown in LIE_SHOWN) and not raw_characters(result.stdout)


def test_a_learners_newline_cannot_start_a_line_of_the_report(liar_graded_alone):
    result, _ = liar_graded_alone
    lines = result.stdout.splitlines()
    assert [line for line in lines if line.lstrip().startswith("Total")] == [lines[-1]]


@pytest.mark.parametrize("platform", ["results.json", "classroom.json"])
def test_a_learners_exception_reaches_gradescope_and_classroom_escaped(liar_graded_alone, platform):
    _, folder = liar_graded_alone
    strings = strings_in(json.loads((folder / platform).read_text()))
    assert not [s for s in strings if raw_characters(s)]
    assert any(all(shown in s for shown in LIE_SHOWN) for s in strings)


def test_only_the_graders_own_colour_codes_reach_a_colour_terminal(graded_class):
    from grader.views.terminal import COLOUR_CODES, render_text

    _, out = graded_class
    coloured = render_text(report_model.read(out / "students" / "liar.json"), "liar", color=True)
    uncoloured = coloured
    for code in [*COLOUR_CODES.values(), "0"]:
        uncoloured = uncoloured.replace(f"\x1b[{code}m", "")
    assert "\x1b[31m" in coloured and all(shown in coloured for shown in LIE_SHOWN)
    assert not raw_characters(uncoloured)


def test_staging_turns_any_failure_into_one_unreadable_flag_and_the_class_goes_on(monkeypatch):
    from grader.classroom import plan
    from grader.intake.students import Student

    def failing(source: Path):
        raise ValueError("bad\nline\x1b[2J")

    monkeypatch.setattr(plan, "read_submission", failing)  # the judge stages every student itself
    staged = [plan.read_student(Student(name, Path("odd"))) for name in ("a", "b")]
    assert [s.problem for s in staged] == ["ValueError: bad\\nline\\x1b[2J"] * 2
