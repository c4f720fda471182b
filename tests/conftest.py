import os
from pathlib import Path

import pytest

from grader.core.stages import STAGE_MODULES
from grader.runner.implementation import Implementation, load_package

REPO = Path(__file__).resolve().parents[1]


def seeds_dir() -> Path:
    """The seed documents: $SEEDS_DIR, else ../shared/seeds beside the checkout (as in CI)."""
    return Path(os.environ.get("SEEDS_DIR", REPO.parent / "shared" / "seeds"))


@pytest.fixture(scope="session")
def solutions() -> Implementation:
    implementation = load_package("solutions", STAGE_MODULES)
    assert not implementation.problems, implementation.problems
    return implementation


@pytest.fixture(scope="session")
def exercises() -> Implementation:
    implementation = load_package("exercises", STAGE_MODULES)
    assert not implementation.problems, implementation.problems
    return implementation
