"""The judge's commands to the zygote and to a student's first process, and the zygote's answers.

One JSON datagram each on a SOCK_SEQPACKET socket, with file descriptors attached. Only trusted
processes speak it: no learner code holds either end. Standard library only, so that the judge
can start the zygote before it imports torch.
"""

import json
import os
import socket
from collections.abc import Sequence

MAX_COMMAND_BYTES = 64 * 1024
MAX_COMMAND_FDS = 16
# The stage a student's first process is told to fork for --sandbox isolated's probe (grader.sandbox.zygote): a
# worker that confines itself as any other, then, instead of importing a stage, tells which files it can open.
ISOLATION_PROBE = 0


def send_command(sock: socket.socket, command: dict, fds: Sequence[int] = ()) -> None:
    socket.send_fds(sock, [json.dumps(command).encode()], list(fds))


def receive_command(sock: socket.socket) -> tuple[dict | None, list[int]]:
    """The next command and its descriptors; (None, []) when the other end has closed."""
    data, fds, _flags, _address = socket.recv_fds(sock, MAX_COMMAND_BYTES, MAX_COMMAND_FDS)
    if not data:
        for fd in fds:
            os.close(fd)
        return None, []
    return json.loads(data), fds
