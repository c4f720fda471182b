"""Helpers for the grader's own tests: learner-style copies of the solutions, CLI and make runs."""

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from grader.authoring.stubs import learner_imports
from grader.core import report as report_model
from grader.core.inputs_key import KEY_FILE
from grader.core.stages import STAGE_MODULES
from tests.conftest import REPO

SUBMISSIONS = REPO / "tests" / "submissions"  # whole stage files written as learners write them
BONUS_ON = REPO / "tests" / "bonus_course.toml"  # a course.toml that grades the bonus stages too


def _written(kind: str) -> list[dict]:
    """tests/submissions/manifest.toml's entries of ``kind`` ("mutant" or "alternative") in the shape of
    mutants.toml's: each replaces its stage's file by the one written out (``source``)."""
    manifest = (
        tomllib.loads((SUBMISSIONS / "manifest.toml").read_text()) if (SUBMISSIONS / "manifest.toml").exists() else {}
    )
    return [
        {
            "stage": entry["stage"],
            "file": f"{STAGE_MODULES[entry['stage']]}.py",
            "source": entry["file"],
            "what": entry["mistake"],
            **{key: entry[key] for key in ("truthful", "nameable") if key in entry},
        }
        for entry in manifest.get("submission", [])
        if entry["kind"] == kind
    ]


MUTANTS = tomllib.loads((REPO / "tests" / "mutants.toml").read_text())["mutant"] + _written("mutant")
ALTERNATIVES = tomllib.loads((REPO / "tests" / "alternatives.toml").read_text())["alternative"] + _written(
    "alternative"
)


def learner_file(name: str, mutant: dict | None = None) -> str:
    """The solution file ``name`` as a learner's (importing from exercises), with ``mutant`` applied if it is
    about that file: a find/replace on the solution, or a whole file written as a learner's (``source``)."""
    text = (REPO / "solutions" / name).read_text()
    if mutant and mutant["file"] == name and "source" in mutant:
        text = (SUBMISSIONS / mutant["source"]).read_text()
    elif mutant and mutant["file"] == name:  # one find/replace, or lists of them for edits in several places
        finds, replaces = mutant["find"], mutant["replace"]
        pairs = zip(finds, replaces, strict=True) if isinstance(finds, list) else [(finds, replaces)]
        for find, replace in pairs:
            assert text.count(find) == 1, f"{mutant.get('hint') or mutant['what']} no longer fits {name}"
            text = text.replace(find, replace)
    return learner_imports(text)


def learner_copy(folder: Path, mutant: dict | None = None, stages=STAGE_MODULES) -> Path:
    """The solutions as a learner's files in ``folder``, with one mutant applied (learner_file)."""
    folder.mkdir(parents=True, exist_ok=True)
    for stage in stages:
        name = f"{STAGE_MODULES[stage]}.py"
        (folder / name).write_text(learner_file(name, mutant))
    return folder


VARIANTS = REPO / "tests" / "variants"  # right answers written otherwise, a folder each (tests/test_variants.py)
BOOK_CODE = REPO / "tests" / "book"  # the chapter's code pasted into the core stages' stubs


def correct_class(folder: Path, stages) -> Path:
    """Right code of ``stages`` as a class folder, a student folder each: the solutions, the book's code, and every
    right alternative and variant, packed so that no two of them share a file (each student's other files are the
    solutions'). What every artefact must grade as the repository does, without an error of the grader's own."""
    solved = {f"{STAGE_MODULES[s]}.py": learner_file(f"{STAGE_MODULES[s]}.py") for s in stages}
    book = {p.name: p.read_text() for p in sorted(BOOK_CODE.glob("*.py")) if p.name in solved}
    changes = [{a["file"]: learner_file(a["file"], a)} for a in ALTERNATIVES if a["file"] in solved]
    for variant in sorted(p for p in VARIANTS.iterdir() if p.is_dir()):
        files = {p.name: p.read_text() for p in sorted(variant.glob("*.py"))}
        if set(files) <= set(solved):
            changes.append(files)
    packed: list[dict[str, str]] = []
    for files in changes:
        room = next((student for student in packed if not set(student) & set(files)), None)
        if room is None:
            packed.append(dict(files))
        else:
            room.update(files)
    students = {"solutions": solved, "book": solved | book} | {
        f"right-{n:02d}": solved | files for n, files in enumerate(packed)
    }
    for student, files in students.items():
        (folder / student).mkdir(parents=True)
        for name, text in files.items():
            (folder / student / name).write_text(text)
    return folder


def grade(submission: Path, *options: str, report: Path | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    """Run `python -m grader` as a learner would; return the process and its JSON report."""
    report = report or submission.parent / f"{submission.name}-report.json"
    result = grade_run(submission, "--json", str(report), *options)
    assert result.returncode == 0, result.stderr
    read = report_model.read(report)
    assert read is not None, report.read_text()
    return result, read


def grade_run(submission: Path, *options: str) -> subprocess.CompletedProcess:
    """Run `python -m grader` as a learner would, whatever it returns."""
    return subprocess.run(
        [sys.executable, "-m", "grader", str(submission), *options],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )


def keep_key(out: Path, into: Path) -> None:
    """The class's key for hidden inputs, copied with its reports: another key draws other inputs, and regrades."""
    (into / ".grader").mkdir(parents=True, exist_ok=True)
    shutil.copy2(out / ".grader" / KEY_FILE, into / ".grader" / KEY_FILE)


def batch(submissions: Path, out: Path, *options: str) -> subprocess.CompletedProcess:
    """Run `python -m grader batch` as an instructor would; it must succeed."""
    result = batch_run(submissions, out, *options)
    assert result.returncode == 0, result.stderr
    return result


def batch_run(submissions: Path, out: Path, *options: str) -> subprocess.CompletedProcess:
    """Run `python -m grader batch` as an instructor would, whatever it returns."""
    return subprocess.run(
        [sys.executable, "-m", "grader", "batch", str(submissions), "--out", str(out), *options],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )


# What only a batch adds to a report: when, from what, and the late penalty its course file sets.
BATCH_FIELDS = ("graded_at", "fingerprint", "late", "overrides", "record")  # report.Report: what a batch adds


def verdicts(report: dict) -> dict:
    """``report`` without what only a batch adds: what a single grade and a batch must agree on."""
    return {key: value for key, value in report.items() if key not in BATCH_FIELDS}


def stage_scores(report: dict) -> dict[int, float]:
    return {int(s["id"].removeprefix("stage")): s["score"] for s in report["stages"]}


def make(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """`make -s ARGS` in ``folder``, as a user types it (pytest's own environment left out)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    return subprocess.run(["make", "-s", *args], cwd=folder, capture_output=True, text=True, env=env, timeout=600)
