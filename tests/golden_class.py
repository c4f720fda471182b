"""A fixed class (correct, wrong, hostile and unreadable submissions) graded the way instructors and
learners grade, for a change that must not move any grade: record its outputs before, again after,
and compare.

    python -m tests.golden_class OUT_DIR          # grade the class into OUT_DIR (a few minutes)
    python -m tests.golden_class --compare A B    # every output of A and B, byte for byte

What may differ between two runs of the same grades is masked before comparing: the grader's own
hash in each report's fingerprint (a new grader is the point of the change) and when it graded.
"""

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

from tests.conftest import REPO
from tests.grading import BONUS_ON, MUTANTS, learner_copy
from tests.hostile import hostile_cases, write_hostile

MUTANT_STRIDE = 4  # every 4th mutant: each stage's kinds of mistake, in a few minutes
QUICK_HOSTILE = {
    "os-exit-at-import",
    "sys-exit-at-import",
    "segfault",
    "unbounded-recursion",
    "write-outside-scratch",
    "prints-fake-results",
}
SINGLE_OUTPUTS = ("--json", "--student-json", "--html", "--gradescope", "--classroom")
MASKED = "(masked)"
OUTSIDE = Path(tempfile.gettempdir()) / "golden-class-outside"


def build_class(folder: Path, outside: Path) -> None:
    """One sub-folder (or .zip) per student."""
    learner_copy(folder / "correct")
    shutil.copytree(REPO / "exercises", folder / "stubs", ignore=shutil.ignore_patterns("__pycache__"))
    book = learner_copy(folder / "book")
    for file in (REPO / "tests" / "book").glob("*.py"):
        shutil.copy(file, book / file.name)
    manifest = tomllib.loads((REPO / "tests" / "variants" / "manifest.toml").read_text())["variant"]
    for variant in manifest:
        student = learner_copy(folder / f"variant-{variant['name']}")
        for file in (REPO / "tests" / "variants" / variant["name"]).glob("*.py"):
            shutil.copy(file, student / file.name)
    for index, mutant in enumerate(MUTANTS[::MUTANT_STRIDE]):
        learner_copy(folder / f"mutant-{index:03d}", mutant)
    for case in hostile_cases(outside):
        if case.name in QUICK_HOSTILE:
            write_hostile(folder / f"hostile-{case.name}", case)
    (folder / "empty").mkdir()
    renamed = learner_copy(folder / "renamed")
    (renamed / "stage2_self_attention.py").rename(renamed / "stage2_selfattention.py")
    missing = learner_copy(folder / "missing")
    (missing / "stage3_weight_transfer.py").unlink()
    (missing / "notes.txt").write_text("my notes\n")
    with zipfile.ZipFile(folder / "zipped.zip", "w") as archive:
        for file in sorted((folder / "correct").iterdir()):
            archive.write(file, f"attention/{file.name}")
    (folder / "broken.zip").write_bytes(b"PK\x03\x04 not really a zip")


def record(out: Path) -> None:
    out.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        build_class(work / "class", OUTSIDE)  # a fixed path: the hostile file holds it, and its hash with it
        batch = subprocess.run(
            [
                sys.executable,
                "-m",
                "grader",
                "batch",
                str(work / "class"),
                "--out",
                str(out / "batch"),
                "--course",
                str(BONUS_ON),
                "--workers",
                "2",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        (out / "batch-stderr.txt").write_text(_without_progress(batch.stderr))
        for student in ("correct", "stubs", "book", "missing"):
            single = out / "single" / student
            single.mkdir(parents=True)
            files = [
                arg for option in SINGLE_OUTPUTS for arg in (option, str(single / f"out{option.replace('-', '_')}"))
            ]
            for extra in ((), ("--for-students",), ("--visible-only",)):
                run = subprocess.run(
                    [sys.executable, "-m", "grader", str(work / "class" / student), *files, *extra],
                    cwd=REPO,
                    capture_output=True,
                    text=True,
                    env=_no_colour(),
                )
                name = "-".join(["run", *[e.strip("-") for e in extra]])
                (single / f"{name}.txt").write_text(
                    run.stdout.replace(str(work), "WORK") + f"\nexit {run.returncode}\n"
                )
                for file in single.glob("out_*"):
                    file.rename(single / f"{name}{file.name.removeprefix('out')}")
            _replace_paths(out, {str(work): "WORK", str(out): "OUT"})
    _mask(out)


def _no_colour() -> dict:
    import os

    return {**os.environ, "NO_COLOR": "1"}


def _without_progress(text: str) -> str:
    """The batch's closing lines, without the progress lines whose rate and ETA depend on the machine."""
    return "".join(line for line in text.splitlines(keepends=True) if " graded, " not in line)


def _replace_paths(out: Path, paths: dict[str, str]) -> None:
    """Every output of ``out`` with the run's temporary folders named by what they are."""
    for path in out.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for old, new in paths.items():
                data = data.replace(old.encode(), new.encode())
            path.write_bytes(data)


def _mask(out: Path) -> None:
    for path in out.rglob("*.json"):
        try:
            report = json.loads(path.read_text())
        except ValueError:
            continue
        if isinstance(report, dict) and "fingerprint" in report:
            report["fingerprint"]["grader"] = MASKED
            report["graded_at"] = MASKED
            path.write_text(json.dumps(report, indent=2) + "\n")


def compare(first: Path, second: Path) -> int:
    names = sorted(
        {p.relative_to(first) for p in first.rglob("*") if p.is_file()}
        | {p.relative_to(second) for p in second.rglob("*") if p.is_file()}
    )
    differ = [
        name
        for name in names
        if not (first / name).is_file()
        or not (second / name).is_file()
        or (first / name).read_bytes() != (second / name).read_bytes()
    ]
    for name in differ:
        print(f"differs: {name}")
    print(f"{len(names) - len(differ)} of {len(names)} files identical")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.golden_class", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--compare", type=Path, metavar="OTHER", help="compare OUT with OTHER instead of grading")
    args = parser.parse_args()
    if args.compare:
        return compare(args.out, args.compare)
    record(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
