"""A `make watch` (grader.cli.watch) running beside a test or a benchmark: each report it prints, as it ends."""

import subprocess
import time
from pathlib import Path

from grader.cli.watch import WATCHING

READY = WATCHING.split("{")[0]  # the line that ends each run's report


class Watcher:
    """``command`` started in ``cwd``; ``report()`` is the next report it prints (the text before READY)."""

    def __init__(self, command: list[str], cwd: Path, env: dict[str, str] | None = None):
        self.process = subprocess.Popen(
            command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )

    def report(self) -> str:
        assert self.process.stdout is not None
        lines = []
        for line in self.process.stdout:
            if line.startswith(READY):
                return "".join(lines)
            lines.append(line)
        raise RuntimeError(f"the watcher stopped: {''.join(lines)[-2000:]}{self.process.stderr.read()[-2000:]}")

    def saved(self, path: Path, text: str) -> tuple[str, float]:
        """Write ``text`` to ``path`` as an editor saves it; the report that follows, and the seconds it took."""
        time.sleep(0.2)  # a save a person makes, not one the watcher's settling would merge with the last
        started = time.perf_counter()
        path.write_text(text)
        return self.report(), time.perf_counter() - started

    def __enter__(self) -> "Watcher":
        return self

    def __exit__(self, *exc) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
