"""The late policy: due dates from the course file, the penalty at and around each boundary, and a
batch whose students carry the LMS's submission times."""

import csv
import datetime as dt
import json
import subprocess
import sys

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from grader.classroom.gradebook import due_cell
from grader.core.course import CourseError
from grader.core.late_policy import MARKED_LATE_WITHOUT_TIME, NO_SUBMISSION_TIME, LatePolicy, late_record, load_course
from grader.core.points import rounded
from grader.core.stages import STAGE_MODULES
from tests.conftest import REPO
from tests.grading import learner_copy

SCHEMA = json.loads((REPO / "grader" / "core" / "schemas" / "report.schema.json").read_text())
DUE = dt.datetime(2025, 3, 14, 23, 59, tzinfo=dt.timezone(dt.timedelta(hours=-5)))
MICROSECOND = dt.timedelta(microseconds=1)
HOUR, DAY = dt.timedelta(hours=1), dt.timedelta(days=1)


def stages(*scores: float, max_score: float = 20) -> list[dict]:
    return [{"id": f"stage{n}", "score": score, "max_score": max_score} for n, score in enumerate(scores, 1)]


# The penalty at its boundaries ------------------------------------------------------------------


def test_work_handed_in_at_the_due_time_is_on_time():
    policy = LatePolicy(due=DUE, per="hour", penalty=5)
    assert policy.percent(DUE, DUE) == 0 and policy.percent(DUE - DAY, DUE) == 0
    assert policy.percent(DUE + MICROSECOND, DUE) == 5  # a started hour counts whole


def test_each_started_unit_costs_the_penalty_once_and_a_finished_one_no_more():
    hourly, daily = LatePolicy(due=DUE, per="hour", penalty=5), LatePolicy(due=DUE, per="day", penalty=10)
    assert hourly.percent(DUE + HOUR, DUE) == 5 and hourly.percent(DUE + HOUR + MICROSECOND, DUE) == 10
    assert daily.percent(DUE + 23 * HOUR, DUE) == 10 and daily.percent(DUE + DAY, DUE) == 10
    assert daily.percent(DUE + DAY + MICROSECOND, DUE) == 20 and daily.percent(DUE + 3 * DAY, DUE) == 30


def test_the_grace_period_forgives_minutes_but_lateness_after_it_counts_from_the_due_time():
    policy = LatePolicy(due=DUE, per="day", penalty=10, grace=dt.timedelta(minutes=15))
    assert policy.percent(DUE + dt.timedelta(minutes=15), DUE) == 0
    assert policy.percent(DUE + dt.timedelta(minutes=15) + MICROSECOND, DUE) == 10
    assert policy.percent(DUE + DAY + dt.timedelta(minutes=5), DUE) == 20


def test_the_penalty_stops_at_the_cap():
    policy = LatePolicy(due=DUE, per="day", penalty=10, cap=25)
    assert policy.percent(DUE + 2 * DAY, DUE) == 20 and policy.percent(DUE + 3 * DAY, DUE) == 25
    assert policy.percent(DUE + 300 * DAY, DUE) == 25


def test_a_fraction_of_a_second_late_shows_as_late_as_it_is_charged():
    """0.4 s after the due time costs a started hour: the record shows the fraction and some lateness."""
    submitted = DUE + dt.timedelta(milliseconds=400)
    record = late_record(LatePolicy(due=DUE, per="hour", penalty=10), submitted, False, stages(20))
    assert record["penalty_percent"] == 10
    assert record["submitted"] == "2025-03-15T04:59:00.400000+00:00" and record["submitted"] != record["due"]
    assert record["hours_late"] == 0.01 and record["stages"][0]["hours_late"] == 0.01
    on_time = late_record(LatePolicy(due=DUE, per="hour", penalty=10), DUE, False, stages(20))
    assert on_time["hours_late"] == 0 and on_time["submitted"] == on_time["due"] == "2025-03-15T04:59:00+00:00"
    exactly_an_hour = late_record(LatePolicy(due=DUE, per="hour", penalty=10), DUE + HOUR, False, stages(20))
    assert exactly_an_hour["hours_late"] == 1


