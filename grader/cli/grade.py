"""python -m grader SUBMISSION [--device cpu|cuda|auto] [--json FILE] [--student-json FILE] [--html FILE]
                            [--gradescope FILE] [--classroom FILE] [--for-students] [--visible-only] [--stage N]
                            [--course FILE] [--timeout S] [--budget S] [--sandbox auto|bwrap|isolated|none]

Grades a folder or .zip of stage files. Exit status 0 whenever grading ran, whatever the score;
2 with a one-line reason when the grader itself cannot run.
"""

import argparse
import sys
from pathlib import Path

from grader.cli.options import add_grading_options, add_inputs_key_option, grading_options
from grader.core.course import CourseError
from grader.core.options import GradingOptions
from grader.core.stages import STAGES
from grader.intake.submission import SubmissionError, SubmissionFiles, read_submission
from grader.judge.routes_off import SWITCHED_OFF_EVERYWHERE
from grader.sandbox.zygote import Sandbox, SandboxError


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m grader",
        description="Grade the attention exercises.",
        epilog="To grade a whole class: python -m grader batch --help",
    )
    parser.add_argument("submission", type=Path, help="a folder or .zip holding some or all of the stage files")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the report as JSON")
    parser.add_argument(
        "--student-json",
        type=Path,
        metavar="FILE",
        help="also write the report as JSON as a student may read it: hidden checks keep their "
        "verdict, points and hint only (what the nbgrader course's notebooks read)",
    )
    parser.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="also write the report as one HTML page, with heat maps of the attention a check compared",
    )
    parser.add_argument("--gradescope", type=Path, metavar="FILE", help="also write Gradescope's results.json")
    parser.add_argument(
        "--classroom", type=Path, metavar="FILE", help="also write the result GitHub Classroom's grading reporter reads"
    )
    parser.add_argument(
        "--for-students",
        action="store_true",
        help="the terminal report and --html as a student may read them: hidden checks show their "
        "verdict and hint only, never their inputs or expected values (the --json report keeps "
        "everything; Gradescope's and GitHub Classroom's results are always so)",
    )
    parser.add_argument(
        "--stage",
        type=int,
        choices=STAGES,
        help="grade one stage only: any stage, bonus ones included, whatever the course says",
    )
    parser.add_argument(
        "--course",
        type=Path,
        metavar="FILE",
        help="the course settings (default: course.toml beside grader/, if there is one); "
        "[stages] bonus = true grades the bonus stages too",
    )
    add_grading_options(parser)
    add_inputs_key_option(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    try:
        options = grading_options(args, args.course, args.stage, points_file=args.points)
    except (CourseError, ValueError) as error:
        print(f"grader: {error}", file=sys.stderr)
        return 2
    try:
        # its torch import overlaps ours
        sandbox = Sandbox(options.device, options.sandbox, switched_off=SWITCHED_OFF_EVERYWHERE)
    except SandboxError as error:
        print(f"grader: {error}", file=sys.stderr)
        return 2
    with sandbox:
        try:
            staged = read_submission(args.submission)
        except SubmissionError as error:
            print(f"grader: unreadable: {error}", file=sys.stderr)
            return 2
        except OSError as error:
            print(f"grader: {error}", file=sys.stderr)
            return 2
        return grade(args, sandbox, staged, options)


def grade(args: argparse.Namespace, sandbox: Sandbox, staged: SubmissionFiles, options: GradingOptions) -> int:
    # torch, pytest and the judge are imported here, after the sandbox's zygote has started importing its own
    import json

    from grader.core.report import to_json
    from grader.judge.session import GradingError, grade_staged
    from grader.views.feedback import student_view
    from grader.views.html import render_html
    from grader.views.platforms import to_classroom, to_gradescope
    from grader.views.terminal import render_text

    try:
        device = sandbox.device
        if options.device == "cuda" and device != "cuda":
            raise SandboxError("--device cuda was asked for, but torch sees no CUDA GPU")
        report = grade_staged(sandbox, staged, options)
    except (SandboxError, GradingError) as error:
        print(f"grader: {error}", file=sys.stderr)
        return 2
    if args.json:
        args.json.write_text(to_json(report))
    if args.student_json:
        args.student_json.write_text(to_json(student_view(report)))
    if args.gradescope:
        args.gradescope.write_text(json.dumps(to_gradescope(report), indent=2) + "\n")
    if args.classroom:
        args.classroom.write_text(json.dumps(to_classroom(report)) + "\n")
    if args.html:
        args.html.write_text(
            render_html(report, str(args.submission), args.html.absolute(), args.for_students), encoding="utf-8"
        )
    print(render_text(report, str(args.submission), student_facing=args.for_students))
    if args.html:
        print(f"\nHeat maps and details: {args.html}")
    return 0
