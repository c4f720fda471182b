"""python -m grader SUBMISSION [--device cpu|cuda|auto] [--json FILE] [--student-json FILE] [--html FILE] [--gradescope FILE]
                            [--classroom FILE] [--for-students] [--visible-only] [--stage N] [--course FILE]
                            [--timeout S] [--sandbox auto|bwrap|isolated|none]
   python -m grader batch SUBMISSIONS_DIR --out OUT_DIR [...]   (see grader/batch.py)

Grades a folder or .zip of stage files. Exit status 0 whenever grading ran, whatever the score;
2 with a one-line reason when the grader itself cannot run.
"""

import argparse
import json
import os
import sys
from pathlib import Path

from grader.course import CourseError, course_stages, note_prices, read_course
from grader.points import use_note_prices
from grader.stages import STAGES
from grader.sandbox import MODES, Sandbox, SandboxError
from grader.submission import SubmissionError, stage_submission



def add_grading_options(parser: argparse.ArgumentParser) -> None:
    """The options a single grade and a batch share."""
    parser.add_argument("--device", choices=["cpu", "cuda", "auto"], default="cpu")
    parser.add_argument("--visible-only", action="store_true", help="run the visible checks only (provisional score)")
    parser.add_argument("--timeout", type=float, default=1.0,
                        help="seconds one call into learner code may take; a correct one takes milliseconds "
                             "(raise it on a very slow machine)")
    parser.add_argument("--sandbox", choices=MODES, default="auto",
                        help="bwrap: insist on bubblewrap; auto: use it where it works, else say 'unsandboxed'; "
                             "isolated: bubblewrap, or else workers proven unable to read the grader, the "
                             "solutions and the tests before any submitted code runs, else refuse (Gradescope)")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m grader", description="Grade the attention exercises.",
                                     epilog="To grade a whole class: python -m grader batch --help")
    parser.add_argument("submission", type=Path, help="a folder or .zip holding some or all of the stage files")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the report as JSON")
    parser.add_argument("--student-json", type=Path, metavar="FILE",
                        help="also write the report as JSON as a student may read it: hidden checks keep their "
                             "verdict, points and hint only (what the nbgrader course's notebooks read)")
    parser.add_argument("--html", type=Path, metavar="FILE",
                        help="also write the report as one HTML page, with heat maps of the attention a check compared")
    parser.add_argument("--gradescope", type=Path, metavar="FILE", help="also write Gradescope's results.json")
    parser.add_argument("--classroom", type=Path, metavar="FILE",
                        help="also write the result GitHub Classroom's grading reporter reads")
    parser.add_argument("--for-students", action="store_true",
                        help="the terminal report and --html as a student may read them: hidden checks show their "
                             "verdict and hint only, never their inputs or expected values (the --json report keeps "
                             "everything; Gradescope's and GitHub Classroom's results are always so)")
    parser.add_argument("--stage", type=int, choices=STAGES,
                        help="grade one stage only: any stage, bonus ones included, whatever the course says")
    parser.add_argument("--course", type=Path, metavar="FILE",
                        help="the course settings (default: course.toml beside grader/, if there is one); "
                             "[stages] bonus = true grades the bonus stages too")
    add_grading_options(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["batch"]:
        from grader.batch import main as batch

        return batch(argv[1:])
    args = parse(argv)
    try:
        args.stages = [args.stage] if args.stage else course_stages(args.course)
        use_note_prices(note_prices(read_course(args.course), args.course))
    except CourseError as error:
        print(f"grader: {error}", file=sys.stderr)
        return 2
    try:
        sandbox = Sandbox(args.device, args.sandbox)  # its torch import overlaps ours
    except SandboxError as error:
        print(f"grader: {error}", file=sys.stderr)
        return 2
    with sandbox:
        try:
            staged = stage_submission(args.submission)
        except SubmissionError as error:
            print(f"grader: unreadable: {error}", file=sys.stderr)
            return 2
        except OSError as error:
            print(f"grader: {error}", file=sys.stderr)
            return 2
        return grade(args, sandbox, staged)


def grade(args, sandbox: Sandbox, staged) -> int:
    from grader.feedback import student_view
    from grader.html_report import render_html
    from grader.report import render_text, to_classroom, to_gradescope
    from grader.session import GradingError, grade_staged

    try:
        device = sandbox.device
        if args.device == "cuda" and device != "cuda":
            raise SandboxError("--device cuda was asked for, but torch sees no CUDA GPU")
        report = grade_staged(sandbox, staged, args.stages, args.visible_only,
                              args.timeout)
    except (SandboxError, GradingError) as error:
        print(f"grader: {error}", file=sys.stderr)
        return 2
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    if args.student_json:
        args.student_json.write_text(json.dumps(student_view(report), indent=2) + "\n")
    if args.gradescope:
        args.gradescope.write_text(json.dumps(to_gradescope(report), indent=2) + "\n")
    if args.classroom:
        args.classroom.write_text(json.dumps(to_classroom(report)) + "\n")
    if args.html:
        args.html.write_text(render_html(report, str(args.submission), args.html.absolute(), args.for_students),
                             encoding="utf-8")
    print(render_text(report, str(args.submission), student_facing=args.for_students))
    if args.html:
        print(f"\nHeat maps and details: {args.html}")
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # every file is written and closed; skipping torch's interpreter teardown saves ~0.5 s
