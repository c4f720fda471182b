"""Lanes: judge processes forked from the batch, each with its own sandbox (one torch-preloaded zygote),
grading one student at a time as the coordinator sends their staged files (never a path). A class pays
the torch import once per lane, not once per student; the coordinator alone writes what lanes report."""

import datetime as dt
import multiprocessing
import os
import signal
import sys
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, cast

from grader.classroom.fingerprint import RunFingerprint
from grader.classroom.gradebook import late_of
from grader.classroom.history import keep_in_history
from grader.classroom.outputs import write_feedback, write_report
from grader.classroom.plan import read_student
from grader.classroom.progress import Progress
from grader.core.late_policy import LatePolicy
from grader.core.options import ClassOptions, GradingOptions
from grader.core.report import Report, failed
from grader.intake.students import Student
from grader.sandbox.lane_bounds import lane_memory_bytes


class LaneError(RuntimeError):
    """A lane could not start its sandbox: nothing can be graded."""


def _lane(connection: Connection, options: GradingOptions, cores: set[int] | None, number: int, memory: int) -> None:
    """A judge process: one sandbox, then one student per message until told to stop.

    ``cores``: the CPUs this lane and everything it starts keep to (workers cannot change theirs),
    so that no student's threads take time from another lane's students; None shares them all. ``number``:
    which lane this is: its workers run as a uid of their own. ``memory``: the bytes its processes may hold
    together, where the kernel keeps such a bound (grader.sandbox.lane_bounds).
    """
    from grader.judge.routes_off import SWITCHED_OFF_EVERYWHERE
    from grader.judge.session import grade_each
    from grader.runner.confine import die_with_parent
    from grader.sandbox.zygote import Sandbox, SandboxError

    die_with_parent()
    if cores:
        os.sched_setaffinity(0, cores)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the coordinator decides when lanes stop
    try:
        sandbox = Sandbox(
            options.device,
            options.sandbox,
            many_students=True,
            lane=number,
            lane_memory=memory,
            switched_off=SWITCHED_OFF_EVERYWHERE,
        )
        sandbox.device  # noqa: B018 - fail here, once, if the zygote cannot start
    except SandboxError as error:
        connection.send(("fatal", str(error)))
        return
    connection.send(("ready", None))
    with sandbox:  # each student as the coordinator staged them, until it sends None
        grade_each(sandbox, iter(connection.recv, None), lambda report: connection.send(("done", report)), options)


@dataclass
class _Lane:
    process: multiprocessing.Process
    connection: Connection
    cores: set[int] | None
    number: int
    memory: int  # bytes the lane's processes may hold together
    student: Student | None = None
    started: float = 0.0
    fingerprint: dict | None = None  # of the files the lane was sent for ``student``


def lane_cores(count: int) -> list[set[int] | None]:
    """The CPUs of each of ``count`` lanes: one each while there are enough (a student's code then
    competes with its own judge only), else all of them for every lane."""
    available = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if count < 2 or count > len(available):
        return [None] * count
    return [{core} for core in available[:count]]


def _start_lanes(
    context: Any, options: GradingOptions, cores: list[set[int] | None], memory: int, numbers: list[int] | None = None
) -> list[_Lane]:
    """Start a lane on each of ``cores`` side by side (each imports torch in its zygote), then wait for all;
    ``memory``: each lane's bound; ``numbers``: which lanes they are (0, 1, ... unless given)."""
    lanes = []
    for own, number in zip(cores, numbers or range(len(cores))):
        ours, theirs = context.Pipe()
        process = context.Process(target=_lane, args=(theirs, options, own, number, memory), daemon=True)
        process.start()
        theirs.close()
        lanes.append(_Lane(process, ours, own, number, memory))
    for lane in lanes:
        kind, detail = lane.connection.recv() if lane.connection.poll(120) else ("fatal", "no answer in 120 s")
        if kind != "ready":
            for other in lanes:
                other.process.kill()
            raise LaneError(f"a grading lane could not start: {detail}")
    return lanes