def test_a_late_stage_loses_a_share_of_its_points_possible_but_never_more_than_it_earned():
    policy = LatePolicy(due=DUE, per="day", penalty=10)
    late = late_record(policy, DUE + 1.5 * DAY, False, stages(20, 10, 3, 0, 20))  # 2 started days: 20 %
    assert [s["penalty_points"] for s in late["stages"]] == [4, 4, 3, 0, 4]
    assert late["penalty_points"] == 15 and late["penalty_percent"] == 20 and late["hours_late"] == 36
    assert late["submitted"] == "2025-03-16T16:59:00+00:00" and late["due"] == "2025-03-15T04:59:00+00:00"


def test_a_stage_with_its_own_due_date_is_penalised_by_it_and_the_others_by_the_assignments():
    policy = LatePolicy(due=DUE, stage_due={"stage1": DUE - 7 * DAY}, per="day", penalty=10)
    late = late_record(policy, DUE - 4.5 * DAY, False, stages(20, 20, 20, 20, 20))
    assert [s["penalty_percent"] for s in late["stages"]] == [30, 0, 0, 0, 0]
    assert late["penalty_points"] == 6 and late["penalty_percent"] == 0 and late["hours_late"] == 0
    assert late["stages"][0]["due"] == "2025-03-08T04:59:00+00:00" and late["stages"][0]["hours_late"] == 60
    # grades.csv's due says each stage's where one differs from the assignment's
    assert due_cell(late).startswith("stage1 2025-03-08T04:59:00+00:00; stage2 2025-03-15T04:59:00+00:00")
    same = late_record(LatePolicy(due=DUE, per="day", penalty=10), DUE, False, stages(20, 20))
    assert due_cell(same) == "2025-03-15T04:59:00+00:00"


def test_points_are_rounded_as_report_scores_are():
    late = late_record(LatePolicy(due=DUE, per="hour", penalty=1), DUE + HOUR, False, stages(10, max_score=33.333))
    assert late["penalty_points"] == 0.33


def test_without_a_submission_time_no_one_is_penalised_and_the_flag_says_why():
    due_set = LatePolicy(due=DUE, per="day", penalty=10)
    assert late_record(due_set, None, False, stages(20))["flags"] == [NO_SUBMISSION_TIME]
    marked = late_record(due_set, None, True, stages(20))
    assert marked["flags"] == [MARKED_LATE_WITHOUT_TIME] and marked["penalty_points"] == 0
    assert late_record(LatePolicy(), None, False, stages(20))["flags"] == []  # no due date: nothing to miss
    on_time = late_record(due_set, DUE, True, stages(20))  # a time rules over Canvas's mark
    assert on_time["flags"] == [] and on_time["penalty_points"] == 0


def test_a_time_the_download_holds_but_the_grader_cannot_read_is_named_in_the_flag():
    due_set = LatePolicy(due=DUE, per="day", penalty=10)
    why = 'ada/timestamp.txt is not a time: it begins "yesterday at noon"'
    unread = late_record(due_set, None, False, stages(20), why)
    assert unread["flags"] == [f"{NO_SUBMISSION_TIME}: {why}"] and unread["penalty_points"] == 0
    jsonschema.validate(unread["flags"], SCHEMA["properties"]["late"]["properties"]["flags"])
    assert late_record(LatePolicy(), None, False, stages(20), why)["flags"] == []  # no due date: nothing to miss


units = st.sampled_from(["day", "hour"])
offsets = st.timedeltas(min_value=-3 * DAY, max_value=30 * DAY)


@given(
    per=units,
    penalty=st.floats(0, 100),
    cap=st.floats(0, 100),
    grace=st.integers(0, 24 * 60),
    first=offsets,
    second=offsets,
    scores=st.lists(st.floats(0, 20).map(rounded), min_size=1, max_size=5),
)
def test_handing_in_later_never_costs_less_and_never_more_than_the_score(
    per, penalty, cap, grace, first, second, scores
):
    policy = LatePolicy(due=DUE, per=per, penalty=penalty, cap=cap, grace=dt.timedelta(minutes=grace))
    earlier, later = sorted([DUE + first, DUE + second])
    assert policy.percent(earlier, DUE) <= policy.percent(later, DUE) <= cap
    sooner, after = (late_record(policy, moment, False, stages(*scores)) for moment in (earlier, later))
    assert sooner["penalty_points"] <= after["penalty_points"] <= sum(scores) + 1e-9


