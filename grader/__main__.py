"""python -m grader SUBMISSION [--device cpu|cuda|auto] [--json FILE] [--gradescope FILE]
                            [--visible-only] [--stage N]

Grades a folder or .zip of stage files. Exit status 0 whenever grading ran, whatever the score;
2 with a one-line reason when the grader itself cannot run.
"""

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from grader.launch import start_zygote
from grader.submission import SubmissionError, stage_submission

STAGES = [1, 2, 3, 4, 5]


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m grader", description="Grade the attention exercises.")
    parser.add_argument("submission", type=Path, help="a folder or .zip holding some or all of the five stage files")
    parser.add_argument("--device", choices=["cpu", "cuda", "auto"], default="cpu")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the report as JSON")
    parser.add_argument("--gradescope", type=Path, metavar="FILE", help="also write Gradescope's results.json")
    parser.add_argument("--visible-only", action="store_true", help="run the visible checks only (provisional score)")
    parser.add_argument("--stage", type=int, choices=STAGES, help="grade one stage only")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds a single call into your code may take")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    # Only the plugins grading needs: whatever else is installed must not change a grade.
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    args = parse(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="submission-") as staging:
        try:
            staged = stage_submission(args.submission, Path(staging))
        except (SubmissionError, OSError) as error:
            print(f"grader: {error}", file=sys.stderr)
            return 2
        scratch = tempfile.TemporaryDirectory(prefix="grader-")
        # Launched before torch is imported here, so both imports run side by side.
        zygote = start_zygote(staged.folder, args.device, Path(scratch.name))
        return grade(args, staged, zygote, scratch, started)


def grade(args, staged, zygote, scratch, started: float) -> int:
    import pytest
    import torch

    from grader.learner import LearnerWorkers
    from grader.plugin import CHECK_ARGS, GradingPlugin
    from grader.report import build, render_text, to_gradescope

    stages = [args.stage] if args.stage else STAGES
    with LearnerWorkers(staged.folder, args.device, args.timeout, zygote=zygote, scratch=scratch) as learner:
        try:
            device = learner.device
        except RuntimeError as error:
            print(f"grader: {error}", file=sys.stderr)
            return 2
        if args.device == "cuda" and device != "cuda":
            print("grader: --device cuda was asked for, but torch sees no CUDA GPU", file=sys.stderr)
            return 2
        plugin = GradingPlugin(learner, device, stages, args.visible_only)
        pytest_output = io.StringIO()
        with contextlib.redirect_stdout(pytest_output), contextlib.redirect_stderr(pytest_output):
            exit_code = pytest.main(CHECK_ARGS, plugins=[plugin])
    if exit_code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        print(f"grader: the checks could not run (pytest exit {int(exit_code)}):\n{pytest_output.getvalue()[-2000:]}",
              file=sys.stderr)
        return 3

    flags = ["unsandboxed"]
    if args.visible_only:
        flags.append("provisional")
    if staged.ignored:
        flags.append("ignored: " + ", ".join(staged.ignored))
    report = build(plugin.results, stages, device, torch.__version__, flags)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    if args.gradescope:
        args.gradescope.write_text(json.dumps(to_gradescope(report, time.monotonic() - started), indent=2) + "\n")
    print(render_text(report, str(args.submission)))
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # every file is written and closed; skipping torch's interpreter teardown saves ~0.5 s
