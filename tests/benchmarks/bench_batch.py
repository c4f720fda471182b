"""make bench-batch: grading a class of 100 with the batch grader, against a process per student.

Generates 100 submissions (correct, partly wrong, stubs and every hostile case of
tests/hostile.py), then, in one run and on the same submissions:
  1. `python -m grader batch` (lanes = CPU cores, sandbox as available), three times: shared
     machines are noisy, so the median is the figure;
  2. the baseline: one fresh `python -m grader SUBMISSION` process per student (each imports
     torch and pytest and starts its own sandbox), as many at once as the batch has lanes;
  3. nbgrader autograde of the same work as notebooks (each stage file pasted into its answer
     cell), on a sample of one student per kind: one student after another, each in a kernel of
     their own (grader/authoring/nbgrader/shared_kernel.py), against the batch grader on the same
     sample alone.
  4. the floor (tests/benchmarks/bench_floor.py): the same class in one process with no sandbox, no
     worker processes and no IPC, the real checks run in-process; a measurement mode, never offered for
     grading. Timed as a fresh process, start-up included, as the batch is.
Prints submissions per second and the ratios (targets: >= 5/s; >= 10x the baseline; >= 10x
nbgrader on the class; nbgrader per student <= 3x the batch on the same students; batch <= 2x the
floor, with every defence on), and checks that both ways give every student the same score. Nothing
here asserts a target: the figures are printed.

BENCH_CLASS_SIZE=N (or --class-size N) grades a class of N in the same proportions (55% correct, 20%
wrong, 15% stubs, 10% hostile); --floor-only leaves out the process-per-student baseline and nbgrader.
make bench-profile (tests/benchmarks/bench_profile.py) says where one student's time goes.
"""

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from grader.authoring.nbgrader.course import ASSIGNMENT, answer_cell_source
from grader.authoring.nbgrader.demo import nbgrader, prepare, submit
from grader.core.course import course_stages
from grader.core.stages import STAGE_MODULES
from grader.sandbox.zygote import confinement
from tests.grading import MUTANTS, learner_copy
from tests.hostile import hostile_cases, write_hostile

REPO = Path(__file__).resolve().parents[2]
CLASS_SIZE = int(os.environ.get("BENCH_CLASS_SIZE", "100"))
LANES = os.cpu_count() or 1
BATCH_ROUNDS = 3


def make_class(root: Path, size: int = CLASS_SIZE) -> Path:
    """A class of ``size``: in a class of 100, 55 correct, 20 wrong, 15 stubs and the 10 hostile cases; in
    another, the same shares (the first hostile cases of the list, at least one)."""
    submissions = root / "class"
    hostile = hostile_cases(root / "outside")
    hostile = hostile[: max(1, min(len(hostile), round(size * len(hostile) / 100)))]
    wrong, stubs = round(size * 0.20), round(size * 0.15)
    correct = size - len(hostile) - wrong - stubs
    for n in range(correct):
        learner_copy(submissions / f"correct-{n:02d}")
    for n in range(wrong):
        learner_copy(submissions / f"wrong-{n:02d}", MUTANTS[n % len(MUTANTS)])
    for n in range(stubs):
        shutil.copytree(REPO / "exercises", submissions / f"stub-{n:02d}", ignore=shutil.ignore_patterns("__pycache__"))
    for case in hostile:
        write_hostile(submissions / f"hostile-{case.name}", case)
    (root / "outside").mkdir()
    return submissions


def time_batch(submissions: Path, out: Path, tree: Path = REPO) -> float:
    """Seconds `python -m grader batch` takes, with the grader of ``tree`` (a checkout of this repository)."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "grader", "batch", str(submissions), "--out", str(out), "--workers", str(LANES)],
        cwd=tree,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def time_floor(submissions: Path, out: Path) -> tuple[float, dict]:
    """Seconds the floor takes (bench_floor, a fresh process, start-up included), and what it found (its
    grading seconds, the time in learner imports, calls and the wire format, scores)."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "tests.benchmarks.bench_floor", str(submissions), str(out)], cwd=REPO, check=True
    )
    return time.perf_counter() - started, json.loads(out.read_text())


def print_floor(submissions: Path, root: Path, batch_seconds: float, batch_out: Path) -> None:
    size = sum(1 for p in submissions.iterdir() if p.is_dir())
    seconds, found = time_floor(submissions, root / "floor.json")
    print(
        f"floor (one process, no sandbox): {seconds:6.1f} s  {size / seconds:5.2f} submissions/s "
        f"({found['grading_seconds']:.1f} s grading after start-up; {found['requests']} requests: learner imports "
        f"{found['import_seconds']:.1f} s, calls {found['call_seconds']:.1f} s, wire format in memory "
        f"{found['wire_seconds']:.1f} s)"
    )
    print(
        f"ratio batch / floor:             {batch_seconds / seconds:.2f}x wall, {LANES} lanes against one process; "
        f"{batch_seconds * LANES / seconds:.2f}x per core (the batch's wall time times its lanes; goal <= 2)"
    )
    batch_scores, floor_scores = scores(batch_out), found["scores"]
    compared = [name for name in floor_scores if not name.startswith("hostile-")]
    differ = sorted(name for name in compared if batch_scores.get(name) != floor_scores[name])
    print(
        f"same score in the floor as in the batch: {len(compared) - len(differ)}/{len(compared)} "
        f"(hostile students left out: the floor grades their clean copy)" + (f" (differ: {differ})" if differ else "")
    )


