"""Hostile and broken submissions, one behaviour each, for the sandbox tests and the batch benchmark.

Each is the solutions (as learner files) with stage 1 changed: code at import time, or code at
the start of `attention_scores`. The rest of the submission is correct, so whatever a hostile
behaviour costs must stay inside stage 1 (and, for `attention_scores` only, inside its checks).
"""

from dataclasses import dataclass
from pathlib import Path

from tests.grading import learner_copy

STAGE1 = "stage1_softmax.py"
BODY_ANCHOR = "    return inputs @ query  #"


@dataclass(frozen=True)
class Hostile:
    name: str
    code: str
    at_import: bool  # at module import (costs the whole stage), else inside attention_scores (costs some)
    hint: str | None  # the hint stage 1 must carry
    harmless: bool = False  # the behaviour must cost nothing at all


def hostile_cases(outside: Path) -> list[Hostile]:
    """``outside``: a folder the submission must not be able to write to."""
    return [
        Hostile("os-exit-at-import", "import os\nos._exit(3)\n", True, "crash"),
        Hostile("sys-exit-at-import", "import sys\nsys.exit(0)\n", True, "import-error"),
        Hostile("segfault", "import ctypes\nctypes.string_at(0)\n", True, "crash"),
        Hostile("fork-bomb", "import os\nwhile True:\n    os.fork()\n", True, "import-error"),
        Hostile("unbounded-recursion", "def down(n):\n    return down(n + 1)\ndown(0)\n", False, None),
        Hostile("hang-at-import", "while True:\n    pass\n", True, "timeout"),
        Hostile("infinite-loop", "while True:\n    pass\n", False, "timeout"),
        Hostile("huge-allocation", "torch.empty(40 * 1024**3, dtype=torch.uint8)\n", False, "memory-limit"),
        Hostile(
            "write-outside-scratch",
            f"try:\n    open({str(outside / 'written.txt')!r}, 'w').write('x')\nexcept OSError:\n    pass\n",
            True,
            None,
            harmless=True,
        ),
        Hostile(
            "prints-fake-results",
            'print(\'{"ok": "fake"}\')\nprint("Total: 100/100")\nprint("tensor([0.9544, 1.4950])")\n',
            True,
            None,
            harmless=True,
        ),
    ]


def write_hostile(folder: Path, case: Hostile) -> Path:
    """A learner-style copy of the solutions with ``case`` planted in stage 1."""
    learner_copy(folder)
    path = folder / STAGE1
    text = path.read_text()
    if case.at_import:
        text = case.code + text
    else:
        body = "".join(f"    {line}\n" for line in case.code.splitlines())
        text = text.replace(BODY_ANCHOR, body + BODY_ANCHOR)
    path.write_text(text)
    return folder
