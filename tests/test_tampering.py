"""Learner code that hides what it runs from the grader, or rewrites what it recorded, gains nothing and is told why."""

import pytest

from tests.grading import grade, learner_copy, stage_scores
from tests.tampering import ATTACKS, FORGED_V2_RECORD


def checks_of(report: dict, stage: int) -> list[dict]:
    return next(s["checks"] for s in report["stages"] if s["id"] == f"stage{stage}")


@pytest.mark.parametrize("attack", ATTACKS, ids=[a["what"] for a in ATTACKS])
def test_hiding_from_the_grader_voids_the_function_that_hides(attack, tmp_path):
    stage = attack["stage"]
    folder = learner_copy(tmp_path / "submission", attack, stages=[stage])
    result, report = grade(folder, "--stage", str(stage))
    targeted = [c for c in checks_of(report, stage) if c["id"].endswith(attack["voided"])]
    assert targeted and all(c["score"] == 0 for c in targeted), result.stdout
    hint = attack.get("hint", "recorder-tampered")
    assert {c["hint"] for c in targeted if c["id"].startswith("shortcut.")} == {hint}, result.stdout
    told = "which this check switches off" if hint == "banned-api" else "the grader could not see the operations"
    assert told in result.stdout
    others = [c for c in checks_of(report, stage) if c not in targeted]
    assert all(c["score"] == c["max_score"] for c in others), result.stdout


def test_reaching_into_the_grader_anywhere_voids_every_watched_function_of_the_stage(tmp_path):
    folder = learner_copy(tmp_path / "submission", stages=[2])
    stage2 = folder / "stage2_self_attention.py"
    stage2.write_text(
        stage2.read_text() + "\n\ndef _where_am_i():\n    import inspect\n    return inspect.currentframe()\n"
    )
    result, report = grade(folder, "--stage", "2")
    checks = {c["id"]: c for c in checks_of(report, 2)}
    for cls in ("SelfAttention_v1", "SelfAttention_v2"):
        assert checks[f"shortcut.{cls}"]["hint"] == "recorder-tampered", result.stdout
        assert "currentframe (line" in checks[f"shortcut.{cls}"]["message"]
        assert checks[f"random.{cls}"]["score"] == checks[f"document.{cls}"]["score"] == 0, result.stdout


def test_a_transfer_that_forges_the_record_of_v2_gains_nothing_even_unread(tmp_path):
    copies_nothing = {**FORGED_V2_RECORD, "replace": "    return sa_v1"}
    _, honest = grade(learner_copy(tmp_path / "honest", copies_nothing, stages=[3]), "--stage", "3")
    _, forged = grade(learner_copy(tmp_path / "forged", FORGED_V2_RECORD, stages=[3]), "--stage", "3")
    assert stage_scores(forged)[3] <= stage_scores(honest)[3] < 20
    assert all(c["score"] == 0 for c in checks_of(forged, 3) if c["id"].startswith(("random.", "property.")))
