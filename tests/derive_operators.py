"""make operators: the right code the tests know (grading.correct_class: the references, the book's code, every
correct alternative and variant) graded with every operator recorded, written to grader/core/operators-derived.toml."""

import sys
import tempfile
from pathlib import Path

from grader.authoring.operators import main
from grader.core.stages import registry
from tests.grading import correct_class

if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        sys.exit(main([str(correct_class(Path(folder) / "class", tuple(registry())))]))
