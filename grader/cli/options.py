"""The options every grading command shares, and the frozen GradingOptions built from them once."""

import argparse
from pathlib import Path

from grader.core.course import extra_credit, note_prices, read_course, tracks
from grader.core.inputs_key import read_key
from grader.core.options import DEVICES, SANDBOX_MODES, GradingOptions
from grader.core.points import points_in_use
from grader.core.stages import stages_of


def add_grading_options(parser: argparse.ArgumentParser) -> None:
    """The options a single grade and a batch share."""
    parser.add_argument("--device", choices=DEVICES, default="cpu")
    parser.add_argument("--visible-only", action="store_true", help="run the visible checks only (provisional score)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=1.0,
        help="seconds one call into learner code may take; a correct one takes milliseconds "
        "(raise it on a very slow machine)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=GradingOptions.budget,
        help=f"seconds all calls into one student's code may take together (default {GradingOptions.budget:g}; a "
        "correct submission takes a few): each call's limit shrinks to what is left, and later calls are not run",
    )
    parser.add_argument(
        "--points",
        type=Path,
        metavar="FILE",
        help="grade with this points table instead of the registry's (grader/core/stages.toml): "
        "[stage<N>] tables, each pricing exactly that stage's checks (python -m grader.cli.points writes one)",
    )
    parser.add_argument(
        "--sandbox",
        choices=SANDBOX_MODES,
        default="auto",
        help="bwrap: insist on bubblewrap; auto: use it where it works, else say 'unsandboxed'; "
        "isolated: bubblewrap, or else workers proven unable to read the grader, the "
        "solutions and the tests before any submitted code runs, else refuse (Gradescope)",
    )


def add_inputs_key_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--inputs-key",
        type=Path,
        metavar="FILE",
        help="a key file (grader/core/inputs_key.py): the hidden checks draw their inputs from it and the "
        "submission, so what one submission learns of them fits no other (a Gradescope autograder carries one)",
    )


def grading_options(
    args: argparse.Namespace, course: Path | None, stage: int | None = None, points_file: Path | None = None
) -> GradingOptions:
    """The options ``args`` give, with the stages and note prices of the course file ``course`` (one
    ``stage`` instead, where asked) and the points of ``points_file``. CourseError or ValueError: one line."""
    settings = read_course(course)
    stages = [stage] if stage else stages_of(tracks(settings, course))
    points = points_in_use(note_prices(settings, course), points_file)
    return GradingOptions(
        stages=tuple(stages),
        points=points,
        visible_only=args.visible_only,
        timeout=args.timeout,
        budget=args.budget,
        device=args.device,
        sandbox=args.sandbox,
        extra_credit=extra_credit(settings, course),
        inputs_key=read_key(args.inputs_key) if getattr(args, "inputs_key", None) else b"",
    )
