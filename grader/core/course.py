"""The course settings an instructor writes once (course.toml at the root of this tree): which tracks
are graded, and the late policy (grader/core/late_policy.py). Every command reads the same file, and what
is built from this tree for students (the release, the Gradescope zip, the nbgrader course) carries
the setting of its tracks along."""

from pathlib import Path

from grader.core.stages import BONUS, CORE, NOTE_KIND, is_note, registry, stages_of
from grader.core.toml_file import read_toml

COURSE_FILE = Path(__file__).resolve().parents[2] / "course.toml"


class CourseError(ValueError):
    """The course file cannot be used; its message is one line."""


def read_course(path: Path | None) -> dict:
    """The course file's table: ``path``, else course.toml at this tree's root if there is one, else {}."""
    if path is None:
        if not COURSE_FILE.is_file():
            return {}
        path = COURSE_FILE
    return read_toml(Path(path), CourseError)


BONUS_MODES = ("extra", "required")


def _bonus_setting(course: dict, path: Path | None) -> tuple[str | None, float | None]:
    """([stages] bonus as a mode: None when the bonus stages are off, "extra" or "required"; bonus_cap or None).
    ``bonus = true`` is "extra": bonus points add to the core's score and never to its maximum."""
    settings = course.get("stages", {})
    where = path or COURSE_FILE
    if not isinstance(settings, dict) or set(settings) - {"bonus", "bonus_cap"}:
        raise CourseError(f'{where}: [stages] holds bonus = false, true, "extra" or "required", and bonus_cap')
    bonus = settings.get("bonus", False)
    if bonus is True:
        bonus = "extra"
    if bonus is not False and bonus not in BONUS_MODES:
        raise CourseError(f'{where}: stages.bonus = {bonus!r}; write false, true, "extra" or "required"')
    cap = settings.get("bonus_cap")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, (int, float)) or not 0 <= cap < float("inf")):
        raise CourseError(f"{where}: stages.bonus_cap = {cap!r} is not a number of points")
    if cap is not None and bonus != "extra":
        raise CourseError(f'{where}: stages.bonus_cap caps extra credit: it needs bonus = "extra" (or true)')
    return (bonus or None), (float(cap) if cap is not None else None)


def tracks(course: dict, path: Path | None = None) -> tuple[str, ...]:
    """The tracks a course grades: the core always, the bonus when [stages] bonus is on."""
    mode, _ = _bonus_setting(course, path)
    return (CORE, BONUS) if mode else (CORE,)


def extra_credit(course: dict, path: Path | None = None) -> dict | None:
    """How the bonus stages count where they are extra credit ({"cap": points or None}: the bonus points added to
    the core's score at most), the reports' ``extra_credit``; None where they are off or required (their points
    then count toward the maximum as the core's do)."""
    mode, cap = _bonus_setting(course, path)
    return {"cap": cap} if mode == "extra" else None


def note_prices(course: dict, path: Path | None = None) -> dict[str, dict[str, float]]:
    """stage id -> note check id -> points, from the course's [notes] table ("stage3.in_place" = 2): the notes
    an instructor prices. A note costs nothing otherwise."""
    where = path or COURSE_FILE
    table = course.get("notes", {})
    if not isinstance(table, dict):
        raise CourseError(f'{where}: [notes] is a table of "stage<N>.<note>" = points')
    known = {
        f"{stage.id}.{check.removeprefix(NOTE_KIND + '.')}": (stage.id, check)
        for stage in registry().values()
        for check in stage.points
        if is_note(check)
    }
    listed = ", ".join(sorted(known))
    # the check's own id spelled in full ("stage3.note.in_place", as points files and reports write it): the same
    known |= {f"{stage}.{check}": (stage, check) for stage, check in list(known.values())}
    prices: dict[str, dict[str, float]] = {}
    for key, value in table.items():
        if key not in known:
            raise CourseError(f"{where}: notes.{key} is no note; the notes are {listed}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
            raise CourseError(f"{where}: notes.{key} = {value!r} is not a number of points")
        stage, check = known[key]
        prices.setdefault(stage, {})[check] = value
    return prices


def course_title(course: dict, path: Path | None = None) -> str | None:
    """The course's name as pages show it ([course] title = "..."), or None where the file gives none."""
    table = course.get("course", {})
    where = path or COURSE_FILE
    if not isinstance(table, dict) or set(table) - {"title"}:
        raise CourseError(f'{where}: [course] holds one setting, title = "..."')
    title = table.get("title")
    if title is not None and (not isinstance(title, str) or not title.strip()):
        raise CourseError(f"{where}: course.title = {title!r}; write the course's name in quotes")
    return title.strip() if title else None


KEEP_RULES = ("latest", "best")


def gradebook_keeps(course: dict, path: Path | None = None) -> str:
    """Which of a student's reports the gradebook shows ([gradebook] keep): "latest" (the default) or "best"
    (grader/classroom/history.py)."""
    table, where = _gradebook(course, path)
    keep = table.get("keep", "latest")
    if keep not in KEEP_RULES:
        raise CourseError(f'{where}: gradebook.keep = {keep!r}; write "latest" or "best"')
    return keep


def gradebook_anonymous(course: dict, path: Path | None = None) -> bool:
    """Whether the class is graded anonymously ([gradebook] anonymous = true): no student's name in any output
    until a batch run with --reveal (grader/classroom/names.py)."""
    table, where = _gradebook(course, path)
    anonymous = table.get("anonymous", False)
    if not isinstance(anonymous, bool):
        raise CourseError(f"{where}: gradebook.anonymous = {anonymous!r}; write true or false")
    return anonymous


def _gradebook(course: dict, path: Path | None) -> tuple[dict, Path]:
    table, where = course.get("gradebook", {}), path or COURSE_FILE
    if not isinstance(table, dict) or set(table) - {"keep", "anonymous"}:
        raise CourseError(
            f'{where}: [gradebook] holds two settings, keep = "latest" or "best", and anonymous = true or false'
        )
    return table, where


def course_stages(path: Path | None = None) -> list[int]:
    """The stages graded by default under the course file at ``path`` (None: this tree's course.toml)."""
    return stages_of(tracks(read_course(path), path))


def built_course_text(stages: list[int], path: Path | None) -> str:
    """course_text for what is built from this tree under the course file at ``path``, read once."""
    course = read_course(path)
    return course_text(stages, note_prices(course, path), extra_credit(course, path))


def course_text(stages: list[int], notes: dict[str, dict[str, float]] | None = None, extra: dict | None = None) -> str:
    """The course.toml written into what is built for students to grade ``stages``: the tracks setting (bonus
    stages as extra credit, ``extra``, or required), and the prices of the notes (note_prices) where the
    instructor gave some."""
    bonus = any(registry()[number].track == BONUS for number in stages)
    mode = ('"extra"' if extra is not None else '"required"') if bonus else "false"
    cap = f"bonus_cap = {extra['cap']:g}\n" if bonus and extra is not None and extra.get("cap") is not None else ""
    priced = "".join(
        f'"{stage}.{check.removeprefix(NOTE_KIND + ".")}" = {value:g}\n'
        for stage, checks in (notes or {}).items()
        for check, value in checks.items()
    )
    return (
        "# Written by the instructor's build: the stages graded here. Do not edit.\n"
        f"[stages]\nbonus = {mode}\n{cap}" + (f"\n[notes]\n{priced}" if priced else "")
    )