# The course file ---------------------------------------------------------------------------------


def test_without_a_course_file_there_is_no_due_date_and_no_penalty():
    policy = load_course(None)
    assert policy == LatePolicy() and not policy.has_due_date and policy.penalty == 0


def test_a_course_file_sets_due_dates_and_the_penalty_rule(tmp_path):
    course = tmp_path / "course.toml"
    course.write_text(
        "[due]\nassignment = 2025-03-14T23:59:00-05:00\nstage1 = 2025-03-07T23:59:00Z\n\n"
        '[late_penalty]\nper = "hour"\npenalty = 2.5\ncap = 50\ngrace = 10\n'
    )
    assert load_course(course) == LatePolicy(
        DUE, {"stage1": dt.datetime(2025, 3, 7, 23, 59, tzinfo=dt.UTC)}, "hour", 2.5, 50, dt.timedelta(minutes=10)
    )


@pytest.mark.parametrize(
    "text, said",
    [
        (
            "[due]\nassignment = 2025-03-14T23:59:00\n",
            "due.assignment = 2025-03-14T23:59:00 needs a date, a time and a UTC offset",
        ),
        (
            '[due]\nassignment = "2025-03-14T23:59:00Z"\n',
            "due.assignment = '2025-03-14T23:59:00Z' needs a date, a time and a UTC offset "
            "(unquoted: a TOML date-time, not text)",
        ),
        ("[due]\nassignment = 2025-03-14\n", "due.assignment = 2025-03-14 needs a date, a time and a UTC offset"),
        ("[due]\nstage9 = 2025-03-14T23:59:00Z\n", "unknown setting due.stage9"),  # the registry has stages 1-8
        ('[late_penalty]\npenalty = 10\npre = "day"\n', "unknown setting late_penalty.pre"),
        ('[late_penalty]\nper = "week"\n', 'late_penalty.per = \'week\'; write "day" or "hour"'),
        ("[late_penalty]\npenalty = -5\n", "late_penalty.penalty = -5 must be a number, 0 or more"),
        ("[late_penalty]\ncap = 150\n", "late_penalty.cap = 150 is over 100 percent"),
        (
            "[late]\npenalty = 10\n",
            "unknown setting late (known: course, due, extensions, gradebook, late_penalty, notes, stages)",
        ),
        ("[extensions]\nada = 2025-03-20T23:59:00\n", "extensions.ada = 2025-03-20T23:59:00 needs a date, a time"),
        ("[extensions]\nada = { stage9 = 2025-03-20T23:59:00Z }\n", "unknown setting extensions.ada.stage9"),
        ("[extensions]\nada = 3\n", "extensions.ada = 3 needs a date, a time and a UTC offset"),
        ("extensions = 3\n", "[extensions] is a table of student id = due time"),
        ('[gradebook]\nkeep = "first"\n', 'gradebook.keep = \'first\'; write "latest" or "best"'),
        ("[due]\nassignment = 2025-03-14T23:59:00Z\n[late_penalty]\nslip_days = -1\n", "slip_days = -1 must be"),
        ("[due]\nassignment = 2025-03-14T23:59:00Z\n[late_penalty]\nslip_days = 1.5\n", "slip_days = 1.5 must be"),
        ("[due\n", "Expected ']'"),
        ("due = 2025-03-14T23:59:00Z\n", "due must be a table, [due], holding assignment, stage1"),
        ("[late_penalty]\ngrace = 1e300\n", "late_penalty.grace = 1e+300 minutes is longer than any term"),
        # "no real deadline" written in the course's own zone: no UTC time can say it
        (
            "[due]\nassignment = 9999-12-31T23:59:00-05:00\n",
            "due.assignment = 9999-12-31T23:59:00-05:00 is past the last",
        ),
        # a penalty with nothing to be late for would never apply: the instructor forgot [due]
        ('[late_penalty]\nper = "day"\npenalty = 10\n', "[late_penalty] with no [due]"),
        ("[due]\n\n[late_penalty]\npenalty = 10\n", "[late_penalty] with no [due]"),
    ],
)
def test_a_course_file_that_cannot_be_used_is_refused_in_one_line(tmp_path, text, said):
    course = tmp_path / "course.toml"
    course.write_text(text)
    with pytest.raises(CourseError) as refused:
        load_course(course)
    assert said in str(refused.value) and "\n" not in str(refused.value), refused.value


