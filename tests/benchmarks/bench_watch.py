"""make bench-watch: how long `make watch` takes to re-grade one stage after a save.

Starts the watcher on a correct submission (the solutions as a learner's files) for each core stage, saves
that stage's file ROUNDS times (a comment line added, as an edit would), and times each save until the new
report is printed. Prints each stage's median; the last line is the slowest stage's (target: at most 0.5 s).
"""

import statistics
import sys
import tempfile
from pathlib import Path

from grader.core.stages import CORE, STAGE_MODULES, stages_of
from tests.grading import learner_copy
from tests.watching import Watcher

REPO = Path(__file__).resolve().parents[2]
ROUNDS = 10


def regrade_times(folder: Path, stage: int) -> list[float]:
    stage_file, times = folder / f"{STAGE_MODULES[stage]}.py", []
    with Watcher([sys.executable, "-m", "grader.cli.watch", str(folder), "--stage", str(stage)], REPO) as watcher:
        watcher.report()  # the first run: the sandbox starts, pytest collects
        for n in range(ROUNDS):
            printed, seconds = watcher.saved(stage_file, stage_file.read_text() + f"# saved {n}\n")
            assert "Total: 20/20" in printed, printed[-2000:]
            times.append(seconds)
    return times


def main() -> None:
    folder = learner_copy(Path(tempfile.mkdtemp(prefix="bench-watch-")) / "submission")
    medians = {}
    for stage in stages_of((CORE,)):
        times = regrade_times(folder, stage)
        medians[stage] = statistics.median(times)
        print(
            f"stage {stage}: median {medians[stage]:.2f} s (min {min(times):.2f}, max {max(times):.2f}), {ROUNDS} saves"
        )
    slowest = max(medians, key=lambda stage: medians[stage])
    print(f"re-grade after a save: median {medians[slowest]:.2f} s at worst (stage {slowest}; target <= 0.5 s)")


if __name__ == "__main__":
    main()
