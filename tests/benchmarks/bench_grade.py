"""make bench-grade: how much grading adds to the interpreter and torch start-up.

Times, in one run and interleaved so that machine noise hits both alike, the wall time of
`make grade` on a correct submission (the solutions as a learner's files) and of a bare
`python -c "import torch"`, and prints the medians and their ratio (target: at most 1.3).
"""

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.grading import learner_copy

REPO = Path(__file__).resolve().parents[2]
ROUNDS = 7


def wall(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=REPO, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    correct = learner_copy(Path(tempfile.mkdtemp(prefix="bench-grade-")) / "submission")
    grade_command = ["make", "--no-print-directory", "grade", f"SUBMISSION={correct}"]
    torch_command = [sys.executable, "-c", "import torch"]
    wall(grade_command)  # warm the file cache and the .venv stamp
    grades, imports = [], []
    for _ in range(ROUNDS):
        grades.append(wall(grade_command))
        imports.append(wall(torch_command))
    grade, bare = statistics.median(grades), statistics.median(imports)
    print(f"make grade (a correct submission): median {grade:.2f} s (min {min(grades):.2f}, max {max(grades):.2f})")
    print(f"python -c 'import torch':          median {bare:.2f} s (min {min(imports):.2f}, max {max(imports):.2f})")
    print(f"ratio: {grade / bare:.2f} (target <= 1.3), {ROUNDS} rounds")


if __name__ == "__main__":
    main()
