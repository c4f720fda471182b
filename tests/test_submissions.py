"""The held-out bonus submissions are what tests/submissions/manifest.toml says: each alternative agrees with
torch's own SDPA or with references written from the brief, and each mutant differs (tests/submissions/verify.py),
before the grader is asked about any of them."""

import subprocess
import sys
import tomllib

from tests.grading import REPO, SUBMISSIONS


def test_each_held_out_submission_is_what_the_manifest_says():
    result = subprocess.run(
        [sys.executable, "-m", "tests.submissions.verify"], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    entries = tomllib.loads((SUBMISSIONS / "manifest.toml").read_text())["submission"]
    for stage in (6, 7, 8):
        mutants = sum(e["stage"] == stage and e["kind"] == "mutant" for e in entries)
        alternatives = sum(e["stage"] == stage and e["kind"] == "alternative" for e in entries)
        assert mutants >= 10 and alternatives >= 3
        assert f"stage {stage}: {alternatives} alternatives match, {mutants} mutants differ" in result.stdout
