"""The course settings an instructor writes once (course.toml at the root of this tree): which tracks
are graded, and the late policy (grader/late_policy.py). Every command reads the same file, and what
is built from this tree for students (the release, the Gradescope zip, the nbgrader course) carries
the setting of its tracks along."""

from pathlib import Path

from grader.stages import BONUS, CORE, registry, stages_of
from grader.toml_file import read_toml

COURSE_FILE = Path(__file__).resolve().parents[1] / "course.toml"


class CourseError(ValueError):
    """The course file cannot be used; its message is one line."""


def read_course(path: Path | None) -> dict:
    """The course file's table: ``path``, else course.toml at this tree's root if there is one, else {}."""
    if path is None:
        if not COURSE_FILE.is_file():
            return {}
        path = COURSE_FILE
    return read_toml(Path(path), CourseError)


def tracks(course: dict, path: Path | None = None) -> tuple[str, ...]:
    """The tracks a course grades: the core always, the bonus when [stages] bonus = true."""
    settings = course.get("stages", {})
    where = path or COURSE_FILE
    if not isinstance(settings, dict) or set(settings) - {"bonus"}:
        raise CourseError(f"{where}: [stages] holds one setting, bonus = true or false")
    bonus = settings.get("bonus", False)
    if not isinstance(bonus, bool):
        raise CourseError(f"{where}: stages.bonus = {bonus!r}; write true or false")
    return (CORE, BONUS) if bonus else (CORE,)


def course_stages(path: Path | None = None) -> list[int]:
    """The stages graded by default under the course file at ``path`` (None: this tree's course.toml)."""
    return stages_of(tracks(read_course(path), path))


def course_text(stages: list[int]) -> str:
    """The course.toml written into what is built for students to grade ``stages``: the tracks setting alone."""
    bonus = any(registry()[number].track == BONUS for number in stages)
    return ("# Written by the instructor's build: the stages graded here. Do not edit.\n"
            f"[stages]\nbonus = {'true' if bonus else 'false'}\n")