def time_process_per_student(submissions: Path, out: Path) -> float:
    out.mkdir()

    def grade_one(folder: Path) -> None:
        subprocess.run(
            [sys.executable, "-m", "grader", str(folder), "--json", str(out / "students" / f"{folder.name}.json")],
            cwd=REPO,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    started = time.perf_counter()
    with ThreadPoolExecutor(LANES) as pool:
        list(pool.map(grade_one, sorted(submissions.iterdir())))
    return time.perf_counter() - started


def nbgrader_sample(submissions: Path) -> list[Path]:
    """One student per kind. The hostile one hangs: nbgrader runs notebooks unconfined (a fork bomb
    would take the machine down), and only the grader's own limits stand between it and a hang."""
    return [submissions / name for name in ("correct-00", "wrong-00", "stub-00", "hostile-infinite-loop")]


def time_nbgrader(sample: list[Path], course: Path) -> tuple[float, dict[str, float]]:
    """Seconds nbgrader autograde takes for the sample handed in as notebooks, and their scores."""
    prepare(course)
    for folder in sample:
        answers = {
            f"{module}.ipynb": answer_cell_source(stage, (folder / f"{module}.py").read_text())
            for stage, module in STAGE_MODULES.items()
            if stage in course_stages() and (folder / f"{module}.py").is_file()
        }  # the course's notebooks
        submit(course, folder.name, answers)
    started = time.perf_counter()
    nbgrader(course, "autograde", ASSIGNMENT, "--force")
    seconds = time.perf_counter() - started
    nbgrader(course, "export", "--to", "grades.csv")
    with (course / "grades.csv").open() as grades:
        return seconds, {row["student_id"]: float(row["score"]) for row in csv.DictReader(grades)}


def scores(out: Path) -> dict[str, float]:
    return {p.stem: json.loads(p.read_text())["score"] for p in sorted((out / "students").glob("*.json"))}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_batch")
    parser.add_argument("--class-size", type=int, default=CLASS_SIZE, help="submissions (BENCH_CLASS_SIZE)")
    parser.add_argument("--floor-only", action="store_true", help="the batch and the floor; no baseline, no nbgrader")
    args = parser.parse_args()
    class_size = args.class_size
    root = Path(tempfile.mkdtemp(prefix="bench-batch-"))
    try:
        submissions = make_class(root, class_size)
        sandbox = confinement("auto")
        print(f"{class_size} submissions, {LANES} lanes, sandbox: {sandbox.detail}")
        rounds = [time_batch(submissions, root / f"batch-{n}") for n in range(BATCH_ROUNDS)]
        batch_seconds = statistics.median(rounds)
        median_round = rounds.index(batch_seconds)
        batch_rate = class_size / batch_seconds
        print(
            f"python -m grader batch:          {batch_seconds:6.1f} s  {batch_rate:5.2f} submissions/s "
            f"(target >= 5; median of {', '.join(f'{r:.1f}' for r in rounds)} s)"
        )
        print_floor(submissions, root, batch_seconds, root / f"batch-{median_round}")
        if args.floor_only:
            return
        baseline_seconds = time_process_per_student(submissions, root / "baseline")
        baseline_rate = class_size / baseline_seconds
        print(f"a process per submission:        {baseline_seconds:6.1f} s  {baseline_rate:5.2f} submissions/s")
        print(f"ratio batch / process-per-student: {batch_rate / baseline_rate:.1f}x (target >= 10)")
        sample = nbgrader_sample(submissions)
        nbgrader_seconds, nbgrader_scores = time_nbgrader(sample, root / "nbgrader")
        nbgrader_rate = len(sample) / nbgrader_seconds
        print(
            f"nbgrader autograde ({len(sample)} students): {nbgrader_seconds:6.1f} s  {nbgrader_rate:5.2f} submissions/s"
        )
        print(f"ratio batch / nbgrader:          {batch_rate / nbgrader_rate:.0f}x (target >= 10)")
        ratios = []
        for folder in sample:  # each student alone, both ways: a student handed in, graded on their own
            alone = root / f"alone-{folder.name}"
            shutil.copytree(folder, alone / folder.name)
            started = time.perf_counter()
            nbgrader(root / "nbgrader", "autograde", ASSIGNMENT, "--student", folder.name, "--force")
            ratios.append((time.perf_counter() - started) / time_batch(alone, root / f"alone-out-{folder.name}"))
        print(
            "nbgrader per student / batch per student, each student alone: "
            + ", ".join(f"{folder.name} {ratio:.1f}x" for folder, ratio in zip(sample, ratios))
            + f"; median {statistics.median(ratios):.1f}x (target <= 3)"
        )
        batch_scores = scores(root / "batch-0")
        agree = sum(batch_scores[folder.name] == nbgrader_scores.get(folder.name) for folder in sample)
        print(f"same score in nbgrader as in the batch: {agree}/{len(sample)}")
        gradebooks = {(root / f"batch-{n}" / "grades.csv").read_bytes() for n in range(BATCH_ROUNDS)}
        print(
            f"grades.csv byte-identical across the {BATCH_ROUNDS} batch rounds: {'yes' if len(gradebooks) == 1 else 'NO'}"
        )
        differ = {k for k, v in scores(root / "batch-0").items() if scores(root / "baseline").get(k) != v}
        print(
            f"same score both ways: {class_size - len(differ)}/{class_size}"
            + (f" (differ: {sorted(differ)})" if differ else "")
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
