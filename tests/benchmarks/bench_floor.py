"""The floor of make bench-batch: a class graded in ONE process, with no sandbox, no worker process and no IPC.

A measurement mode of the benchmarks alone, never offered for grading: nothing under grader/ imports this
module and no command line of the grader reaches it. `python -m tests.benchmarks.bench_floor CLASS OUT.json`
grades the student folders of CLASS one after another and writes their scores and timings to OUT.json.

It runs the real checks: grader.judge.session.grade_each, one pytest session for the class, one student after
another, as a batch lane does, with the references of solutions/ and the checks' own inputs and tolerances.
The seam is a stand-in for one student's workers, InProcessWorkers, put in place of
grader.sandbox.workers.LearnerWorkers in grader.judge.session for the floor's run alone (unittest.mock): no
grader module changes. Each of its "workers" (a stage, with the routes the real one would run without) imports
the student's stage file into this process (importlib, through the runner's own load_stage: fresh module objects
for every worker, the other stages as the runner's stand-ins), and each request runs the worker's own answer
(grader.runner.worker._answer: the probe of grader.runner.probes, the learner's call, the same error
description) here, then reads the answer as LearnerWorkers.request does.

What it leaves out, so that a floor grade can differ from the batch's (bench_batch prints how many agree):
- isolation of every kind: no zygote, fork, confinement, seccomp allowlist, socket or JSON. A request's
  arguments and its answer still go through the wire format's encode and decode in memory (the checks read its
  types: Foreign, a tensor's learner_device; and it copies them, so learner code cannot change the judge's
  inputs); the time that takes is counted apart (``wire_seconds``);
- torch's routes are never switched off (in a process that is for good, and the judge's references need them):
  code that calls torch's softmax or attention where it must not passes its shortcut checks here;
- time limits as LearnerWorkers sets them (a call's limit, a shorter one after a hang, not run after two hangs,
  the student's budget; a hang counted against every name a recipe calls), kept by a CPU-time timer in this
  process (ITIMER_PROF: pytest-timeout holds the wall-clock one) that raises FloorTimeout in the learner's code;
- os._exit in learner code raises FloorCrash instead (a crash, as the real worker's end is); a segfault, a fork
  bomb or memory exhaustion would end the floor: no such code is in bench_batch's class but its hostile-* students;
- no import guard, no capture of what learner code prints;
- hostile code: one process cannot survive a fork bomb, os._exit or a hang. A student folder named
  ``hostile-*`` (bench_batch's) is graded here as the clean solutions copy its code was planted into
  (tests.grading.learner_copy): the floor pays a correct submission's work for it, the batch the timeouts and
  crashes too.
"""

import json
import math
import os
import signal
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

from grader.core.stages import runner_stages
from grader.intake.submission import SubmissionFiles, read_submission
from grader.runner.implementation import SUBMISSION_PACKAGE, Implementation
from grader.runner.protocol import decode, encode
from grader.runner.route_names import SwitchedOff
from grader.runner.standins import install_stand_ins
from grader.runner.worker import _answer, _load
from grader.sandbox.printed import PrintedOutput
from grader.sandbox.workers import (
    HANGS_BEFORE_NOT_RUN,
    REPEAT_HANG_SECONDS,
    LearnerFailure,
    LearnerWorkers,
    Worker,
    told_failure,
)

HOSTILE_PREFIX = "hostile-"


class FloorTimeout(BaseException):
    """A call of learner code ran past its limit (a BaseException: `except Exception` in learner code lets it by)."""


class FloorCrash(BaseException):
    """Learner code called os._exit, which would end the floor's one process."""


def _exit(status: int = 0) -> None:
    raise FloorCrash(f"os._exit({status})")


def _ran_out(signum, frame) -> None:
    raise FloorTimeout("the call ran past its limit")


def within(limit: float, call, *args):
    """``call(*args)``, interrupted by FloorTimeout once it has used ``limit`` seconds of CPU; os._exit raises
    FloorCrash meanwhile."""
    previous, exit_ = signal.signal(signal.SIGPROF, _ran_out), os._exit
    os._exit = _exit
    signal.setitimer(signal.ITIMER_PROF, max(limit, 1e-3))
    try:
        return call(*args)
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)
        os._exit = exit_


def told_as(told: dict | None, kind: type[BaseException]) -> bool:
    """Whether the worker's description of a failure is the floor's own ``kind`` (FloorTimeout, FloorCrash)."""
    return isinstance(told, dict) and told.get("type") == kind.__name__


