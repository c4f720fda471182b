"""The judge's handle on one student's code: a worker per stage in the sandbox, requests with time limits.

Learner code never runs in this process. Requests go to a worker over a Unix socket; answers
are decoded safely (grader.runner.protocol). A worker that dies or hangs is discarded and the
next request forks a fresh one, so a crash costs only the check that caused it.
"""

import socket
from dataclasses import dataclass

from grader.runner.protocol import ProtocolError, receive, send
from grader.sandbox import Sandbox, SandboxError

WORKER_CONNECT_SECONDS = 60.0  # from fork to the worker's connection, on a busy machine
TIMEOUTS_PER_STAGE = 2  # after that many, a stage's remaining calls fail at once: a hang costs its limit twice


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
    """One student's workers, forked in ``sandbox`` on first use; close() ends them all."""

    def __init__(self, sandbox: Sandbox, timeout: float = 10.0):
        self.sandbox = sandbox
        self.timeout = timeout
        self._workers: dict[int, tuple[socket.socket, int]] = {}
        self._timeouts: dict[int, int] = {}

    @property
    def device(self) -> str:
        return self.sandbox.device

    def request(self, stage: int, op: str, timeout: float | None = None, **params) -> object:
        """Run probe ``op`` in the worker of ``stage``; its result, or LearnerFailure."""
        if self._timeouts.get(stage, 0) >= TIMEOUTS_PER_STAGE:
            raise LearnerFailure("timeout", f"not run: your code in this stage already ran past the time limit "
                                            f"{TIMEOUTS_PER_STAGE} times")
        sock, _ = self._worker(stage)
        limit = timeout or self.timeout
        try:
            send(sock, {"op": op, "params": params})
            sock.settimeout(limit)
            reply = receive(sock)
        except TimeoutError:
            self._discard(stage)
            self._timeouts[stage] = self._timeouts.get(stage, 0) + 1
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
        for stage in list(self._workers):
            self._discard(stage)

    def __enter__(self) -> "LearnerWorkers":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _worker(self, stage: int) -> tuple[socket.socket, int]:
        if stage not in self._workers:
            self._workers[stage] = self._fork(stage)
        return self._workers[stage]

    def _fork(self, stage: int) -> tuple[socket.socket, int]:
        try:
            self.sandbox.command({"fork": stage, "socket": self.sandbox.inside(self.sandbox.socket_path)})
            self.sandbox.listener.settimeout(WORKER_CONNECT_SECONDS)
            connection, _ = self.sandbox.listener.accept()
            hello = receive(connection)
        except (SandboxError, OSError, ProtocolError) as error:
            raise LearnerFailure("crash", f"the grader could not start a process for your code ({error})") from None
        return connection, int(hello["hello"]["pid"])

    def _discard(self, stage: int) -> None:
        sock, pid = self._workers.pop(stage)
        sock.close()
        if self.sandbox.alive:
            self.sandbox.command({"kill": pid})
