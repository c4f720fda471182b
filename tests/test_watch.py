"""make watch (grader.cli.watch): a report after each save, each run a fresh student of one warm sandbox."""

import re
import signal
import subprocess
import sys

from grader.cli.watch import WATCHING
from tests.conftest import REPO
from tests.grading import learner_copy
from tests.watching import Watcher

FILE = "stage1_softmax.py"
# Learner code that, at import, breaks torch for its own process and leaves traces a later run could meet.
TAMPERING = """
import os, torch
torch.Tensor.__matmul__ = lambda a, b: a.new_zeros(())
os.environ["LEFT_BY_RUN"] = "1"
open("left-by-run.txt", "w").write("x")
"""


def test_each_save_is_graded_again_and_nothing_of_one_run_reaches_the_next(tmp_path):
    folder = learner_copy(tmp_path / "work", stages=[1])
    stage_file = folder / FILE
    correct = stage_file.read_text()
    command = [sys.executable, "-m", "grader.cli.watch", str(folder), "--stage", "1"]
    with Watcher(command, REPO) as watcher:
        first = watcher.report()
        assert "Total: 20/20" in first and first.count("Grading ") == 1
        tampered, _ = watcher.saved(stage_file, correct + TAMPERING)
        assert "Total: 20/20" not in tampered and "document.attention_scores" in tampered
        # each later run: a line with the time and the file saved, and no banner again
        header = re.search(r"──── (\d\d:\d\d:\d\d) · you saved (\S+): graded again ────", tampered)
        assert header and header[2] == FILE and "Grading " not in tampered, tampered[:400]
        again, _ = watcher.saved(stage_file, correct + "\n# the tampering removed\n")
        assert "Total: 20/20" in again, again  # its process, its torch and its scratch folder went with it
        broken, _ = watcher.saved(stage_file, correct + "\ndef oops(:\n")
        assert "SyntaxError" in broken and "Total: 0/20" in broken
        fixed, _ = watcher.saved(stage_file, correct)
        assert "Total: 20/20" in fixed
        watcher.process.send_signal(signal.SIGINT)
        assert watcher.process.wait(timeout=30) == 0
        assert "Traceback" not in watcher.process.stderr.read()
    assert not (folder / "left-by-run.txt").exists()


def test_make_watch_runs_the_watcher_on_the_stage_asked_for():
    dry_run = subprocess.run(["make", "-n", "watch", "STAGE=3"], cwd=REPO, capture_output=True, text=True)
    assert "-m grader.cli.watch exercises --stage 3" in dry_run.stdout


def test_a_zip_is_refused_in_one_line(tmp_path):
    bundle = tmp_path / "work.zip"
    bundle.write_bytes(b"PK\x05\x06" + b"\0" * 18)
    done = subprocess.run(
        [sys.executable, "-m", "grader.cli.watch", str(bundle)], cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "not a folder" in done.stderr
    assert WATCHING.split("{")[0] not in done.stdout