# Extensions and slip days ------------------------------------------------------------------------


def test_an_extension_moves_a_students_due_dates_later_and_never_earlier():
    stage1_due = DUE - 7 * DAY
    policy = LatePolicy(
        due=DUE,
        stage_due={"stage1": stage1_due},
        per="day",
        penalty=10,
        extensions={"ada": {"assignment": DUE + 3 * DAY}, "bo": {"stage2": DUE + DAY}, "cy": {"assignment": DUE - DAY}},
    )
    assert policy.due_of("stage1", "ada") == DUE + 3 * DAY and policy.due_of("stage2", "ada") == DUE + 3 * DAY
    assert policy.due_of("stage1", "bo") == stage1_due and policy.due_of("stage2", "bo") == DUE + DAY
    assert policy.due_of("stage2", "cy") == DUE  # an extension never moves a due date earlier
    assert policy.due_of("stage1", "cy") == DUE - DAY  # and moves every later one it reaches
    assert policy.due_of("stage2", "di") == DUE and policy.due_of("stage2") == DUE
    two_days_late = DUE + 2 * DAY
    ada = late_record(policy, two_days_late, False, stages(20, 20), student="ada")
    assert ada["penalty_points"] == 0 and ada["extended"] and ada["due"] == "2025-03-18T04:59:00+00:00"
    di = late_record(policy, two_days_late, False, stages(20, 20), student="di")  # no extension of their own
    assert [s["penalty_points"] for s in di["stages"]] == [18, 4] and not di["extended"]  # 9 and 2 days late


def test_slip_days_are_spent_where_they_lower_the_penalty_most_and_no_more():
    policy = LatePolicy(due=DUE, per="day", penalty=10, slip_days=3)
    on_time = late_record(policy, DUE, False, stages(20, 20))
    assert on_time["slip_days_used"] == 0 and on_time["penalty_points"] == 0
    a_day_and_a_half = late_record(policy, DUE + 1.5 * DAY, False, stages(20, 20))
    assert a_day_and_a_half["slip_days_used"] == 2 and a_day_and_a_half["penalty_points"] == 0
    assert a_day_and_a_half["due"] == "2025-03-17T04:59:00+00:00"  # the due time it was judged against
    five_days = late_record(policy, DUE + 5 * DAY, False, stages(20, 20))
    assert five_days["slip_days_used"] == 3 and five_days["penalty_points"] == 8  # 2 days left: 20 % of 40
    nothing_earned = late_record(policy, DUE + 1.5 * DAY, False, stages(0, 0))
    assert nothing_earned["slip_days_used"] == 0  # a day that saves nothing is not spent


@given(
    late_hours=st.integers(min_value=-48, max_value=24 * 12),
    budget=st.integers(min_value=0, max_value=6),
    scores=st.lists(st.integers(min_value=0, max_value=20), min_size=1, max_size=5),
)
def test_slip_days_never_cost_and_each_one_spent_saves_points(late_hours, budget, scores):
    with_days, without = (LatePolicy(due=DUE, per="day", penalty=15, cap=80, slip_days=days) for days in (budget, 0))
    submitted = DUE + late_hours * HOUR
    record = late_record(with_days, submitted, False, stages(*scores))
    assert 0 <= record["slip_days_used"] <= budget
    assert record["penalty_points"] <= late_record(without, submitted, False, stages(*scores))["penalty_points"]
    if record["slip_days_used"]:  # one day fewer would have cost more
        fewer = LatePolicy(due=DUE, per="day", penalty=15, cap=80, slip_days=record["slip_days_used"] - 1)
        assert late_record(fewer, submitted, False, stages(*scores))["penalty_points"] > record["penalty_points"]


