"""Learner code that rewrites what the worker records beside it gains nothing, and is told why."""

from tests.grading import grade, learner_copy, stage_scores
from tests.tampering import FORGED_V2_RECORD


def checks_of(report: dict, stage: int) -> list[dict]:
    return next(s["checks"] for s in report["stages"] if s["id"] == f"stage{stage}")


def test_a_transfer_that_forges_the_record_of_v2_gains_nothing(tmp_path):
    copies_nothing = {**FORGED_V2_RECORD, "replace": "    return sa_v1"}
    _, honest = grade(learner_copy(tmp_path / "honest", copies_nothing, stages=[3]), "--stage", "3")
    _, forged = grade(learner_copy(tmp_path / "forged", FORGED_V2_RECORD, stages=[3]), "--stage", "3")
    assert stage_scores(forged)[3] <= stage_scores(honest)[3] < 20
    assert all(c["score"] == 0 for c in checks_of(forged, 3) if c["id"].startswith(("random.", "property.")))
