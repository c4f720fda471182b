"""The judge's handle on one student's code: a worker per stage in the sandbox, requests with time limits.

Learner code never runs in this process. Each worker is forked with a socket made here, for this
student and stage: nothing a worker says decides who it is. Requests go over that socket; answers
are decoded safely and must arrive whole within their time limit (grader.runner.protocol). A
worker that dies or hangs is discarded and the next request forks a fresh one, so a crash costs
only the check that caused it. The workers of the stages to be graded are forked up front, so
that each imports its file while the judge works on the stages before. close() has the zygote end
the student: every process that ran their code, at once. What the learner's code prints arrives
before each answer and is kept in ``printed`` for the report, never for a verdict.
"""

import codecs
import itertools
import math
import socket
import time
from dataclasses import asdict, dataclass, replace

from grader.core.stages import STAGE_MODULES
from grader.runner.commands import send_command
from grader.runner.protocol import ProtocolError, receive, send
from grader.runner.route_names import SwitchedOff
from grader.sandbox.printed import PrintedOutput
from grader.sandbox.zygote import Sandbox, SandboxError

# From fork to "ready" (before any learner code runs): the fork and the worker's own set-up, on
# a busy machine. The import of the learner's file then has the per-call limit.
WORKER_READY_SECONDS = 60.0
# After a hang, the next call of the same function (or class) gets a short limit: a correct call takes
# milliseconds. A second hang is taken as the function's way (a loop that never ends whatever the inputs),
# and its later calls are not run: a function that hangs everywhere costs 1.25 s, and the stage's other
# functions keep the full limit. A recipe (the book's code) calls several of the stage's functions under one
# limit: its hang is the function it was in (the worker names each as the recipe calls it), and counts for
# the recipes that call that function, not for the function's own calls, which a slow recipe proves nothing of.
REPEAT_HANG_SECONDS = 0.25
HANGS_BEFORE_NOT_RUN = 2
# How often, in seconds of a student's calls, the judge looks at the kernel memory the lane holds: a correct
# submission's calls take about a second in all, a student who fills the kernel's caches 30.
KERNEL_CHECK_SECONDS = 0.25


Worker = tuple[int, SwitchedOff]  # a stage, and the routes its worker runs without


LEARNER_FAILURE_KINDS = (
    "not_implemented",
    "import_error",
    "exception",
    "memory",
    "crash",
    "timeout",
    "forbidden_import",
)


@dataclass
class LearnerFailure(Exception):
    """Learner code did not answer normally: kind is not_implemented, import_error, exception,
    memory, crash, timeout or forbidden_import."""

    kind: str
    message: str
    type: str | None = None
    where: str | None = None
    called: str | None = None  # the judge's own record of the public name its request called, where it named one
    during: str | None = None  # the judge's own words for the call that raised, where the check set them

    def __str__(self) -> str:
        where = f" ({self.where})" if self.where else ""
        kind = f"{self.type}: " if self.type else ""
        return f"{kind}{self.message}{where}"

    def raised_words(self) -> str:
        """What a learner reads of an exception: the error, its line, and the judge's call that raised it."""
        during = f"\nthe call that raised: {self.during}" if self.during else ""
        return f"your code raised {self}{during}"


def told_failure(told: object) -> LearnerFailure:
    """What a worker said of its code's failure, as the judge keeps it. Strings were cut and escaped as they
    were decoded (protocol.decode): cut again to the report's sizes. A kind the judge does not know is an
    exception."""
    told = told if isinstance(told, dict) else {}
    return LearnerFailure(
        kind=told["kind"] if told.get("kind") in LEARNER_FAILURE_KINDS else "exception",
        message=str(told.get("message", ""))[:800],
        type=told["type"][:100] if isinstance(told.get("type"), str) else None,
        where=told["where"][:200] if isinstance(told.get("where"), str) else None,
    )


