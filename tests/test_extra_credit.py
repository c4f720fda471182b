"""Bonus stages as extra credit (issue 35, item 4): ``[stages] bonus = true`` or ``"extra"`` keeps the maximum at the
core's, adds the bonus points on top (up to ``bonus_cap``), flags no missing bonus file, and shows Gradescope a
bonus stage left out as not attempted; ``"required"`` counts them as the core's. One rule (report.totals) makes
every total: a graded report's, a re-priced one's, and the grade of record's."""

import json
from pathlib import Path

import jsonschema
import pytest

from grader.classroom.record import final_grade
from grader.core.course import CourseError, course_text, extra_credit, tracks
from grader.core.report import FlagKind, totals
from grader.core.stages import BONUS, CORE, registry
from tests.grading import REPO, grade, learner_copy

CORE_STAGES = [n for n, s in registry().items() if s.track == CORE]
BONUS_STAGES = [n for n, s in registry().items() if s.track == BONUS]


def _stage(track: str, score: float, max_score: float = 20) -> dict:
    return {"id": "stage", "title": "", "track": track, "score": score, "max_score": max_score, "checks": []}


@pytest.mark.parametrize(
    "extra, expected",
    [
        (None, (153, 160)),  # required: every stage counts toward both
        ({"cap": None}, (153, 100)),  # extra: the bonus on top
        ({"cap": 10}, (110, 100)),  # extra, capped
        ({"cap": 0}, (100, 100)),
    ],
)
def test_the_bonus_adds_to_the_score_and_not_to_the_maximum(extra, expected):
    stages = [_stage(CORE, 20)] * 5 + [_stage(BONUS, 20), _stage(BONUS, 18), _stage(BONUS, 15)]
    assert totals(stages, extra) == expected


def test_a_bonus_stage_graded_alone_is_scored_out_of_its_own_points():
    assert totals([_stage(BONUS, 12)], {"cap": 5}) == (12, 20)


def test_the_grade_of_record_follows_the_same_rule():
    report = {"stages": [_stage(CORE, 20)] * 5 + [_stage(BONUS, 20)], "extra_credit": {"cap": 15}}
    assert final_grade(report, [], {"penalty_points": 0}) == 115
    assert final_grade(report, [], {"penalty_points": 20}) == 95
    required = {k: v for k, v in report.items() if k != "extra_credit"}
    assert final_grade(required, [], {"penalty_points": 0}) == 120


@pytest.mark.parametrize(
    "stages, words",
    [
        ({"bonus": True}, ({"cap": None}, (CORE, BONUS))),
        ({"bonus": "extra", "bonus_cap": 12}, ({"cap": 12.0}, (CORE, BONUS))),
        ({"bonus": "required"}, (None, (CORE, BONUS))),
        ({"bonus": False}, (None, (CORE,))),
        ({}, (None, (CORE,))),
    ],
)
def test_the_course_file_says_how_the_bonus_counts(stages, words):
    course = {"stages": stages}
    assert (extra_credit(course), tracks(course)) == words


@pytest.mark.parametrize(
    "stages",
    [{"bonus": "yes"}, {"bonus": "required", "bonus_cap": 5}, {"bonus": True, "bonus_cap": -1}, {"bonus_max": 3}],
)
def test_a_setting_that_cannot_be_read_is_one_line(stages):
    with pytest.raises(CourseError) as raised:
        extra_credit({"stages": stages}, Path("course.toml"))
    assert "\n" not in str(raised.value) and "course.toml" in str(raised.value)


def test_what_is_built_for_students_carries_the_setting():
    every = CORE_STAGES + BONUS_STAGES
    assert 'bonus = "extra"\nbonus_cap = 7\n' in course_text(every, extra={"cap": 7.0})
    assert 'bonus = "required"' in course_text(every)
    assert "bonus = false" in course_text(CORE_STAGES, extra={"cap": None})


def _course(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "course.toml"
    path.write_text(f"[stages]\n{text}\n")
    return path


@pytest.fixture(scope="module")
def core_only(tmp_path_factory) -> Path:
    """The solutions of the core stages alone: a student who did no bonus stage."""
    return learner_copy(tmp_path_factory.mktemp("core") / "student", stages=CORE_STAGES)


def test_a_perfect_core_without_bonus_files_is_full_marks_and_not_missing(core_only, tmp_path):
    results = tmp_path / "results.json"
    _, report = grade(core_only, "--course", str(_course(tmp_path, "bonus = true")), "--gradescope", str(results))
    assert (report["score"], report["max_score"]) == (100, 100)
    assert report["extra_credit"] == {"cap": None}
    assert not [flag for flag in report["flags"] if flag.kind == FlagKind.MISSING]
    gradescope = json.loads(results.read_text())
    schema = json.loads((REPO / "grader" / "core" / "schemas" / "gradescope.schema.json").read_text())
    jsonschema.validate(gradescope, schema)
    assert gradescope["score"] == 100
    skipped = [t for t in gradescope["tests"] if "not attempted" in t["name"]]
    assert len(skipped) == len(BONUS_STAGES) and all("status" not in t for t in skipped)
    bonus_names = tuple(f"stage {n}:" for n in BONUS_STAGES)
    assert not [t for t in gradescope["tests"] if t["name"].startswith(bonus_names) and t.get("status") == "failed"]
    # the summary counts none of them as checks to pass (it said "Bonus stages: visible checks 0/34")
    assert "Bonus stages: visible checks" not in gradescope["output"]
    assert f"Bonus stages not attempted: {', '.join(map(str, BONUS_STAGES))}" in gradescope["output"]


def test_required_bonus_stages_count_toward_the_maximum_and_are_missing(core_only, tmp_path):
    _, report = grade(core_only, "--course", str(_course(tmp_path, 'bonus = "required"')))
    assert (report["score"], report["max_score"]) == (100, 160)
    assert "extra_credit" not in report
    assert [flag for flag in report["flags"] if flag.kind == FlagKind.MISSING]


def test_bonus_points_are_added_up_to_the_cap(tmp_path):
    student = learner_copy(tmp_path / "student")
    result, report = grade(student, "--course", str(_course(tmp_path, 'bonus = "extra"\nbonus_cap = 15')))
    assert (report["score"], report["max_score"]) == (115, 100)
    assert "Total: 115/100 (core 100/100, bonus 60/60 as extra credit, 15 at most)" in result.stdout
