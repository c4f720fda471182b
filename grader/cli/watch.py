"""python -m grader.cli.watch [SUBMISSION] [--stage N] [--html FILE] [grading options]

Grades a folder of stage files, then grades it again each time one of its graded stage files is saved,
until Ctrl-C. The sandbox (its zygote holds torch, loaded once) and the judge's pytest session stay up
between runs; each run is a new student of that sandbox, as each student of a batch is (a first process,
workers and a scratch folder of its own), so nothing one run's code did reaches the next. Each run prints
the report `make grade` prints and rewrites --html.
"""

import argparse
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from grader.cli.options import add_grading_options, grading_options
from grader.core.course import CourseError
from grader.core.stages import STAGE_MODULES, STAGES
from grader.intake.submission import SubmissionError, SubmissionFiles, read_submission
from grader.judge.routes_off import SWITCHED_OFF_EVERYWHERE
from grader.sandbox.zygote import Sandbox, SandboxError

POLL_SECONDS = 0.05  # how often the files' times are read: a save is seen within this
WATCHING = "watching {folder} ({what}): save to grade again, Ctrl-C to stop"
CLEAR_SCREEN = "\033[2J\033[H"
SAVED = "──── {time} · you saved {files}: graded again ────"


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m grader.cli.watch", description=__doc__.splitlines()[2])
    parser.add_argument("submission", type=Path, nargs="?", default=Path("exercises"), help="a folder of stage files")
    parser.add_argument("--stage", type=int, choices=STAGES, help="grade and watch one stage only")
    parser.add_argument("--course", type=Path, metavar="FILE", help="the course settings, as for grading")
    parser.add_argument("--html", type=Path, metavar="FILE", help="also rewrite this HTML report after each run")
    add_grading_options(parser)
    return parser.parse_args(argv)


def stamp(folder: Path, files: list[str]) -> tuple:
    """What changes when one of ``files`` is saved: each one's modification time and size (None: absent)."""
    found = []
    for name in files:
        try:
            status = (folder / name).stat()
            found.append((status.st_mtime_ns, status.st_size))
        except OSError:
            found.append(None)
    return tuple(found)


class Saves:
    """The submission as it is now, then again after every save of ``files``, until Ctrl-C (``stopped``).
    A save is taken once the files have stayed the same for one poll: an editor writing in steps is read
    when it is done."""

    def __init__(self, folder: Path, files: list[str]):
        self.folder, self.files, self.stopped = folder, files, False
        self.saved: list[str] = []  # the files the last save changed (none before the first)

    def __iter__(self) -> Iterator[SubmissionFiles]:
        seen = stamp(self.folder, self.files)
        while True:
            yield self._read()
            try:
                seen = self._next_save(seen)
            except KeyboardInterrupt:
                self.stopped = True
                return

    def _next_save(self, seen: tuple) -> tuple:
        while (now := stamp(self.folder, self.files)) == seen:
            time.sleep(POLL_SECONDS)
        while True:  # settled: unchanged for one poll
            time.sleep(POLL_SECONDS)
            if (later := stamp(self.folder, self.files)) == now:
                self.saved = [name for name, before, after in zip(self.files, seen, now) if before != after]
                return now
            now = later

    def _read(self) -> SubmissionFiles:
        try:
            return read_submission(self.folder)
        except (SubmissionError, OSError) as error:
            return SubmissionFiles(problem=str(error))


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if not args.submission.is_dir():
        print(f"grader: {args.submission} is not a folder: watch grades a folder of stage files", file=sys.stderr)
        return 2
    try:
        options = grading_options(args, args.course, args.stage)
        sandbox = Sandbox(options.device, options.sandbox, switched_off=SWITCHED_OFF_EVERYWHERE)
    except (CourseError, SandboxError) as error:
        print(f"grader: {error}", file=sys.stderr)
        return 2
    # torch, pytest and the judge are imported here, after the sandbox's zygote has started importing its own
    from grader.judge.session import GradingError, grade_each
    from grader.views.html import render_html
    from grader.views.terminal import render_text

    files = [f"{STAGE_MODULES[stage]}.py" for stage in options.stages]
    what = f"stage {args.stage}" if args.stage else f"{len(files)} stage files"
    saves = Saves(args.submission, files)

    terminal = sys.stdout  # the checks run with stdout taken (grader.judge.plugin.run_checks): reports go here

    def show(report) -> None:
        if args.html:
            args.html.write_text(render_html(report, str(args.submission), args.html.absolute()), encoding="utf-8")
        text = render_text(report, str(args.submission), banner=not saves.saved)
        if saves.saved:  # a save: when, and which file, so that a scrolled or piped log reads run by run
            screen = CLEAR_SCREEN if terminal.isatty() else ""
            text = f"{screen}{SAVED.format(time=time.strftime('%H:%M:%S'), files=', '.join(saves.saved))}\n\n{text}"
        print(f"{text}\n", file=terminal)
        print(WATCHING.format(folder=args.submission, what=what), file=terminal, flush=True)

    interrupted: list[int] = []  # Ctrl-C seen: whatever it breaks on its way out (a worker's reply) is no error

    def on_interrupt(signum: int, frame: object) -> None:
        interrupted.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_interrupt)
    with sandbox:
        try:
            grade_each(sandbox, iter(saves), show, options)
        except GradingError as error:
            if not (saves.stopped or interrupted):
                print(f"grader: {error}", file=sys.stderr)
                return 2
        except KeyboardInterrupt:  # during a run
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
