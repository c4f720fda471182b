"""The points in force: the registry's, the course's note prices and a points file's stages compose, and a
points file that moves a note price or a stage's maximum says so, a line each (issue 35)."""

import subprocess
import sys
import tomllib

from grader.core.course import note_prices, read_course
from grader.core.points import points_in_use
from tests.conftest import REPO


def points_cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "grader.cli.points", *map(str, args)], cwd=REPO, capture_output=True, text=True
    )


def test_a_points_file_written_with_the_course_keeps_its_note_prices(tmp_path):
    course = tmp_path / "course.toml"
    course.write_text('[notes]\n"stage3.in_place" = 2\n')
    written = points_cli("--course", course)
    assert written.returncode == 0 and written.stderr == ""
    table = tomllib.loads(written.stdout)
    assert table["stage3"]["note.in_place"] == 2 and sum(table["stage3"].values()) == 22
    (tmp_path / "points.toml").write_text(written.stdout)
    points = points_in_use(note_prices(read_course(course), course), tmp_path / "points.toml")
    assert points.changes == () and points.stage_total(3) == 22  # the same prices: nothing to say


def test_a_points_file_that_moves_a_note_price_or_a_maximum_says_so(tmp_path):
    course = tmp_path / "course.toml"
    course.write_text('[notes]\n"stage3.in_place" = 2\n')
    registry = tmp_path / "registry.toml"
    registry.write_text(points_cli().stdout)  # notes at 0: the registry's alone
    points = points_in_use(note_prices(read_course(course), course), registry)
    assert points.stage_total(3) == 20  # the file's stage wins, as documented
    assert len(points.changes) == 2
    assert (
        "stage3 note.in_place is worth 0, where the course's note prices and the default points give 2"
        in points.changes[0]
    )
    assert (
        "stage3 is worth 20 in all, where the course's note prices and the default points give 22" in points.changes[1]
    )
    said = points_cli("--course", course, "--points", registry)
    assert said.returncode == 0 and said.stderr.count("\n") == 2 and "note.in_place" in said.stderr


def test_a_bad_course_or_points_file_is_one_line(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[stage3]\n")
    said = points_cli("--points", bad)
    assert said.returncode == 2 and said.stdout == "" and said.stderr.count("\n") == 1
