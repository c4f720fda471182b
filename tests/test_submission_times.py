"""Submission times from beside the download: Moodle's grading worksheet, or a CSV of ids and times."""

import csv
import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from grader.intake.submission_times import TimesError, load_times
from tests.grading import batch, learner_copy

WORKSHEET_HEADER = [
    "Identifier",
    "Full name",
    "Email address",
    "Status",
    "Grade",
    "Maximum grade",
    "Grade can be changed",
    "Last modified (submission)",
    "Online text",
    "Last modified (grade)",
    "Feedback comments",
]


def worksheet(path, rows: list[tuple[str, str]]):
    """A Moodle grading worksheet: (identifier, last modified) per participant, the other columns filled."""
    with open(path, "w", newline="", encoding="utf-8-sig") as handle:  # Moodle writes a BOM
        writer = csv.writer(handle)
        writer.writerow(WORKSHEET_HEADER)
        for identifier, modified in rows:
            writer.writerow(
                [
                    identifier,
                    "Fay Lee",
                    "fay@example.org",
                    "Submitted for grading",
                    "",
                    "100.00",
                    "Yes",
                    modified,
                    "",
                    "-",
                    "",
                ]
            )
    return path


def test_a_moodle_worksheet_gives_each_participant_their_time_in_the_zone_named(tmp_path):
    sheet = worksheet(
        tmp_path / "worksheet.csv",
        [
            ("Participant 101", "Monday, 6 November 2023, 4:57 PM"),
            ("Participant 102", "-"),
            ("Teilnehmer/in 103", "6 November 2023, 11:05 AM"),
        ],
    )
    times = load_times(sheet, "Europe/London")
    london = ZoneInfo("Europe/London")
    assert times == {
        "101": dt.datetime(2023, 11, 6, 16, 57, tzinfo=london),
        "103": dt.datetime(2023, 11, 6, 11, 5, tzinfo=london),
    }


def test_a_plain_csv_gives_ids_their_times(tmp_path):
    plain = tmp_path / "times.csv"
    plain.write_text("student_id,submitted\n12345,2026-03-14T23:59:00-05:00\n67890,\n")
    assert load_times(plain) == {"12345": dt.datetime(2026, 3, 15, 4, 59, tzinfo=dt.UTC)}


def test_a_plain_csvs_ids_are_read_in_unicodes_composed_form(tmp_path):
    plain = tmp_path / "times.csv"
    plain.write_text("student_id,submitted\nJose\u0301,2026-03-14T23:59:00Z\n")
    assert load_times(plain) == {"Jos\u00e9": dt.datetime(2026, 3, 14, 23, 59, tzinfo=dt.UTC)}
    plain.write_text("student_id,submitted\nJose\u0301,2026-03-14T23:59:00Z\nJos\u00e9,2026-03-15T23:59:00Z\n")
    with pytest.raises(TimesError, match="a second time for 'Jos\u00e9'"):
        load_times(plain)


@pytest.mark.parametrize(
    "text, zone, said",
    [
        (
            'Identifier,Last modified (submission)\nParticipant 1,"Monday, 6 November 2023, 4:57 PM"\n',
            None,
            "give the zone of whoever downloaded it",
        ),
        (
            'Identifier,Last modified (submission)\nParticipant 1,"Monday, 6 November 2023, 4:57 PM"\n',
            "Mars/Olympus",
            "no time zone the zone database knows",
        ),
        (
            'Identifier,Last modified (submission)\nParticipant 1,"lundi 6 novembre 2023, 16:57"\n',
            "Europe/Paris",
            "not a time as Moodle writes it in English",
        ),
        (
            'Identifier,Last modified (submission)\nFay Lee,"6 November 2023, 4:57 PM"\n',
            "UTC",
            "is not a participant number",
        ),
        ("student_id,submitted\n1,2026-03-14T23:59:00\n", None, "needs a date, a time and a UTC offset"),
        ("student_id,submitted\n1,2026-03-14T23:59:00Z\n1,2026-03-15T23:59:00Z\n", None, "a second time for '1'"),
        ("name,when\nada,yesterday\n", None, "nor 'student_id' and 'submitted'"),
        # year 1 east of UTC is before the first instant UTC can write
        (
            "student_id,submitted\nada,0001-01-01T00:00:00+05:00\n",
            None,
            "line 2: '0001-01-01T00:00:00+05:00' is outside",
        ),
        (
            'Identifier,Last modified (submission)\nParticipant 1,"1 January 0001, 12:00 AM"\n',
            "Asia/Tokyo",
            "is outside the years UTC can write",
        ),
        # 1:50 AM on the night the clocks go back happened twice (EDT, then EST): on time or an hour late
        (
            'Identifier,Last modified (submission)\nParticipant 102,"Sunday, 1 November 2026, 1:50 AM"\n',
            "America/New_York",
            "participant 102): 'Sunday, 1 November 2026, 1:50 AM' happened twice in America/New_York",
        ),
        # 2:30 AM on the night they go forward never happened
        (
            'Identifier,Last modified (submission)\nParticipant 7,"Sunday, 8 March 2026, 2:30 AM"\n',
            "America/New_York",
            "participant 7): 'Sunday, 8 March 2026, 2:30 AM' never happened in America/New_York",
        ),
    ],
)
def test_a_times_file_that_cannot_be_used_is_refused_in_one_line(tmp_path, text, zone, said):
    path = tmp_path / "times.csv"
    path.write_text(text)
    with pytest.raises(TimesError) as refused:
        load_times(path, zone)
    assert said in str(refused.value) and "\n" not in str(refused.value), refused.value


def test_a_moodle_class_with_its_worksheet_gets_late_penalties(tmp_path):
    download = tmp_path / "moodle"
    for name, number in (("Fay Lee", 101), ("Gus Ng", 102)):
        learner_copy(download / f"{name}_{number}_assignsubmission_file_", stages=[1])
    sheet = worksheet(
        tmp_path / "worksheet.csv",
        [
            ("Participant 101", "Friday, 13 March 2026, 11:00 PM"),
            ("Participant 102", "Sunday, 15 March 2026, 9:30 AM"),
            ("Participant 999", "Sunday, 15 March 2026, 9:30 AM"),
        ],
    )
    course = tmp_path / "course.toml"
    course.write_text(
        "[due]\nassignment = 2026-03-14T23:59:00+00:00\n\n"
        '[late_penalty]\nper = "day"\npenalty = 10\ncap = 50\ngrace = 0\n'
    )
    out = tmp_path / "grades"
    result = batch(
        download, out, "--workers", "2", "--course", str(course), "--times", str(sheet), "--times-zone", "Europe/London"
    )
    assert "gives times to 1 id of no student of the class: 999" in result.stderr
    with open(out / "grades.csv", newline="") as handle:
        rows = {row["student_id"]: row for row in csv.DictReader(handle)}
    assert rows["101"]["late_penalty"] == "0" and rows["101"]["final"] == rows["101"]["score"]
    assert rows["101"]["submitted"].startswith("2026-03-13T23:00:00")
    # 9:30 on the 15th in London is 9 h 31 min after the due time: one started day, 10 % of the 20 points graded
    assert float(rows["102"]["late_penalty"]) == 2 and float(rows["102"]["final"]) == float(rows["102"]["score"]) - 2
