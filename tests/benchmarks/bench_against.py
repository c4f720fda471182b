"""make bench-against REF=<commit>: the batch grader of this tree against that of another commit.

Checks REF out into a temporary git worktree, builds bench-batch's class of 100 once, then grades it
with each tree in turn, interleaved so that machine noise hits both alike (this interpreter and its
packages for both; each tree's own grader, solutions and checks). Prints each median, their ratio
(target for a change that only moves code: at most 1.0 within noise) and whether both gave the same
grades.csv, byte for byte.
"""

import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.benchmarks.bench_batch import CLASS_SIZE, LANES, make_class, time_batch

REPO = Path(__file__).resolve().parents[2]
ROUNDS = 5


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.benchmarks.bench_against REF")
    ref = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="bench-against-") as scratch:
        root = Path(scratch)
        other = root / "other"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(other), ref], cwd=REPO, check=True, capture_output=True
        )
        try:
            submissions = make_class(root)
            trees = {ref: other, "this tree": REPO}
            times: dict[str, list[float]] = {name: [] for name in trees}
            for n in range(ROUNDS):
                for index, (name, tree) in enumerate(trees.items()):
                    times[name].append(time_batch(submissions, root / f"out-{index}-{n}", tree))
            medians = {name: statistics.median(seconds) for name, seconds in times.items()}
            for name, seconds in times.items():
                print(
                    f"{name:>12}: median {medians[name]:5.1f} s, {CLASS_SIZE / medians[name]:5.2f} submissions/s "
                    f"({', '.join(f'{s:.1f}' for s in seconds)} s)"
                )
            print(
                f"ratio this tree / {ref}: {medians['this tree'] / medians[ref]:.2f} ({ROUNDS} rounds, {LANES} lanes)"
            )
            same = (root / "out-0-0" / "grades.csv").read_bytes() == (root / "out-1-0" / "grades.csv").read_bytes()
            print(f"grades.csv byte-identical: {'yes' if same else 'NO'}")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(other)], cwd=REPO, capture_output=True)


if __name__ == "__main__":
    main()
