"""python -m grader batch SUBMISSIONS_DIR --out OUT_DIR [--workers N] [--force] [...]

Grades a class: every sub-folder or .zip of SUBMISSIONS_DIR is one student, named after it.
Writes OUT_DIR/<student>.json (the report), OUT_DIR/<student>.txt (the feedback the student
reads) and OUT_DIR/grades.csv. Each file is written whole or not at all, so a re-run after a
crash or Ctrl-C picks up where it stopped; --force grades everyone again.

Each lane is a judge process with its own sandbox (one torch-preloaded zygote), grading one
student at a time: a class pays the torch import once per lane, not once per student.
"""

import argparse
import csv
import io
import json
import multiprocessing
import os
import signal
import sys
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path

from grader.intake import Student, list_students
from grader.runner.text import printable

STAGE_COUNT = 5
CSV_COLUMNS = ["student_id", "score", "max_score", *[f"stage{n}" for n in range(1, STAGE_COUNT + 1)], "flags"]
# A text cell starting with one of these is a formula to a spreadsheet (OWASP, CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def parse(argv: list[str]) -> argparse.Namespace:
    from grader.__main__ import add_grading_options

    parser = argparse.ArgumentParser(prog="python -m grader batch", description=__doc__.split("\n\n")[1])
    parser.add_argument("submissions", type=Path, help="a folder with one sub-folder or .zip per student")
    parser.add_argument("--out", type=Path, required=True, help="where the reports and grades.csv go")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="students graded at once")
    parser.add_argument("--force", action="store_true", help="grade again students who already have a report")
    parser.add_argument("--student-timeout", type=float, default=300.0,
                        help="seconds one student's grading may take in all before it is stopped")
    add_grading_options(parser)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    try:
        students, skipped = list_students(args.submissions)
    except ValueError as error:
        print(f"grader batch: {error}", file=sys.stderr)
        return 2
    for name, why in skipped:
        print(f"grader batch: skipped {printable(name, keep_newlines=False)} ({why})", file=sys.stderr)
    from grader.sandbox import SandboxError, confinement

    try:
        sandbox = confinement(args.sandbox)
    except SandboxError as error:
        print(f"grader batch: {error}", file=sys.stderr)
        return 2
    if not sandbox.confined and args.sandbox != "none":
        print(f"grader batch: refusing to grade a class without a sandbox: {sandbox.detail}. Students' code "
              "could reach one another's; install bubblewrap, or pass --sandbox none to grade anyway "
              "(every report then says unsandboxed)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    todo = [s for s in students if args.force or not _graded(args.out, s)]
    if len(todo) < len(students):
        print(f"grader batch: {len(students) - len(todo)} of {len(students)} already graded in {args.out} "
              "(--force grades them again)", file=sys.stderr)
    try:
        _grade_all(todo, args)
    except LaneError as error:
        print(f"grader batch: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("grader batch: interrupted; what was graded is kept, run again to go on", file=sys.stderr)
        return 130
    write_gradebook(args.out, students)
    print(f"grader batch: {len(students)} students in {args.out / 'grades.csv'}", file=sys.stderr)
    return 0


# Lanes --------------------------------------------------------------------------------------


class LaneError(RuntimeError):
    """A lane could not start its sandbox: nothing can be graded."""


def _lane(connection: Connection, args: argparse.Namespace, cores: set[int] | None) -> None:
    """A judge process: one sandbox, then one student per message until told to stop.

    ``cores``: the CPUs this lane and everything it starts keep to (workers cannot change theirs),
    so that no student's threads take time from another lane's students; None shares them all.
    """
    from grader.__main__ import STAGES
    from grader.runner.confine import die_with_parent
    from grader.sandbox import Sandbox, SandboxError
    from grader.session import grade_each

    die_with_parent()
    if cores:
        os.sched_setaffinity(0, cores)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the coordinator decides when lanes stop
    try:
        sandbox = Sandbox(args.device, args.sandbox, many_students=True)
        sandbox.device  # noqa: B018 - fail here, once, if the zygote cannot start
    except SandboxError as error:
        connection.send(("fatal", str(error)))
        return
    connection.send(("ready", None))
    with sandbox:
        grade_each(sandbox, _staged_students(connection), lambda report: connection.send(("done", report)),
                   STAGES, args.visible_only, args.timeout)


def _staged_students(connection: Connection):
    """Each student the coordinator sends, read into memory; an unreadable one as an empty submission."""
    from grader.submission import StagedSubmission, SubmissionError, stage_submission

    while (student := connection.recv()) is not None:
        try:
            staged = stage_submission(student.source)
        except SubmissionError as error:
            staged = StagedSubmission(problem=str(error))
        except Exception as error:  # staging raises only SubmissionError: this is the last line of defence
            staged = StagedSubmission(problem=printable(f"{type(error).__name__}: {error}", keep_newlines=False))
        yield staged


@dataclass
class _Lane:
    process: multiprocessing.Process
    connection: Connection
    cores: set[int] | None
    student: Student | None = None
    started: float = 0.0


def lane_cores(count: int) -> list[set[int] | None]:
    """The CPUs of each of ``count`` lanes: one each while there are enough (a student's code then
    competes with its own judge only), else all of them for every lane."""
    available = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if count < 2 or count > len(available):
        return [None] * count
    return [{core} for core in available[:count]]


def _start_lanes(context, args, cores: list[set[int] | None]) -> list[_Lane]:
    """Start a lane on each of ``cores`` side by side (each imports torch in its zygote), then wait for all."""
    lanes = []
    for own in cores:
        ours, theirs = context.Pipe()
        process = context.Process(target=_lane, args=(theirs, args, own), daemon=True)
        process.start()
        theirs.close()
        lanes.append(_Lane(process, ours, own))
    for lane in lanes:
        kind, detail = lane.connection.recv() if lane.connection.poll(120) else ("fatal", "no answer in 120 s")
        if kind != "ready":
            for other in lanes:
                other.process.kill()
            raise LaneError(f"a grading lane could not start: {detail}")
    return lanes


def _grade_all(todo: list[Student], args: argparse.Namespace) -> None:
    if not todo:
        return
    import grader.session  # noqa: F401 - torch, pytest and the judge, imported once and shared by every fork

    context = multiprocessing.get_context("fork")
    lanes = _start_lanes(context, args, lane_cores(max(1, min(args.workers, len(todo)))))
    queue = list(todo)
    progress = Progress(len(todo))
    retried: set[str] = set()

    def finish(lane: _Lane, report: dict) -> None:
        """Write the report; a student whose grading the grader itself disrupted goes once more to the end of the queue."""
        student = lane.student
        _finish(lane, report, args, progress)
        if not report["complete"] and student.id not in retried:
            retried.add(student.id)
            queue.append(student)
            progress.expect_one_more()

    try:
        while queue or any(lane.student for lane in lanes):
            for lane in lanes:
                if lane.student is None and queue:
                    lane.student, lane.started = queue.pop(0), time.monotonic()
                    lane.connection.send(lane.student)
            busy = {lane.connection: lane for lane in lanes if lane.student}
            for connection in wait(list(busy), timeout=1.0):
                lane = busy[connection]
                try:
                    _, report = connection.recv()
                except (EOFError, OSError):
                    report = _failed_report(args, "the grader stopped while grading this submission")
                    lanes[lanes.index(lane)] = _restart(lane, context, args)
                finish(lane, report)
            for index, lane in enumerate(lanes):
                if lane.student and time.monotonic() - lane.started > args.student_timeout:
                    lanes[index] = _restart(lane, context, args)
                    finish(lane, _failed_report(args, f"grading stopped after {args.student_timeout:g} s"))
    finally:
        for lane in lanes:
            if lane.process.is_alive():
                if lane.student is None:
                    lane.connection.send(None)
                lane.process.join(timeout=5)
                lane.process.kill()
        progress.close()


def _restart(lane: _Lane, context, args) -> _Lane:
    lane.process.kill()
    lane.process.join()
    return _start_lanes(context, args, [lane.cores])[0]


def _finish(lane: _Lane, report: dict, args, progress: "Progress") -> None:
    """Write the student ``lane`` held (a lane being replaced still holds it), and free the lane."""
    from grader.report import render_text

    student = lane.student
    lane.student = None
    try:
        write_atomic(args.out / f"{student.id}.txt", render_text(report, student.id, color=False, student_facing=True) + "\n")
        write_atomic(_report_path(args.out, student), json.dumps(report, indent=2) + "\n")  # last: it means "graded"
    except OSError as error:  # one student's files, not the class: left ungraded, a later run tries again
        print(f"grader batch: cannot write the report of {student.id}, left ungraded: {error.strerror or error}",
              file=sys.stderr)
    progress.advance(student.id, report)


def _failed_report(args: argparse.Namespace, reason: str) -> dict:
    """A zero marked incomplete, for a submission whose grading did not finish: graded again next run."""
    from grader.__main__ import STAGES
    from grader.points import points_table
    from grader.report import INCOMPLETE, TITLES

    stages = [{"id": f"stage{n}", "title": TITLES[n], "score": 0,
               "max_score": sum(points_table()[f"stage{n}"].values()), "checks": []} for n in STAGES]
    return {"score": 0, "max_score": sum(s["max_score"] for s in stages), "device": args.device, "torch": "",
            "sandbox": "", "stages": stages, "flags": [f"{INCOMPLETE}: not graded: {reason}"], "complete": False}


# Output -------------------------------------------------------------------------------------


def _report_path(out: Path, student: Student) -> Path:
    return out / f"{student.id}.json"


def _saved_report(out: Path, student: Student) -> dict | None:
    """The report written for ``student``, or None if there is none that can be read."""
    try:
        report = json.loads(_report_path(out, student).read_text())
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) else None


def _graded(out: Path, student: Student) -> bool:
    """A report is there and the grader finished it (an older report without the field counts as finished)."""
    report = _saved_report(out, student)
    return report is not None and report.get("complete", True) is True


def write_atomic(path: Path, text: str) -> None:
    """Write a temporary file beside ``path``, then rename it: readers see all of it or none."""
    temporary = path.with_name(f".{path.name}.partial")
    try:
        with open(temporary, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)  # left only when writing failed


def write_gradebook(out: Path, students: list[Student]) -> None:
    """grades.csv from the reports on disk, in student order: the same reports give the same bytes."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for student in students:
        report = _saved_report(out, student)
        if report is None:
            writer.writerow(_inert([student.id, "", "", *[""] * STAGE_COUNT, "not graded"]))
            continue
        stages = {s["id"]: s["score"] for s in report["stages"]}
        writer.writerow(_inert([student.id, report["score"], report["max_score"],
                                *[stages.get(f"stage{n}", "") for n in range(1, STAGE_COUNT + 1)],
                                "; ".join(report["flags"])]))
    write_atomic(out / "grades.csv", buffer.getvalue())


def _inert(row: list) -> list:
    """``row`` with every text cell a spreadsheet would run as a formula quoted as text; numbers as they are."""
    return [f"'{cell}" if isinstance(cell, str) and cell.startswith(FORMULA_STARTS) else cell for cell in row]


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

    def advance(self, student_id: str, report: dict) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.set_postfix_str(f"{student_id}: {report['score']:g}/{report['max_score']:g}", refresh=False)
            self.bar.update()
        elif self.done == self.total or self.done % max(1, self.total // 10) == 0:
            elapsed = time.monotonic() - self.started
            rate = self.done / elapsed if elapsed else 0.0
            eta = (self.total - self.done) / rate if rate else 0.0
            print(f"grader batch: {self.done}/{self.total} graded, {rate:.1f}/s, ETA {eta:.0f} s",
                  file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