def not_utf8_text(data: bytes) -> str | None:
    """What shows that ``data``, a Python file's bytes, was saved as something other than UTF-8 text (a
    UTF-16 byte order mark, NUL bytes), in words that end "...: save it as UTF-8 text"; None if nothing does."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "was saved as UTF-16 text (it begins with UTF-16's byte order mark), which Python does not read"
    if b"\0" in data:
        return "holds NUL bytes (as text saved as UTF-16 does), which Python does not read"
    return None


class LearnerWorkers:
    """One student's workers in ``sandbox``: those of ``stages`` forked at once, any other on first use;
    close() ends them all."""

    def __init__(
        self,
        sandbox: Sandbox,
        files: dict[str, bytes],
        timeout: float,
        stages: list[int] | tuple = (),
        budget: float = math.inf,
        switched_off: dict[int, SwitchedOff] | None = None,
    ):
        """``files``: the student's stage files by name (grader.intake.submission.SubmissionFiles.files);
        ``timeout``: seconds one call may take; ``budget``: seconds all of them, imports included, may take
        together: each call's limit shrinks to what is left, and once none is, calls are not run;
        ``switched_off``: the routes each stage's own worker runs without, where none of its checks needs them."""
        self.sandbox = sandbox
        self.timeout = timeout
        self.budget = budget
        self.spent = 0.0  # seconds of the budget used, from request sent to answer received
        self.not_run = 0  # calls refused for want of budget
        self._kernel_checked = 0.0  # self.spent when the lane's kernel memory was last looked at
        self._files = files
        self._student = sandbox.start_student(files)
        self._memory_kills = sandbox.memory_kills()  # kills in the lane before this student's code ran
        # A worker is a stage, run with some of torch's routes switched off or none (grader.runner.routes).
        self._workers: dict[Worker, socket.socket] = {}  # loaded (or failed to)
        self._forked: dict[Worker, socket.socket] = {}  # not yet asked for
        self._numbers: dict[Worker, int] = {}  # how the student's first process knows each
        self._count = itertools.count(1)
        # (stage, function or class, in the book's code) -> how many calls hung
        self._hung: dict[tuple[int, object, bool], int] = {}
        self._hung_at_import: set[int] = set()  # stages whose file hung at import: no other worker imports it
        self._calling: object = None  # the public name the current recipe said it was calling last
        self._switched_off = switched_off or {}
        # What the current check's calls run without, where its target has routes of its own (the plugin sets it)
        self.checked: SwitchedOff | None = None
        self.printed = PrintedOutput()  # what the current check's calls printed: the plugin resets it
        for stage in stages:
            self._start(self._own(stage))

    def request(
        self,
        stage: int,
        op: str,
        timeout: float | None = None,
        switched_off: SwitchedOff | None = None,
        calls: tuple[str, ...] = (),
        **params,
    ) -> object:
        """Run probe ``op`` in the worker of ``stage`` that runs without the routes ``switched_off``
        (grader.runner.routes; None: those of the current check, else the stage's own worker); its result, or
        LearnerFailure. ``calls``: the public names a recipe calls (document_values.toml's `uses`), each of
        which its hang may be the hang of; a call of ``function`` or ``cls`` calls that one."""
        named = params.get("function", params.get("cls"))
        # A name hangs in the book's code (a recipe: no function of its own) or when called alone, each counted
        # apart: many calls of a recipe share one limit, so a slow one there proves no hang of the name alone.
        by_book = named is None
        suspects = [(stage, name, by_book) for name in (calls or (named,))]  # name None: a recipe's, unknown
        if stuck := [key for key in suspects if self._hung.get(key, 0) >= HANGS_BEFORE_NOT_RUN]:
            name = stuck[0][1]
            what = f"the book's code that calls {name}" if by_book and name else name or f"stage {stage}'s code"
            raise LearnerFailure(
                "timeout",
                f"not run: {what} gave no answer in {HANGS_BEFORE_NOT_RUN} calls already (within "
                f"{self.timeout:g} s, then {REPEAT_HANG_SECONDS:g} s)",
            )
        hung_before = any(s in self._hung for s in suspects)
        limit = min(timeout or self.timeout, REPEAT_HANG_SECONDS if hung_before else math.inf)
        switched_off = switched_off or self.checked
        worker = self._own(stage) if switched_off is None else (stage, switched_off)
        sock = self._worker(worker)
        limit = self._within_budget(limit)
        started = time.monotonic()
        self._calling = None
        try:
            send(sock, {"op": op, "params": params})
            reply = self._answer(sock, limit)
        except TimeoutError:
            self._discard(worker)
            # Of a recipe's names, the worker says which it was in; where it names none of them (it always does
            # unless the learner's code tampers with it) every one is taken to have hung: it can only lose.
            hung = [(stage, self._calling, by_book)] if (stage, self._calling, by_book) in suspects else suspects
            for suspect in hung:
                self._hung[suspect] = self._hung.get(suspect, 0) + 1
            what = f"{hung[0][1]}, called by the book's code," if calls and len(hung) == 1 else "your code"
            raise LearnerFailure(
                "timeout", f"{what} gave no answer within {limit:g} s{self._cut_short(limit)}"
            ) from None
        except ProtocolError as error:
            self._discard(worker)
            raise LearnerFailure(
                "crash", f"the process running your code sent an answer the grader refuses ({error})"
            ) from None
        except (ConnectionError, OSError):
            self._discard(worker)
            raise self._stopped("without answering") from None
        finally:
            self.spent += time.monotonic() - started
            self._keep_kernel_memory_down()
        if not isinstance(reply, dict) or not ({"ok", "error"} & reply.keys()):
            self._discard(worker)
            raise LearnerFailure("crash", "the process running your code sent a malformed answer")
        if "error" in reply:
            failure = replace(told_failure(reply["error"]), called=named)
            raise self._encoding_told(failure, stage) if failure.kind == "import_error" else failure
        if isinstance(reply["ok"], dict) and isinstance(reply.get("device_fallback"), dict):
            # The learner's side says its code failed on the GPU and answered from the CPU: it can only cost
            # the note that reads it (note.fixed_device), never earn a point.
            on_gpu = told_failure(reply["device_fallback"])
            reply["ok"]["device_fallback"] = str(replace(on_gpu, message=on_gpu.message[:400]))
        return reply["ok"]

    @property
    def out_of_time(self) -> bool:
        """Whether the budget ran out: some calls got less than their limit, or were not run."""
        return self.spent >= self.budget

    def _within_budget(self, limit: float) -> float:
        """``limit``, cut to the budget left; LearnerFailure when none is."""
        left = self.budget - self.spent
        if left <= 0:
            self.not_run += 1
            raise LearnerFailure("timeout", f"not run: your code has used up its {self.budget:g} s for all calls")
        return min(limit, left)

    def _cut_short(self, limit: float) -> str:
        return (
            f", all that was left of its {self.budget:g} s for all calls"
            if limit < self.timeout and (self.spent + limit >= self.budget)
            else ""
        )

    def source_line(self, where: str | None) -> str:
        """The stripped text of the line ``where`` ("file.py:12") names in the judge's own copy of the student's
        files; "" where there is none."""
        name, _, line = (where or "").partition(":")
        lines = self._files.get(name, b"").decode("utf-8", "replace").splitlines()
        return lines[int(line) - 1].strip() if line.isdigit() and 0 < int(line) <= len(lines) else ""

    def _encoding_told(self, failure: LearnerFailure, stage: int) -> LearnerFailure:
        """``failure`` to import, said in plain words where the file it names (else the stage's own),
        as the judge holds it, is no UTF-8 text: Python's own words ("null bytes") do not say what to do."""
        named = (failure.where or "").partition(":")[0]
        name = named if named in self._files else f"{STAGE_MODULES.get(stage)}.py"
        if (problem := not_utf8_text(self._files.get(name, b""))) is None:
            return failure
        return LearnerFailure(
            "import_error",
            f"{name} {problem}: save it as UTF-8 text (in Notepad: Save As, Encoding UTF-8), then hand it in again",
        )

    def _answer(self, sock: socket.socket, seconds: float) -> object:
        """The worker's next message that is not printed output, within ``seconds``; the printed
        output and warnings on the way are kept, so that what came before a hang is kept too."""
        deadline = time.monotonic() + seconds
        while True:
            message = receive(sock, max(0.0, deadline - time.monotonic()))
            if isinstance(message, dict) and message.keys() == {"calling"}:
                self._calling = message["calling"]
                continue
            if isinstance(message, dict) and message.keys() == {"operators"} and self.sandbox.recorded is not None:
                self.sandbox.recorded.update(str(name) for name in message["operators"])  # authoring alone
                continue
            if isinstance(message, dict) and message.keys() == {"warned"}:
                try:
                    self.printed.add_warning(message["warned"])
                except ValueError as error:
                    raise ProtocolError(str(error)) from None
                continue
            if not (isinstance(message, dict) and "printed" in message):
                break
            try:
                self.printed.add(message["printed"], message.get("cut", False))
            except ValueError as error:
                raise ProtocolError(str(error)) from None
        if isinstance(message, dict):
            self.printed.add_unsent(message.get("printed_more"))
        return message

    def close(self) -> None:
        """End the student: the zygote kills their first process and with it every worker."""
        for sock in [*self._workers.values(), *self._forked.values()]:
            sock.close()
        self._workers.clear()
        self._forked.clear()
        self._student.close()
        if self.sandbox.alive:
            self.sandbox.end_student()

    def start_afresh(self, stage: int) -> None:
        """End ``stage``'s own worker: the next request forks a new one, holding nothing of earlier calls."""
        if (worker := self._own(stage)) in self._workers:
            self._discard(worker)

    def __enter__(self) -> "LearnerWorkers":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _own(self, stage: int) -> Worker:
        """The stage's own worker: the one its checks use unless they ask for other routes switched off."""
        return stage, self._switched_off.get(stage, self.sandbox.switched_off)

    def _worker(self, worker: Worker) -> socket.socket:
        return self._workers[worker] if worker in self._workers else self._fork(worker)

    def _start(self, worker: Worker) -> None:
        """Have the student's first process fork ``worker``, without waiting for it."""
        stage, switched_off = worker
        if not switched_off.includes(self.sandbox.switched_off):  # the grader's own mistake, never a student's
            raise ValueError(f"a worker with {switched_off} cannot be forked where {self.sandbox.switched_off} are off")
        number = self._numbers[worker] = next(self._count)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        command = {"fork": stage, "worker": number, "switched_off": asdict(switched_off)}
        try:
            send_command(self._student, command, [theirs.fileno()])
        except OSError:
            ours.close()
            raise SandboxError("the grader lost the process that runs your code") from None
        finally:
            theirs.close()
        self._forked[worker] = ours

    def _fork(self, worker: Worker) -> socket.socket:
        """A worker that has imported the stage, or LearnerFailure when importing it crashed or hung."""
        if worker[0] in self._hung_at_import:  # the same file, with or without torch's routes
            raise LearnerFailure("timeout", f"not run: importing your file took longer than {self.timeout:g} s")
        limit = self._within_budget(self.timeout)
        if worker not in self._forked:
            self._start(worker)
        sock = self._workers[worker] = self._forked.pop(worker)
        try:  # "ready" is sent before any learner code runs there: its absence is the grader's failure
            ready = receive(sock, WORKER_READY_SECONDS)
        except (TimeoutError, ConnectionError, ProtocolError, OSError):
            ready = None
        if ready != {"ready": True}:
            self._discard(worker)
            raise SandboxError(f"the grader could not start a process for stage {worker[0]}")
        # What another worker of the stage prints on import, the stage's own worker printed already.
        shown, self.printed = self.printed, self.printed if worker == self._own(worker[0]) else PrintedOutput()
        started = time.monotonic()
        try:
            self._answer(sock, limit)  # {"loaded": ...}: an import error is answered per request
        except TimeoutError:
            self._discard(worker)
            self._hung_at_import.add(worker[0])
            raise LearnerFailure(
                "timeout", f"importing your file did not finish within {limit:g} s{self._cut_short(limit)}"
            ) from None
        except (ConnectionError, ProtocolError, OSError):
            self._discard(worker)
            raise self._stopped("while importing your file") from None
        finally:
            self.printed = shown
            self.spent += time.monotonic() - started
        return sock

    def _keep_kernel_memory_down(self) -> None:
        """Have the kernel reclaim the caches the lane holds past its mark; the time that takes (about a second
        for what a student can fill in a few) is the student's, from their budget, not the class's."""
        if self.spent - self._kernel_checked >= KERNEL_CHECK_SECONDS:
            started = time.monotonic()
            self.sandbox.keep_kernel_memory_down()
            self.spent += time.monotonic() - started
            self._kernel_checked = self.spent

    def _stopped(self, when: str) -> LearnerFailure:
        """Why a worker stopped ``when``: the kernel's kill for the lane's memory bound where the lane's own
        count of such kills (read from outside it) went up, else a crash of unknown cause."""
        kills = self.sandbox.memory_kills()
        if kills > self._memory_kills:
            self._memory_kills = kills
            held = (self.sandbox.lane_memory or 0) / 1024**2
            return LearnerFailure(
                "memory",
                f"the process running your code was stopped {when}: the processes running your code held more "
                f"than the {held:,.0f} MiB of memory they may share, kernel memory included",
            )
        return LearnerFailure(
            "crash",
            f"the process running your code stopped {when} (os._exit, a segfault or the memory limit can do that)",
        )

    def _discard(self, worker: Worker) -> None:
        """Close the worker's socket and have the student's first process kill it (by the pid it keeps)."""
        self._workers.pop(worker).close()
        try:
            send_command(self._student, {"kill": self._numbers[worker]})
        except OSError:
            pass  # the student's processes are gone already
