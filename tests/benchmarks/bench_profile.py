"""make bench-profile: where the time of one student's grading goes, with the real batch grader, every defence on.

Runs one batch lane in this process, as grader.classroom.lanes._lane does (a Sandbox for many students with
torch's attention switched off in its zygote, then grade_each), on three students: a correct one that warms the
lane (a lane's first student pays for pytest's collection), then the profiled student twice (--student correct,
wrong or stub; default correct): the first time under the timers below, the second under cProfile (which slows
the judge's Python, so its figures are kept out of the table). Then the same student through the floor
(tests/benchmarks/bench_floor.py) in this process, after a warm-up student there too.

Measured, from the judge's side, by timers wrapped around the judge's own methods in this process only (no
grader module changes): the student switch (LearnerWorkers.__init__: the zygote ends the previous student and
forks this one's first process, the workers' forks are asked for), a worker's fork to its "ready" (fork,
confinement, seccomp allowlist, Landlock or bubblewrap's namespaces: one figure, measured together), the import
of the learner's file in each worker (from "ready" to "loaded": stand-ins, routes switched off, the import),
the request round trips, the lane's kernel memory checks, each check's body (pytest_runtest_call, the
judge's references and comparisons and the diagnosis with it), each check's whole pytest protocol, and the end.
Estimated: of a request's round trip, the learner's call and the probe around it are taken to cost what the
floor's in-process answer to the same student's requests costs (its wire format time left out); the rest (encode
and decode, JSON, socket, the worker's loop and print capture, scheduling) is counted as IPC. Lane start-up and pytest's collection are paid once a
lane, not per student, and are shown apart.
"""

import argparse
import cProfile
import io
import os
import pstats
import shutil
import tempfile
import time
from collections import defaultdict
from contextlib import ExitStack
from pathlib import Path
from unittest import mock

import pytest

from grader.judge import session
from grader.judge.routes_off import SWITCHED_OFF_EVERYWHERE
from grader.sandbox import workers
from grader.sandbox.workers import LearnerWorkers
from grader.sandbox.zygote import Sandbox
from tests.benchmarks.bench_floor import batch_options, grade_floor
from tests.grading import MUTANTS, learner_copy

REPO = Path(__file__).resolve().parents[2]
TOP_FUNCTIONS = 8  # of cProfile's list, by time in the function itself


class Clock:
    """Seconds spent in each wrapped call, while ``on``; ``inside`` says which wrapped calls are under way."""

    def __init__(self) -> None:
        self.on = False
        self.seconds: dict[str, float] = defaultdict(float)
        self.inside: set[str] = set()

    def timed(self, key, function):
        """``function``, adding its seconds to ``key`` (a name, or a function of the calls under way that gives
        one, or None for not counted)."""

        def wrapper(*args, **kwargs):
            name = key(self.inside) if callable(key) else key
            own = name not in self.inside
            self.inside.add(name)
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                if own:
                    self.inside.discard(name)
                    if self.on and name is not None:
                        self.seconds[name] += time.perf_counter() - started

        return wrapper


class Checks:
    """A pytest plugin: each check's whole protocol, and its body (the call phase, the conftest's wrapper in it)."""

    def __init__(self, clock: Clock):
        self.clock = clock

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        return (yield from self._timed("item"))

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item):
        return (yield from self._timed("check"))

    def _timed(self, name: str):
        self.clock.inside.add(name)
        started = time.perf_counter()
        try:
            return (yield)
        finally:
            self.clock.inside.discard(name)
            if self.clock.on:
                self.clock.seconds[name] += time.perf_counter() - started


def instrument(clock: Clock, stack: ExitStack) -> None:
    """Wrap the judge's methods with ``clock``'s timers, for as long as ``stack`` is open."""

    def patch(owner, name: str, key) -> None:
        stack.enter_context(mock.patch.object(owner, name, clock.timed(key, getattr(owner, name))))

    patch(LearnerWorkers, "__init__", "start")
    patch(LearnerWorkers, "close", "end")
    patch(LearnerWorkers, "request", lambda inside: "request in check" if "check" in inside else "request")
    patch(LearnerWorkers, "_fork", "fork")
    patch(workers, "receive", lambda inside: "ready" if "fork" in inside and "import" not in inside else None)
    patch(LearnerWorkers, "_answer", lambda inside: "import" if "fork" in inside else "reply")
    patch(workers, "send", "send")
    patch(Sandbox, "keep_kernel_memory_down", "kernel")
    run_checks = session.run_checks
    plugin = Checks(clock)
    stack.enter_context(
        mock.patch.object(
            session, "run_checks", lambda grading, plugins: run_checks(grading, plugins=[*plugins, plugin])
        )
    )


def make_students(root: Path, kind: str) -> tuple[Path, Path]:
    """A warm-up student (correct) and the profiled one, as bench_batch writes them."""
    warm = learner_copy(root / "1-warm")  # graded first, by the floor too (it grades in name order)
    target = root / "2-target"
    if kind == "stub":
        shutil.copytree(REPO / "exercises", target, ignore=shutil.ignore_patterns("__pycache__"))
    else:
        learner_copy(target, MUTANTS[0] if kind == "wrong" else None)
    return warm, target


