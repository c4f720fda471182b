"""python -m grader.cli.serve [--course FILE] [grading options]: grades folders of stage files on request.

grader.notebook starts one per kernel, so that a kernel whose notebooks are graded one after another (nbgrader's
autograde of a student, with grader.authoring.nbgrader.shared_kernel) imports torch, pytest and the judge once,
not once per stage. One request per line on stdin, a JSON object {"folder": F, "report": R}: the stage files in
folder F are graded as one submission and the student's view of the report (what --student-json writes) goes to
file R; then one line answers on stdout, "done" or "error: <why>". End of input ends the server. As in make watch,
the sandbox and the judge's pytest session stay up between requests, and each request is a new student of that
sandbox: nothing one request's code did reaches the next.
"""

import argparse
import json
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from grader.cli.options import add_grading_options, grading_options
from grader.core.course import CourseError
from grader.core.stages import STAGES
from grader.intake.submission import SubmissionError, SubmissionFiles, read_submission
from grader.judge.routes_off import SWITCHED_OFF_EVERYWHERE
from grader.sandbox.zygote import Sandbox, SandboxError

DONE = "done"


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m grader.cli.serve", description=__doc__.splitlines()[0])
    parser.add_argument("--course", type=Path, metavar="FILE", help="the course settings, as for grading")
    add_grading_options(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    answers = sys.stdout  # the checks run with stdout taken (grader.judge.plugin.run_checks): answers go here
    try:
        # every stage: a request's folder holds the stage files it has, whichever the course grades
        options = replace(grading_options(args, args.course), stages=tuple(STAGES))
        sandbox = Sandbox(options.device, options.sandbox, switched_off=SWITCHED_OFF_EVERYWHERE)
    except (CourseError, SandboxError) as error:
        print(f"grader: {error}", file=sys.stderr)
        return 2
    # torch, pytest and the judge are imported here, after the sandbox's zygote has started importing its own
    from grader.core.report import to_json
    from grader.judge.session import GradingError, grade_each
    from grader.views.feedback import student_view

    reports: list[Path] = []  # the report file of the request being graded

    def requests() -> Iterator[SubmissionFiles]:
        for line in sys.stdin:
            try:
                request = json.loads(line)
                staged = read_submission(Path(request["folder"]))
            except (ValueError, KeyError, TypeError, SubmissionError, OSError) as error:
                print(f"error: {str(error).splitlines()[0] if str(error) else type(error).__name__}", file=answers)
                answers.flush()
                continue
            reports[:] = [Path(request["report"])]
            yield staged

    def deliver(report) -> None:
        reports[0].write_text(to_json(student_view(report)))
        print(DONE, file=answers, flush=True)

    with sandbox:
        try:
            grade_each(sandbox, requests(), deliver, options)
        except GradingError as error:
            print(f"error: {str(error).splitlines()[0]}", file=answers, flush=True)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