def grade_all(
    todo: list[Student],
    options: ClassOptions,
    out: Path,
    run: RunFingerprint,
    current: dict[str, dict],
    policy: LatePolicy,
) -> None:
    """Grade ``todo``, reading each student in again as a lane takes them: a report's fingerprint is that of
    the very files graded, which ``current`` then holds."""
    if not todo:
        return
    import grader.judge.session  # noqa: F401 - torch, pytest and the judge, imported once and shared by every fork

    grading = options.grading

    context = multiprocessing.get_context("fork")
    count = max(1, min(options.workers, len(todo)))
    lanes = _start_lanes(context, grading, lane_cores(count), options.lane_memory or lane_memory_bytes(count))
    queue = list(todo)
    progress = Progress(len(todo))
    retried: set[str] = set()

    def finish(lane: _Lane, report: Report) -> None:
        """Write the report; a student whose grading the grader itself disrupted goes once more to the end of
        the queue."""
        student = _held(lane)
        report["fingerprint"] = lane.fingerprint or {}  # set with the student it was sent
        report["graded_at"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        report["late"] = late_of(policy, student, report)
        _finish(lane, report, out, progress)
        if not report["complete"] and student.id not in retried:
            retried.add(student.id)
            queue.append(student)
            progress.expect_one_more()

    try:
        while queue or any(lane.student for lane in lanes):
            for lane in lanes:
                if lane.student is None and queue:
                    lane.student = queue.pop(0)
                    staged = read_student(lane.student)
                    lane.fingerprint = current[lane.student.id] = run.of(staged)
                    lane.started = time.monotonic()
                    lane.connection.send(staged)
            busy = {lane.connection: lane for lane in lanes if lane.student}
            for ready in wait(list(busy), timeout=1.0):
                lane = busy[cast(Connection, ready)]
                try:
                    _, report = cast(tuple[str, Report], lane.connection.recv())
                except (EOFError, OSError):
                    report = failed(
                        list(grading.stages),
                        grading.points,
                        grading.device,
                        "the grader stopped while grading this submission",
                        grading.extra_credit,
                    )
                    lanes[lanes.index(lane)] = _restart(lane, context, grading)
                finish(lane, report)
            for index, lane in enumerate(lanes):
                if lane.student and time.monotonic() - lane.started > options.student_timeout:
                    lanes[index] = _restart(lane, context, grading)
                    finish(
                        lane,
                        failed(
                            list(grading.stages),
                            grading.points,
                            grading.device,
                            f"grading stopped after {options.student_timeout:g} s",
                            grading.extra_credit,
                        ),
                    )
    finally:
        for lane in lanes:
            if lane.process.is_alive():
                if lane.student is None:
                    lane.connection.send(None)
                lane.process.join(timeout=5)
                lane.process.kill()
        progress.close()


def _restart(lane: _Lane, context: Any, options: GradingOptions) -> _Lane:
    lane.process.kill()
    lane.process.join()
    return _start_lanes(context, options, [lane.cores], lane.memory, [lane.number])[0]


def _finish(lane: _Lane, report: Report, out: Path, progress: Progress) -> None:
    """Write the student ``lane`` held (a lane being replaced still holds it), and free the lane."""
    student = _held(lane)
    lane.student = None
    try:
        write_feedback(out, student, report)
        write_report(out, student, report)  # last but history: it means "graded"
        keep_in_history(out, student, report)
    except OSError as error:  # one student's files, not the class: left ungraded, a later run tries again
        print(
            f"grader batch: cannot write the report of {student.id}, left ungraded: {error.strerror or error}",
            file=sys.stderr,
        )
    progress.advance(student.id, report)


def _held(lane: _Lane) -> Student:
    """The student ``lane`` is grading: every report a lane hands back is of the student it was given."""
    if lane.student is None:
        raise RuntimeError(f"lane {lane.number} gave back a report while holding no student")
    return lane.student