def profile_lane(warm: Path, target: Path) -> tuple[dict[str, float], float, float, cProfile.Profile]:
    """The clock's seconds for ``target``'s grading in a lane, its whole seconds, the seconds the lane's sandbox
    took to start, and cProfile's record of a second grading of ``target``. On one core, as a batch's lane is
    where there are as many cores as lanes (grader.classroom.lanes.lane_cores)."""
    from grader.intake.submission import read_submission

    options = batch_options(warm.parent)
    clock, profiler = Clock(), cProfile.Profile()
    marks: dict[str, float] = {}
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    started = time.perf_counter()
    sandbox = Sandbox(options.device, options.sandbox, many_students=True, switched_off=SWITCHED_OFF_EVERYWHERE)
    sandbox.device  # noqa: B018 - the zygote up, torch imported there
    marks["sandbox"] = time.perf_counter() - started

    def students():
        yield read_submission(warm)
        marks["target"] = time.perf_counter()
        clock.on = True
        yield read_submission(target)
        profiler.enable()
        yield read_submission(target)

    reports: list[dict] = []

    def deliver(report) -> None:
        reports.append(report)
        if len(reports) == 2:
            clock.on = False
            marks["total"] = time.perf_counter() - marks["target"]
        else:
            profiler.disable()

    with ExitStack() as stack, sandbox:
        instrument(clock, stack)
        session.grade_each(sandbox, students(), deliver, options)
    print(f"sandbox: {sandbox.isolation}")
    print(f"scores: warm-up {reports[0]['score']}, profiled {reports[1]['score']} and {reports[2]['score']}")
    return dict(clock.seconds), marks["total"], marks["sandbox"], profiler


def table(seconds: dict[str, float], total: float, floor: dict[str, float]) -> list[tuple[str, float, str]]:
    """(category, seconds, measured or estimated), adding up to ``total``."""
    get = defaultdict(float, seconds)
    requests = get["request"] + get["request in check"]
    round_trips = get["reply"] + get["send"]
    calls = min(floor["call_seconds"], round_trips)
    return [
        ("student switch: previous one ended, first process forked", get["start"], "measured"),
        ("worker start: fork to ready (confinement, seccomp allowlist)", get["fork"] - get["import"], "measured"),
        ("learner file imports in the workers (stand-ins, routes off)", get["import"], "measured"),
        ("requests: learner calls and probes (the floor's time for them)", calls, "estimated"),
        ("requests: IPC: wire format, JSON, socket, worker loop, capture", round_trips - calls, "estimated"),
        ("requests: kernel memory checks of the lane", get["kernel"], "measured"),
        (
            "requests: judge's bookkeeping (limits, budget)",
            requests - get["fork"] - round_trips - get["kernel"],
            "measured",
        ),
        (
            "judge's own check work (references, comparisons, diagnosis)",
            get["check"] - get["request in check"],
            "measured",
        ),
        (
            "pytest per check (setup, teardown, hooks, verdicts)",
            get["item"] - get["check"] - get["request"],
            "measured",
        ),
        ("student end (sockets closed, end sent)", get["end"], "measured"),
        ("report, voiding, the loop", total - get["start"] - get["item"] - get["end"], "measured"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_profile")
    parser.add_argument("--student", choices=("correct", "wrong", "stub"), default="correct")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-profile-") as scratch:
        warm, target = make_students(Path(scratch) / "class", args.student)
        seconds, total, lane_start, profiler = profile_lane(warm, target)
        floor = grade_floor(warm.parent)["students"][target.name]
    print(
        f"\nwhere one {args.student} student's grading goes in a batch lane ({total:.2f} s, the floor's {floor['seconds']:.2f} s):"
    )
    rows = table(seconds, total, floor)
    print(f"  {'category':<68} {'seconds':>8} {'share':>6}")
    for category, spent, how in rows:
        print(f"  {category:<68} {spent:8.3f} {spent / total:6.1%}  {how}")
    print(f"  {'total':<68} {sum(s for _, s, _ in rows):8.3f} {1:6.1%}")
    print(
        f"once a lane, not per student: sandbox up (zygote, torch imported there) {lane_start:.2f} s; "
        f"in the floor, the same student's learner imports {floor['import_seconds']:.3f} s, "
        f"calls {floor['call_seconds']:.3f} s, wire format in memory {floor['wire_seconds']:.3f} s"
    )
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(TOP_FUNCTIONS)
    listed = out.getvalue().split("\n")
    start = next((n for n, line in enumerate(listed) if line.lstrip().startswith("ncalls")), 0)
    print(f"cProfile of the judge, the student graded again, top {TOP_FUNCTIONS} by own time:")
    print("\n".join(line for line in listed[start:] if line.strip()))


if __name__ == "__main__":
    main()
