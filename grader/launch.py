"""Start the zygote before the judge imports torch, so that both imports run at once.

Standard library only: importing this module must stay instant.
"""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def start_zygote(submission: Path, device: str, scratch: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "grader.runner.zygote", str(submission), device],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=scratch,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        text=True,
    )