class FloorSandbox:
    """What grade_each and the checks read of a sandbox, for a grading with none: stage files go to a folder."""

    device = "cpu"
    alive = True
    switched_off = SwitchedOff()  # nothing: the floor switches no route off
    confinement = SimpleNamespace(confined=False, detail="none (the benchmark's floor)")
    isolation = "none: the benchmark's floor, one process, no sandbox, no workers"

    def __init__(self, scratch: Path):
        self.scratch = scratch
        self.students = 0

    def restart(self) -> None:
        pass

    def stage_files(self, files: dict[str, bytes]) -> Path:
        """A fresh folder holding ``files``, as the zygote writes a student's stage files for its workers."""
        self.students += 1
        folder = self.scratch / f"student-{self.students}"
        folder.mkdir(parents=True)
        for name, data in files.items():
            (folder / name).write_bytes(data)
        return folder


class Timings:
    """Seconds the floor's workers spent, summed over every student since reset()."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.imports = 0.0  # stand-ins installed and the learner's stage file imported
        self.calls = 0.0  # the worker's answer: probe, learner call (request sent to answer read, wire excluded)
        self.wire = 0.0  # encode and decode of the requests and answers, in memory
        self.requests = 0


TIMINGS = Timings()


def wire_copy(value: object) -> object:
    """``value`` as the other side of the wire reads it (no JSON, no socket); its time in TIMINGS.wire."""
    started = time.perf_counter()
    try:
        return decode(encode(value))
    finally:
        TIMINGS.wire += time.perf_counter() - started


class InProcessWorkers(LearnerWorkers):
    """LearnerWorkers' interface (what the checks and the plugin use), answered in this process: the floor's seam.

    No LearnerWorkers.__init__: nothing is started. Its source_line, out_of_time and import-error wording are
    inherited as they are."""

    def __init__(
        self,
        sandbox: FloorSandbox,
        files: dict[str, bytes],
        timeout: float,
        stages: list[int] | tuple = (),
        budget: float = math.inf,
        switched_off: dict[int, SwitchedOff] | None = None,
    ):
        self.sandbox = sandbox
        self.timeout, self.budget = timeout, budget
        self.spent, self.not_run = 0.0, 0
        self._files = files
        self._switched_off = switched_off or {}
        self.checked: SwitchedOff | None = None
        self.printed = PrintedOutput()
        self._folder = sandbox.stage_files(files)
        self._loaded: dict[Worker, tuple[Implementation | None, dict | None]] = {}
        self._hung: dict[tuple[int, object, bool], int] = {}
        for stage in stages:  # as the real ones are forked up front, each importing its stage file
            self._load(self._own(stage))

    def _load(self, worker: Worker) -> tuple[Implementation | None, dict | None]:
        """The worker's stage imported afresh, the other stages as stand-ins, as a forked worker has them."""
        stage = worker[0]
        started = time.perf_counter()
        modules = {number: entry["module"] for number, entry in runner_stages().items()}
        for name in [SUBMISSION_PACKAGE, *(f"{SUBMISSION_PACKAGE}.{m}" for m in modules.values()), *modules.values()]:
            sys.modules.pop(name, None)  # a forked worker has none of another's modules
        install_stand_ins(stage, runner_stages())
        self._loaded[worker] = within(self.timeout, _load, self._folder, stage, modules)
        TIMINGS.imports += time.perf_counter() - started
        return self._loaded[worker]

    def request(
        self,
        stage: int,
        op: str,
        timeout: float | None = None,
        switched_off: SwitchedOff | None = None,
        calls: tuple[str, ...] = (),
        **params,
    ) -> object:
        named = params.get("function", params.get("cls"))
        by_book = named is None
        suspects = [(stage, name, by_book) for name in (calls or (named,))]
        if any(self._hung.get(key, 0) >= HANGS_BEFORE_NOT_RUN for key in suspects):
            raise LearnerFailure("timeout", f"not run: no answer in {HANGS_BEFORE_NOT_RUN} calls already")
        limit = min(
            timeout or self.timeout, REPEAT_HANG_SECONDS if any(s in self._hung for s in suspects) else math.inf
        )
        switched_off = switched_off or self.checked
        worker = self._own(stage) if switched_off is None else (stage, switched_off)
        implementation, import_error = self._loaded[worker] if worker in self._loaded else self._load(worker)
        if told_as(import_error, FloorTimeout):
            raise LearnerFailure("timeout", f"importing your file did not finish within {self.timeout:g} s")
        limit = self._within_budget(limit)
        sent = wire_copy({"op": op, "params": params})
        started = time.perf_counter()
        if import_error is not None:
            answer = {"error": import_error}
        else:
            answer = within(limit, _answer, implementation, self.sandbox.device, sent, self._folder)
        seconds = time.perf_counter() - started
        TIMINGS.calls += seconds
        TIMINGS.requests += 1
        self.spent += seconds
        if told_as(answer.get("error"), FloorCrash):
            self._loaded.pop(worker, None)  # as a crashed worker is discarded
            raise LearnerFailure("crash", "the process running your code stopped without answering")
        if told_as(answer.get("error"), FloorTimeout):
            self._loaded.pop(worker, None)  # as a hung worker is discarded
            for suspect in suspects:
                self._hung[suspect] = self._hung.get(suspect, 0) + 1
            raise LearnerFailure("timeout", f"your code gave no answer within {limit:g} s")
        reply = wire_copy(answer)
        assert isinstance(reply, dict)
        if "error" in reply:  # as LearnerWorkers.request reads it
            failure = replace(told_failure(reply["error"]), called=named)
            raise self._encoding_told(failure, stage) if failure.kind == "import_error" else failure
        return reply["ok"]

    def start_afresh(self, stage: int) -> None:
        self._loaded.pop(self._own(stage), None)

    def close(self) -> None:
        self._loaded.clear()


