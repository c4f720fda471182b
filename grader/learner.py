"""The judge's handle on one student's code: a worker per stage in the sandbox, requests with time limits.

Learner code never runs in this process. Requests go to a worker over a Unix socket; answers
are decoded safely (grader.runner.protocol). A worker that dies or hangs is discarded and the
next request forks a fresh one, so a crash costs only the check that caused it. The workers of
the stages to be graded are forked up front, so that each imports its file while the judge
works on the stages before; every worker names its student, and a stray one is refused.
"""

import itertools
import socket
from dataclasses import dataclass

from grader.runner.protocol import ProtocolError, receive, send
from grader.sandbox import Sandbox, SandboxError

WORKER_CONNECT_SECONDS = 60.0  # from fork to the worker's connection, on a busy machine
# After a hang in a stage, its later calls get a short limit: a correct call takes
# milliseconds, so a function that hangs everywhere costs seconds, not minutes, and a stage's
# other functions still earn their points.
REPEAT_HANG_SECONDS = 0.25
STRAGGLER_SECONDS = 5.0  # at close, for a forked worker to connect so that it can be ended
_students = itertools.count()


@dataclass
class LearnerFailure(Exception):
    """Learner code did not answer normally: kind is not_implemented, import_error, exception,
    memory, crash, timeout or forbidden_import."""

    kind: str
    message: str
    type: str | None = None
    where: str | None = None

    def __str__(self) -> str:
        where = f" ({self.where})" if self.where else ""
        kind = f"{self.type}: " if self.type else ""
        return f"{kind}{self.message}{where}"


class LearnerWorkers:
    """One student's workers in ``sandbox``: those of ``stages`` forked at once, any other on first use;
    close() ends them all."""

    def __init__(self, sandbox: Sandbox, timeout: float, stages: list[int] | tuple = ()):
        self.sandbox = sandbox
        self.timeout = timeout
        self._student = next(_students)
        self._workers: dict[int, tuple[socket.socket, int]] = {}  # connected and loaded (or failed to)
        self._forked: set[int] = set()  # not connected yet
        self._connected: dict[int, tuple[socket.socket, int]] = {}  # introduced, not yet asked for
        self._hung_stages: set[int] = set()
        self._hung_at_import: set[int] = set()
        for stage in stages:
            self._start(stage)

    def request(self, stage: int, op: str, timeout: float | None = None, **params) -> object:
        """Run probe ``op`` in the worker of ``stage``; its result, or LearnerFailure."""
        limit = timeout or self.timeout
        if stage in self._hung_stages:
            limit = min(limit, REPEAT_HANG_SECONDS)
        sock, _ = self._worker(stage)
        try:
            send(sock, {"op": op, "params": params})
            sock.settimeout(limit)
            reply = receive(sock)
        except TimeoutError:
            self._discard(stage)
            self._hung_stages.add(stage)
            raise LearnerFailure("timeout", f"no answer within {limit:g} s") from None
        except (ConnectionError, ProtocolError, OSError):
            self._discard(stage)
            raise LearnerFailure(
                "crash", "the process running your code stopped without answering "
                "(os._exit, a segfault or the memory limit can do that)"
            ) from None
        if not isinstance(reply, dict) or not ({"ok", "error"} & reply.keys()):
            self._discard(stage)
            raise LearnerFailure("crash", "the process running your code sent a malformed answer")
        if "error" in reply:
            error = reply["error"] if isinstance(reply["error"], dict) else {}
            raise LearnerFailure(
                kind=str(error.get("kind", "exception")),
                message=str(error.get("message", "")),
                type=error.get("type") if isinstance(error.get("type"), str) else None,
                where=error.get("where") if isinstance(error.get("where"), str) else None,
            )
        return reply["ok"]

    def close(self) -> None:
        """End every worker and wait until each is gone, so the next student starts clean."""
        try:
            while self._forked:  # a worker connects before it reads any file: wait, then end it
                self._arrive(limit=STRAGGLER_SECONDS)
        except (SandboxError, OSError, ProtocolError):
            pass  # what never connects belongs to no student: the next one refuses it
        self._workers.update(self._connected)
        self._connected.clear()
        self._discard(*self._workers)

    def __enter__(self) -> "LearnerWorkers":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _worker(self, stage: int) -> tuple[socket.socket, int]:
        return self._workers[stage] if stage in self._workers else self._fork(stage)

    def _start(self, stage: int) -> None:
        """Have the zygote fork the worker of ``stage``, without waiting for it."""
        self.sandbox.command({"fork": stage, "socket": self.sandbox.inside(self.sandbox.socket_path),
                              "student": self._student}, answered=False)
        self._forked.add(stage)

    def _fork(self, stage: int) -> tuple[socket.socket, int]:
        """A worker that has imported the stage, or LearnerFailure when importing it crashed or hung."""
        if stage in self._hung_at_import:
            raise LearnerFailure("timeout", f"not run: importing your file took longer than {self.timeout:g} s")
        try:
            if stage not in self._forked and stage not in self._connected:
                self._start(stage)
            while stage not in self._connected:
                self._arrive(limit=WORKER_CONNECT_SECONDS)
        except (SandboxError, OSError, ProtocolError) as error:
            self._forked.discard(stage)
            raise LearnerFailure("crash", f"the grader could not start a process for your code ({error})") from None
        connection, pid = self._workers[stage] = self._connected.pop(stage)
        try:
            connection.settimeout(self.timeout)
            receive(connection)  # {"loaded": ...}: an import error is answered per request
        except TimeoutError:
            self._discard(stage)
            self._hung_at_import.add(stage)
            raise LearnerFailure("timeout", f"importing your file did not finish within {self.timeout:g} s") from None
        except (ConnectionError, ProtocolError, OSError):
            self._discard(stage)
            raise LearnerFailure("crash", "the process running your code stopped while importing your file "
                                          "(os._exit, a segfault or the memory limit can do that)") from None
        return connection, pid

    def _arrive(self, limit: float) -> None:
        """Take the next worker's connection and introduction; end it if it is another student's."""
        connection = self._accept(limit)
        connection.settimeout(limit)
        hello = receive(connection)["hello"]  # sent by our worker code, before any learner code runs
        stage, pid = int(hello["stage"]), int(hello["pid"])
        if hello.get("student") != self._student or stage not in self._forked:
            connection.close()
            self.sandbox.command({"kill": [pid]})
            return
        self._forked.discard(stage)
        self._connected[stage] = (connection, pid)

    def _accept(self, limit: float) -> socket.socket:
        """The next worker's connection; the zygote's death ends the wait early."""
        self.sandbox.listener.settimeout(min(1.0, limit))
        for _ in range(max(1, int(limit))):
            try:
                return self.sandbox.listener.accept()[0]
            except TimeoutError:
                if not self.sandbox.alive:
                    break
        raise SandboxError(f"no worker connected within {limit:g} s")

    def _discard(self, *stages: int) -> None:
        pids = []
        for stage in stages:
            sock, pid = self._workers.pop(stage)
            sock.close()
            pids.append(pid)
        if pids and self.sandbox.alive:
            self.sandbox.command({"kill": pids})
