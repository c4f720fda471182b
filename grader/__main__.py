"""python -m grader SUBMISSION [...]          grade one submission (grader/cli/grade.py)
   python -m grader batch SUBMISSIONS [...]  grade a class (grader/cli/batch.py)

The one entry point of the grader's commands: it names each command's module and runs it.
"""

import importlib
import os
import sys

# The commands besides grading one submission, each grader/cli/<name>.py. Their modules are named only when
# run: the student release ships none of them (grader/authoring/shipping.py follows every module named in
# full), and there `python -m grader batch` says so in one line instead of failing to import.
COMMANDS = ("batch",)
DEFAULT = "grader.cli.grade"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    name = f"grader.cli.{argv[0]}" if argv and argv[0] in COMMANDS else None
    try:
        command = importlib.import_module(name or DEFAULT)
    except ModuleNotFoundError as error:
        if name is None or not (error.name or "").startswith("grader."):
            raise
        print(
            f"grader: '{argv[0]}' is not part of this copy of the grader (the student release grades one "
            "submission: python -m grader exercises)",
            file=sys.stderr,
        )
        return 2
    return command.main(argv[1:] if name else argv)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # every file is written and closed; skipping torch's interpreter teardown saves ~0.5 s