def floor_class(submissions: Path, scratch: Path) -> list[Path]:
    """The student folders of ``submissions`` the floor grades: a hostile one as its clean solutions copy."""
    from tests.grading import learner_copy

    folders = []
    for folder in sorted(p for p in submissions.iterdir() if p.is_dir()):
        if folder.name.startswith(HOSTILE_PREFIX):
            folder = learner_copy(scratch / "clean" / folder.name)
        folders.append(folder)
    return folders


def batch_options(submissions: Path):
    """The GradingOptions `python -m grader batch SUBMISSIONS` grades with (its defaults), on the CPU."""
    from grader.cli.batch import parse
    from grader.cli.options import grading_options

    args = parse([str(submissions), "--out", str(submissions.parent / "unused")])
    return replace(grading_options(args, args.course, points_file=args.points), device="cpu")


def grade_floor(submissions: Path) -> dict:
    """Grade the class of ``submissions`` in this process: scores by student folder name, and the timings (the
    first student's seconds include pytest's collection)."""
    from grader.judge import session

    with tempfile.TemporaryDirectory(prefix="bench-floor-") as scratch:
        folders = floor_class(submissions, Path(scratch))
        options = batch_options(submissions)
        names: list[str] = []
        scores: dict[str, float] = {}
        each: dict[str, dict[str, float]] = {}  # per student: seconds from read to report, and the workers' parts
        began: list[tuple[float, float, float, float]] = []

        def students():
            for folder in folders:  # read as the batch's coordinator reads them
                names.append(folder.name)
                began.append((time.perf_counter(), TIMINGS.imports, TIMINGS.calls, TIMINGS.wire))
                try:
                    yield read_submission(folder)
                except Exception as error:
                    yield SubmissionFiles(problem=str(error))

        def deliver(report) -> None:
            name = names[len(scores)]
            scores[name] = report["score"]
            at, imports, calls, wire = began[-1]
            each[name] = {
                "seconds": time.perf_counter() - at,
                "import_seconds": TIMINGS.imports - imports,
                "call_seconds": TIMINGS.calls - calls,
                "wire_seconds": TIMINGS.wire - wire,
            }

        TIMINGS.reset()
        dont_write = sys.dont_write_bytecode
        sys.dont_write_bytecode = True  # as the workers (PYTHONDONTWRITEBYTECODE)
        started, cpu = time.perf_counter(), time.process_time()
        try:
            with mock.patch.object(session, "LearnerWorkers", InProcessWorkers):
                session.grade_each(FloorSandbox(Path(scratch)), students(), deliver, options)
        finally:
            sys.dont_write_bytecode = dont_write
        return {
            "grading_seconds": time.perf_counter() - started,
            "cpu_seconds": time.process_time() - cpu,
            "import_seconds": TIMINGS.imports,
            "call_seconds": TIMINGS.calls,
            "wire_seconds": TIMINGS.wire,
            "requests": TIMINGS.requests,
            "scores": scores,
            "students": each,
        }


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit("usage: python -m tests.benchmarks.bench_floor CLASS_FOLDER OUT.json")
    found = grade_floor(Path(sys.argv[1]))  # torch and the judge imported above, as each lane does once
    Path(sys.argv[2]).write_text(json.dumps(found, indent=1))


if __name__ == "__main__":
    main()
