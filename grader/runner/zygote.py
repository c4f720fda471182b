"""The zygote: imports torch once, then forks a worker per stage on the judge's request.

    python -m grader.runner.zygote SUBMISSION_FOLDER DEVICE

Reads one JSON command per line on stdin ({"fork": stage, "socket": path} or {"kill": pid}) and
answers one JSON line on stdout. It runs no torch operation itself, so forks stay safe.
"""

import json
import os
import signal
import sys
from pathlib import Path

import torch

from grader.runner import worker  # imports everything a worker needs, once


def main() -> None:
    submission, device = Path(sys.argv[1]), sys.argv[2]
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"  # does not initialise CUDA
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps finished workers
    print(json.dumps({"ready": True, "device": device}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        if "fork" in command:
            pid = os.fork()
            if pid == 0:
                try:
                    worker.run(int(command["fork"]), command["socket"], submission, device)
                finally:
                    os._exit(0)
            print(json.dumps({"pid": pid}), flush=True)
        elif "kill" in command:
            try:
                os.kill(int(command["kill"]), signal.SIGKILL)
            except ProcessLookupError:
                pass
            print(json.dumps({"killed": command["kill"]}), flush=True)


if __name__ == "__main__":
    main()