def test_a_course_file_gives_extensions_and_slip_days(tmp_path):
    course = tmp_path / "course.toml"
    course.write_text(
        "[due]\nassignment = 2025-03-14T23:59:00-05:00\n\n[late_penalty]\npenalty = 10\nslip_days = 2\n\n"
        '[extensions]\nada = 2025-03-20T23:59:00Z\n"s-102" = { stage4 = 2025-03-21T23:59:00Z }\n'
    )
    policy = load_course(course)
    assert policy.slip_days == 2
    assert policy.extensions == {
        "ada": {"assignment": dt.datetime(2025, 3, 20, 23, 59, tzinfo=dt.UTC)},
        "s-102": {"stage4": dt.datetime(2025, 3, 21, 23, 59, tzinfo=dt.UTC)},
    }


# A batch with submission times -------------------------------------------------------------------

# The intake reads submission times from each LMS's export; here a stand-in sets them on the students
# it lists, and marks the ones named in "marked" late the way Canvas's LATE does.
WITH_TIMES = """
import dataclasses, datetime, json, sys
import grader.cli.batch

times, marked = json.loads(sys.argv[1]), json.loads(sys.argv[2])
listed = grader.cli.batch.list_students

def with_times(folder, layout):
    students, skipped = listed(folder, layout)
    return [dataclasses.replace(s, submitted=times.get(s.id) and datetime.datetime.fromisoformat(times[s.id]),
                                late_marked=s.id in marked) for s in students], skipped

grader.cli.batch.list_students = with_times
sys.exit(grader.cli.batch.main(sys.argv[3:]))
"""


