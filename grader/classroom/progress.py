"""A batch's progress: a bar on a terminal, a plain line every tenth of the way in a log."""

import sys
import time

from grader.core.report import Report


class Progress:
    """A bar with count, rate and ETA on a terminal; a plain line every tenth of the way in a log."""

    def __init__(self, total: int):
        self.total = total
        self.done = 0
        self.started = time.monotonic()
        self.bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="student", dynamic_ncols=True)

    def expect_one_more(self) -> None:
        self.total += 1
        if self.bar is not None:
            self.bar.total = self.total
            self.bar.refresh()

    def advance(self, student_id: str, report: Report) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.set_postfix_str(f"{student_id}: {report['score']:g}/{report['max_score']:g}", refresh=False)
            self.bar.update()
        elif self.done == self.total or self.done % max(1, self.total // 10) == 0:
            elapsed = time.monotonic() - self.started
            rate = self.done / elapsed if elapsed else 0.0
            eta = (self.total - self.done) / rate if rate else 0.0
            print(
                f"grader batch: {self.done}/{self.total} graded, {rate:.1f}/s, ETA {eta:.0f} s",
                file=sys.stderr,
                flush=True,
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
