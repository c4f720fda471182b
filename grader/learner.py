"""The judge's handle on learner code: one zygote, one worker per stage, requests with time limits.

Learner code never runs in this process. Requests go to a worker over a Unix socket; answers
are decoded safely (grader.runner.protocol). A worker that dies or hangs is discarded and the
next request forks a fresh one, so a crash costs only the check that caused it.
"""

import json
import os
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader.launch import start_zygote
from grader.runner.protocol import ProtocolError, receive, send

WORKER_CONNECT_SECONDS = 60.0  # from fork to the worker's connection, on a busy machine


@dataclass
class LearnerFailure(Exception):
    """Learner code did not answer normally: kind is not_implemented, import_error, exception,
    memory, crash or timeout."""

    kind: str
    message: str
    type: str | None = None
    where: str | None = None

    def __str__(self) -> str:
        where = f" ({self.where})" if self.where else ""
        kind = f"{self.type}: " if self.type else ""
        return f"{kind}{self.message}{where}"


class LearnerWorkers:
    """Forks workers for a submission folder on first use; close() ends them all."""

    def __init__(
        self,
        submission: Path,
        device: str = "cpu",
        timeout: float = 10.0,
        zygote: subprocess.Popen | None = None,
        scratch: tempfile.TemporaryDirectory | None = None,
    ):
        """``zygote`` and its ``scratch`` folder may come from grader.launch, started earlier."""
        self.submission = Path(submission).resolve()
        self.timeout = timeout
        self._scratch = scratch or tempfile.TemporaryDirectory(prefix="grader-")
        self._socket_path = os.path.join(self._scratch.name, "judge.sock")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self._socket_path)
        self._listener.listen(8)
        self._zygote = zygote or start_zygote(self.submission, device, Path(self._scratch.name))
        self._resolved_device: str | None = None
        self._workers: dict[int, tuple[socket.socket, int]] = {}

    @property
    def device(self) -> str:
        """The device the workers use ("auto" resolved by the zygote, which imported torch)."""
        if self._resolved_device is None:
            line = self._zygote.stdout.readline()  # {"ready": true, "device": ...} once torch is imported
            if not line:
                raise RuntimeError("the grader's worker launcher failed to start (could it import torch?)")
            self._resolved_device = json.loads(line)["device"]
        return self._resolved_device

    def request(self, stage: int, op: str, timeout: float | None = None, **params) -> object:
        """Run probe ``op`` in the worker of ``stage``; its result, or LearnerFailure."""
        sock, _ = self._worker(stage)
        limit = timeout or self.timeout
        try:
            send(sock, {"op": op, "params": params})
            sock.settimeout(limit)
            reply = receive(sock)
        except TimeoutError:
            self._discard(stage, kill=True)
            raise LearnerFailure("timeout", f"no answer within {limit:g} s") from None
        except (ConnectionError, ProtocolError, OSError):
            self._discard(stage, kill=True)
            raise LearnerFailure(
                "crash", "the process running your code stopped without answering "
                "(os._exit, a segfault or the memory limit can do that)"
            ) from None
        if not isinstance(reply, dict) or not ({"ok", "error"} & reply.keys()):
            self._discard(stage, kill=True)
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
        for stage in list(self._workers):
            self._discard(stage, kill=False)
        if self._zygote.poll() is None:
            self._zygote.kill()
            self._zygote.wait()
        for stream in (self._zygote.stdin, self._zygote.stdout):
            stream.close()
        self._listener.close()
        self._scratch.cleanup()

    def __enter__(self) -> "LearnerWorkers":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _worker(self, stage: int) -> tuple[socket.socket, int]:
        if stage not in self._workers:
            self._workers[stage] = self._fork(stage)
        return self._workers[stage]

    def _command(self, command: dict) -> dict:
        self._zygote.stdin.write(json.dumps(command) + "\n")
        self._zygote.stdin.flush()
        line = self._zygote.stdout.readline()
        if not line:
            raise RuntimeError("the grader's worker launcher stopped (could it import torch?)")
        return json.loads(line)

    def _fork(self, stage: int) -> tuple[socket.socket, int]:
        self.device  # wait for the zygote to be ready
        self._command({"fork": stage, "socket": self._socket_path})
        self._listener.settimeout(WORKER_CONNECT_SECONDS)
        connection, _ = self._listener.accept()
        hello = receive(connection)
        return connection, int(hello["hello"]["pid"])

    def _discard(self, stage: int, kill: bool) -> None:
        sock, pid = self._workers.pop(stage)
        sock.close()
        if kill and self._zygote.poll() is None:
            self._command({"kill": pid})