def batch_with_times(times: dict, marked: list, *argv: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-c", WITH_TIMES, json.dumps(times), json.dumps(marked), *map(str, argv)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    return result


def test_a_class_graded_with_submission_times_gets_its_penalties_in_the_gradebook_and_reports(tmp_path):
    for name in ("ada", "bo", "cy", "di", "ed"):
        learner_copy(tmp_path / "class" / name, stages=[1])
    course = tmp_path / "course.toml"
    course.write_text(
        "[due]\nassignment = 2025-03-14T23:59:00-05:00\nstage1 = 2025-03-07T23:59:00-05:00\n\n"
        '[late_penalty]\nper = "day"\npenalty = 10\ncap = 50\ngrace = 15\n'
    )
    times = {
        "ada": "2025-03-07T23:59:00-05:00",  # stage 1's due time exactly
        "bo": "2025-03-09T12:00:00-05:00",  # 1.5 days after stage 1's: 2 started days
        "ed": "2025-03-08T00:10:00-05:00",
    }  # within the grace period
    out = tmp_path / "out"
    result = batch_with_times(times, ["di"], tmp_path / "class", "--out", out, "--workers", "2", "--course", course)
    assert "1 without a submission time, not penalised (flag no-submission-time)" in result.stderr
    assert "1 marked late by Canvas without a time, not penalised" in result.stderr
    assert "1 late, with their penalty in grades.csv" in result.stderr

    with open(out / "grades.csv", newline="") as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames == [
            "student_id",
            "score",
            "max_score",
            "stage1",
            "stage2",
            "stage3",
            "stage4",
            "stage5",
            "submitted",
            "due",
            "slip_days_used",
            "late_penalty",
            "final",
            "kept",
            "override",
            "override_reason",
            "flags",
        ]
        rows = {row["student_id"]: row for row in reader}
    columns = ("score", "submitted", "late_penalty", "final", "flags")
    rest = "missing: " + ", ".join(f"{STAGE_MODULES[n]}.py" for n in (2, 3, 4, 5))  # each handed in stage 1 alone
    assert {name: tuple(rows[name][c] for c in columns) for name in rows} == {
        "ada": ("20", "2025-03-08T04:59:00+00:00", "0", "20", rest),
        "bo": ("20", "2025-03-09T17:00:00+00:00", "4", "16", rest),
        "cy": ("20", "", "0", "20", f"{rest}; {NO_SUBMISSION_TIME}"),
        "di": ("20", "", "0", "20", f"{rest}; {MARKED_LATE_WITHOUT_TIME}"),
        "ed": ("20", "2025-03-08T05:10:00+00:00", "0", "20", rest),
    }
    report = json.loads((out / "students" / "bo.json").read_text())
    jsonschema.validate(report, SCHEMA)
    assert report["score"] == 20 and report["late"]["penalty_points"] == 4  # the raw score stays the raw score
    assert report["late"]["stages"][0] == {
        "id": "stage1",
        "due": "2025-03-08T04:59:00+00:00",
        "hours_late": 36.02,
        "penalty_percent": 20,
        "penalty_points": 4,
    }
    # the student reads it in their feedback; students on time read nothing of it
    assert (
        "late: handed in 2025-03-09T17:00:00+00:00 (UTC); penalty 4 points (stage1 36.02 h late, -4)"
        in (out / "students" / "bo.txt").read_text()
    )
    assert "late:" not in (out / "students" / "ed.txt").read_text()

    # A due date moved after grading: no one is graded again, and every penalty follows the new date.
    course.write_text("[due]\nassignment = 2025-03-14T23:59:00-05:00\n\n[late_penalty]\npenalty = 10\n")
    result = batch_with_times(times, ["di"], tmp_path / "class", "--out", out, "--course", course)
    assert "0 of 5 to grade; 5 unchanged" in result.stderr
    assert json.loads((out / "students" / "bo.json").read_text())["late"]["penalty_points"] == 0
    assert "late:" not in (out / "students" / "bo.txt").read_text()  # the feedback follows the new date too
    assert "2025-03-09T17:00:00+00:00,2025-03-15T04:59:00+00:00,0,0,20,latest,,," in (out / "grades.csv").read_text()


def test_a_class_with_an_extension_and_slip_days_shows_each_students_due_time_and_days_used(tmp_path):
    for name in ("ada", "bo", "cy"):
        learner_copy(tmp_path / "class" / name, stages=[1])
    course = tmp_path / "course.toml"
    course.write_text(
        "[due]\nassignment = 2025-03-14T23:59:00-05:00\n\n"
        '[late_penalty]\nper = "day"\npenalty = 10\nslip_days = 1\n\n'
        "[extensions]\nada = 2025-03-18T23:59:00-05:00\nadda = 2025-03-18T23:59:00-05:00\n"  # adda: a typo
    )
    times = {name: "2025-03-17T12:00:00-05:00" for name in ("ada", "bo", "cy")}  # 2.5 days after the due time
    out = tmp_path / "out"
    result = batch_with_times(times, [], tmp_path / "class", "--out", out, "--workers", "2", "--course", course)
    assert f"{course} [extensions] gives due times to 1 id of no student of the class: adda" in result.stderr
    with open(out / "grades.csv", newline="") as handle:
        rows = {row["student_id"]: row for row in csv.DictReader(handle)}
    shown = {name: (row["due"], row["slip_days_used"], row["late_penalty"], row["final"]) for name, row in rows.items()}
    assert shown == {
        "ada": ("2025-03-19T04:59:00+00:00", "0", "0", "20"),  # their extension: on time, no slip day spent
        "bo": ("2025-03-16T04:59:00+00:00", "1", "4", "16"),  # one slip day: 1.5 days left, 2 started: 20 %
        "cy": ("2025-03-16T04:59:00+00:00", "1", "4", "16"),
    }
    report = json.loads((out / "students" / "bo.json").read_text())
    jsonschema.validate(report, SCHEMA)
    assert report["late"]["slip_days_used"] == 1 and not report["late"]["extended"]
    assert json.loads((out / "students" / "ada.json").read_text())["late"]["extended"]
    assert "; 1 slip day used" in (out / "students" / "bo.txt").read_text()
