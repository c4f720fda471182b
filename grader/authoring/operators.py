"""python -m grader.authoring.operators CLASS_FOLDER: derive the operators right code reaches, and write them to
grader/core/operators-derived.toml (the allowlist's derived part; grader/core/operators.toml says the rest).

Every student folder of CLASS_FOLDER (the references, the book's code, the correct variants: `make operators`
builds it) is graded as usual, every stage, bonus included, in a sandbox whose zygote refuses nothing and whose
workers tell the judge which operators each request reached (torch's profiler: every dispatcher call, composite
operators and backward kernels included). What the grader's own harness in a worker runs is recorded with it.
"""

import argparse
import sys
from pathlib import Path

from grader.core.operators import DERIVED_FILE, allowed_operators
from grader.core.options import GradingOptions
from grader.core.points import points_in_use
from grader.core.stages import registry
from grader.intake.submission import read_submission
from grader.judge.routes_off import SWITCHED_OFF_EVERYWHERE
from grader.judge.session import grade_staged
from grader.sandbox.zygote import Sandbox

HEADER = """\
# Written by `make operators` (python -m grader.authoring.operators): every aten operator that right code reaches
# when graded (the references, the book's code, the correct variants), the grader's own work in a worker included.
# Do not edit: change the code, or list an operator by hand in operators.toml's [alternatives].
"""


def derive(students: list[Path]) -> set[str]:
    """The aten operators (names without overload) that grading ``students`` reached in their workers."""
    options = GradingOptions(tuple(registry()), points_in_use(), timeout=30.0, budget=600.0)
    with Sandbox("cpu", "auto", switched_off=SWITCHED_OFF_EVERYWHERE, record_operators=True) as sandbox:
        for folder in students:
            report = grade_staged(sandbox, read_submission(folder), options)
            print(f"{folder.name}: {report['score']}/{report['max_score']}", file=sys.stderr)
        recorded = sandbox.recorded or set()
    return {name.removeprefix("aten::") for name in recorded if name.startswith("aten::")}


def write_derived(names: set[str], path: Path = DERIVED_FILE) -> None:
    listed = "".join(f'    "{name}",\n' for name in sorted(names))
    path.write_text(f"{HEADER}operators = [\n{listed}]\n", encoding="utf-8")
    allowed_operators.cache_clear()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.authoring.operators", description=__doc__)
    parser.add_argument("class_folder", type=Path, help="a folder of student folders, each of right code")
    args = parser.parse_args(argv)
    students = sorted(p for p in args.class_folder.iterdir() if p.is_dir())
    names = derive(students)
    write_derived(names)
    print(f"{DERIVED_FILE.name}: {len(names)} operators, from {len(students)} folders of right code")
    return 0


if __name__ == "__main__":
    sys.exit(main())
