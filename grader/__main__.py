"""`python -m grader SUBMISSION [--stage N]`: check a submission against the documents' values.

This is the seeded-value check only: it reports, stage by stage, which of the documents'
printed values a submission reproduces. It gives no score.
"""

import argparse
import sys
from pathlib import Path

from grader.runner.document_examples import run_recipe
from grader.document_values import document_values
from grader.runner.implementation import STAGE_MODULES, load_folder

TITLES = {
    1: "simple attention and a naive softmax",
    2: "SelfAttention_v1 / SelfAttention_v2",
    3: "weight transfer v2 -> v1",
    4: "CausalAttention: mask and dropout",
    5: "multi-head attention",
}


def check_stage(implementation, stage: int) -> tuple[int, int, list[str]]:
    """(values reproduced, values checked, lines to show) for one stage."""
    # Values that use none of the learner's names only test torch itself.
    values = [value for value in document_values(stage) if value.uses]
    if stage in implementation.problems:
        return 0, len(values), [implementation.problems[stage]]
    reproduced, lines = 0, []
    for value in values:
        try:
            problem = value.check(run_recipe(value.recipe, implementation))
        except NotImplementedError as error:
            problem = f"not implemented: {error}"
        except Exception as error:  # the learner's exception is feedback, not a grader crash
            problem = f"raised {type(error).__name__}: {error}"
        if problem is None:
            reproduced += 1
        elif problem not in lines:
            lines.append(f"{value.id}: {problem}" if not problem.startswith("not implemented") else problem)
    return reproduced, len(values), lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader", description=__doc__)
    parser.add_argument("submission", type=Path, help="folder holding some or all of the five stage files")
    parser.add_argument("--stage", type=int, choices=sorted(STAGE_MODULES), help="check one stage only")
    args = parser.parse_args(argv)
    if not args.submission.is_dir():
        print(f"grader: {args.submission} is not a folder", file=sys.stderr)
        return 2

    implementation = load_folder(args.submission)
    stages = [args.stage] if args.stage else list(STAGE_MODULES)
    print(f"Document values reproduced by {args.submission} (a check, not a score)\n")
    first_open = None
    for stage in stages:
        reproduced, total, lines = check_stage(implementation, stage)
        mark = "✓" if reproduced == total else "✗"
        print(f"{mark} stage {stage} ({TITLES[stage]}): {reproduced}/{total}")
        for line in lines[:3]:
            print(f"    {line}")
        if reproduced < total and first_open is None:
            first_open = stage
    if first_open is not None:
        module = STAGE_MODULES[first_open]
        print(f"\nNext: open {args.submission}/{module}.py and read docs/stage{first_open}.md.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
