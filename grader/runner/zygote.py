"""The zygote: imports torch once, then forks a worker per stage on the judge's request.

    python -m grader.runner.zygote SUBMISSION_FOLDER SCRATCH_FOLDER DEVICE [--many-students]

Reads one JSON command per line on stdin. {"fork": stage, "socket": path, "student": n} starts a
worker, which introduces itself on the socket with its stage, pid and student (no answer here, so
the judge need not wait for the fork); {"kill": [pid, ...]} ends workers and answers once all are
gone; {"reset": true} empties the scratch folder between students and answers. Commands run in
order, so a student's workers are gone before the next student's files arrive. The zygote runs no torch operation itself, so
forks stay safe, and it never imports learner code: every student starts clean. With
--many-students its memory first moves to huge pages, which makes each fork cheaper.
"""

import json
import os
import shutil
import signal
import sys
from pathlib import Path

import torch

from grader.runner import confine, hugepages, worker  # everything a worker needs, imported once


def main() -> None:
    submission, scratch, device = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"  # does not initialise CUDA
    confine.forget_grader_modules()  # once here, not in every worker: it touches all of sys.modules
    if sys.argv[4:] == ["--many-students"]:
        hugepages.collapse_into_huge_pages()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps finished workers
    print(json.dumps({"ready": True, "device": device}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        if "fork" in command:
            pid = os.fork()
            if pid == 0:
                try:
                    worker.run(int(command["fork"]), command["socket"], int(command["student"]), submission,
                               scratch, device)
                finally:
                    os._exit(0)
        elif "kill" in command:
            for pid in command["kill"]:
                _kill(int(pid))
            print(json.dumps({"killed": command["kill"]}), flush=True)
        elif "reset" in command:
            for entry in scratch.iterdir():
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
            print(json.dumps({"reset": True}), flush=True)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)  # with SIGCHLD ignored this returns (ECHILD) once the worker is gone
    except (ProcessLookupError, ChildProcessError):
        pass


if __name__ == "__main__":
    main()
