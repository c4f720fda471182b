"""Every command the instructors' pages show works, as tests/test_readme.py proves the README's.

A command written out in full is run, as it stands, in a folder holding a made-up class in each
shape the pages name (make targets run in the repository, their path arguments pointed at that
folder). A synopsis (`[--workers N]`, `<download>`, `FILE`, `canvas|moodle`) cannot be run as it
stands: each option it names must be one the command takes. An nbgrader command is run by
tests/test_nbgrader.py; a make target named alone is accounted for as the README's are.
"""

import csv
import os
import re
import shlex
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from grader.core.points import points_file_text, points_in_use
from grader.core.stages import STAGES
from tests.grading import REPO, learner_copy
from tests.test_readme import PROVEN_BY_CI, PROVEN_BY_TESTS, RUN_HERE, STUDENT_REPOSITORY

PAGES = ["docs/instructors.md", "docs/grading-a-class.md"]
OURS = ("make ", "python -m ", ".venv/bin/python -m ", "nbgrader ")
# A word that stands for something the reader fills in, or marks the command as a synopsis.
PLACEHOLDER = re.compile(r"[\[\]<>|…]|\.\.\.|(?<![\w-])(FILE|N|ID|S|ZONE|NAME|COLUMN|DIR|dir|path|folder)(?![\w-])")
# Targets the pages name that are neither the README's nor run here: what proves each.
PROVEN_ELSEWHERE = {
    "nbgrader-reconcile": "tests/test_nbgrader.py",  # needs an autograded nbgrader term: that test runs one
    "similarity": "tests/test_similarity.py",
    "canvas-export": "tests/test_lms_export.py",
    "moodle-export": "tests/test_lms_export.py",
    "operators": "tests/test_operator_allowlist.py",  # derives the list again, from the references and the book
}
# Benchmarks print figures and take minutes: run by hand, never as tests (the pages quote them).
BENCHMARKS = {
    "bench-batch": "tests.benchmarks.bench_batch",
    "bench-grade": "tests.benchmarks.bench_grade",
    "bench-profile": "tests.benchmarks.bench_profile",
}
# Where the real nbgrader CLI is run: the nbgrader tests, and the term they run through make nbgrader-demo.
NBGRADER_RUNNERS = ["tests/test_nbgrader.py", "tests/test_nbgrader_exchange.py", "grader/authoring/nbgrader/demo.py"]
MOODLE_PARTICIPANTS = {"Fay Lee": "101", "Gus Ng": "102"}
CANVAS_STUDENTS = {"leefay": "12345", "nggus": "67890"}


def shown_commands() -> list[tuple[str, str]]:
    """(page, command) for every command of ours the pages show: code-block lines (a line that
    starts with spaces goes on the one before) and inline code that starts like one."""
    found = []
    for page in PAGES:
        text = (REPO / page).read_text(encoding="utf-8")
        for block in re.findall(r"```(?:sh|bash)\n(.*?)```", text, re.DOTALL):
            lines: list[str] = []
            for line in block.splitlines():
                if line.startswith(" ") and lines:
                    lines[-1] += " " + line.strip()
                elif line.strip() and not line.startswith("#"):
                    lines.append(line)
            found += [(page, _without_comment(line)) for line in lines]
        found += [(page, span) for span in re.findall(r"`([^`\n]+)`", text) if span.startswith(OURS)]
    return [(page, command) for page, command in dict.fromkeys(found) if command.startswith(OURS)]


def _without_comment(line: str) -> str:
    return re.sub(r"\s+#\s.*$", "", line).strip()


def is_synopsis(command: str) -> bool:
    """A command with a placeholder, or a module named without its arguments (`python -m grader`)."""
    return bool(PLACEHOLDER.search(command)) or command.split()[-2:-1] == ["-m"]


def commands(kind: str) -> list[str]:
    """The distinct commands of one kind: runnable ones, synopses, nbgrader's, or bare make targets."""
    chosen = []
    for _, command in shown_commands():
        words = command.split()
        if command.startswith("nbgrader "):
            own = "nbgrader"
        elif words[0] == "make" and (len(words) == 2 or words[1] in PROVEN_ELSEWHERE):
            own = "target"
        else:
            own = "synopsis" if is_synopsis(command) else "runnable"
        if own == kind and command not in chosen:
            chosen.append(command)
    return chosen


# Synopses: every option named is one the command takes -------------------------------------


def module_of(command: str) -> list[str]:
    """The `python -m` words a command runs (`grader batch`, `grader.cli.similarity`), a make target's from `make -n`."""
    words = shlex.split(PLACEHOLDER.sub("x", command.replace("|", " ")))
    if words[0] == "make":
        dry = subprocess.run(["make", "-s", "-n", *words[1:]], cwd=REPO, capture_output=True, text=True, env=as_typed())
        assert dry.returncode == 0, f"{command}: {dry.stderr}"
        words = shlex.split([line for line in dry.stdout.splitlines() if " -m " in line][-1])
    start = words.index("-m") + 1
    return (
        words[start : start + 2]
        if words[start] == "grader" and words[start + 1 : start + 2] == ["batch"]
        else words[start : start + 1]
    )


def as_typed() -> dict[str, str]:
    """The environment of a command a user types: not a sub-make of `make test`, which would print
    the folders it enters and pass its own flags on."""
    return {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}


@cache
def help_text(*module: str) -> str:
    done = subprocess.run([sys.executable, "-m", *module, "--help"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("command", commands("synopsis"))
def test_every_option_a_synopsis_names_is_one_the_command_takes(command):
    module = module_of(command)
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", command))
    if command.startswith("make "):
        named |= set(re.findall(r"--[a-z][a-z-]*", " ".join(re.findall(r"_ARGS='([^']*)'", command))))
    taken = set(re.findall(r"--[a-z][a-z-]*", help_text(*module)))
    assert named <= taken, f"{command}: {sorted(named - taken)} not in python -m {' '.join(module)} --help"


@pytest.mark.parametrize("command", commands("nbgrader"))
def test_every_nbgrader_command_is_run_by_the_nbgrader_tests(command):
    step = command.split()[1]
    runners = "".join((REPO / path).read_text(encoding="utf-8") for path in NBGRADER_RUNNERS)
    assert f'"{step}"' in runners, f"no nbgrader test runs {command}"


@pytest.mark.parametrize("command", commands("target"))
def test_every_target_named_alone_is_accounted_for(command):
    target = command.split()[1]  # its arguments, if any, are those of a command proven elsewhere
    if target in BENCHMARKS:
        assert module_of(command) == [BENCHMARKS[target]]
        return
    readme = RUN_HERE | PROVEN_BY_CI | set(PROVEN_BY_TESTS) | STUDENT_REPOSITORY
    assert target in readme or target in PROVEN_ELSEWHERE, f"nothing proves make {target}"
    if target in PROVEN_ELSEWHERE:
        module = module_of(f"make {target}" + _required_variables(target))
        assert ".".join(module) in (REPO / PROVEN_ELSEWHERE[target]).read_text(encoding="utf-8")


def _required_variables(target: str) -> str:
    """Stand-in values for the variables a target refuses to run without."""
    return " SUBMISSIONS=x OUT=x ROSTER=x COURSE=x" if target in PROVEN_ELSEWHERE else ""


# Runnable commands: run as they stand against a made-up class -------------------------------


@pytest.fixture(scope="module")
def course_folder(tmp_path_factory) -> Path:
    """A folder holding what the pages' commands name: a class in each shape, a course file (the
    page's own example), another points table, submission times and a roster."""
    root = tmp_path_factory.mktemp("docs")
    learner_copy(root / "submissions" / "ada")
    learner_copy(root / "submissions" / "bo", stages=[1, 2])
    learner_copy(root / "their-work", stages=[1])
    for name, number in MOODLE_PARTICIPANTS.items():
        learner_copy(root / "moodle" / f"{name}_{number}_assignsubmission_file_", stages=[1])
    canvas = root / "canvas"
    canvas.mkdir()
    for name, user in CANVAS_STUDENTS.items():
        for file in learner_copy(root / f"{name}-files", stages=[1]).iterdir():
            shutil.copy(file, canvas / f"{name}_{user}_{user}0_{file.name}")
    for step in ("course/submitted", "build/nbgrader/submitted", "build/nbgrader/autograded"):
        work = learner_copy(root / step / "ada" / "attention", stages=[1])
        (work / "timestamp.txt").write_text("2025-03-08 04:00:00.000000 UTC")
    (root / "course.toml").write_text(_page_block("docs/grading-a-class.md", "toml"), encoding="utf-8")
    (root / "my-points.toml").write_text(points_file_text())
    with open(root / "worksheet.csv", "w", newline="", encoding="utf-8-sig") as handle:
        writer = csv.writer(handle)
        writer.writerow(  # Moodle's grading worksheet as it downloads: the times, the grades and comments to fill in
            ["Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade"]
            + ["Grade can be changed", "Last modified (submission)", "Last modified (grade)", "Feedback comments"]
        )
        writer.writerows(
            [f"Participant {number}", name, f"{number}@example.edu", "Submitted for grading", "", "100.00"]
            + ["Yes", "Saturday, 8 March 2025, 9:30 AM", "-", ""]
            for name, number in MOODLE_PARTICIPANTS.items()
        )
    (root / "canvas-export.csv").write_text(  # Canvas's gradebook export (Grades, Export): a roster as it is
        "Student,ID,SIS User ID,SIS Login ID,Section\n    Points Possible,,,,\n"
        + "".join(f"{name},{user},,,A\n" for name, user in CANVAS_STUDENTS.items())
    )
    (root / "times.csv").write_text(
        "student_id,submitted\n" + "".join(f"{user},2025-03-15T10:00:00-05:00\n" for user in CANVAS_STUDENTS.values())
    )
    return root


def _page_block(page: str, language: str) -> str:
    blocks = re.findall(rf"```{language}\n(.*?)```", (REPO / page).read_text(encoding="utf-8"), re.DOTALL)
    assert len(blocks) == 1, f"{page}: expected one {language} block"
    return blocks[0]


def runnable(command: str, folder: Path) -> tuple[list[str], Path]:
    """The command as it runs here and where: python in ``folder``; make in the repository, with
    each VARIABLE=path pointed into ``folder``."""
    words = shlex.split(command)
    if words[0] == "make":
        return ["make", "-s", words[1], *(_pointed(word, folder) for word in words[2:])], REPO
    start = words.index("-m")
    return [sys.executable, *words[start:]], folder


def _pointed(assignment: str, folder: Path) -> str:
    """VARIABLE=value with each relative path in the value (one that exists in ``folder``, or names a
    folder to write) pointed into ``folder``: make runs in the repository."""
    name, _, value = assignment.partition("=")
    words = [str(folder / w) if (folder / w).exists() or w.endswith("/") else w for w in shlex.split(value)]
    return f"{name}={shlex.join(words)}" if name.endswith("_ARGS") else f"{name}={words[0]}"


@pytest.mark.parametrize("command", commands("runnable"))
def test_every_command_written_out_runs(command, course_folder):
    argv, cwd = runnable(command, course_folder)
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600, env=as_typed())
    assert done.returncode == 0, f"{command}:\n{done.stderr[-2000:]}"
    assert "Traceback" not in done.stderr, done.stderr


def test_the_pages_show_commands_of_each_kind():
    """The parsing above finds what the pages hold (a change of fence or prefix would make it see nothing)."""
    assert len(commands("runnable")) >= 5 and len(commands("synopsis")) >= 3 and commands("nbgrader")
    assert all(command.strip() == command for _, command in shown_commands())


@pytest.mark.parametrize("page", ["docs/instructors.md", "README.md"])
def test_the_grading_policy_table_gives_each_stage_its_points_as_graded(page):
    """The instructors' table and the learners' (README) say what the checks are worth, visible and hidden."""
    from grader.judge.plugin import planned_checks

    text = (REPO / page).read_text(encoding="utf-8")
    shown = {
        int(stage): (float(visible), float(hidden), float(total))
        for stage, visible, hidden, total in re.findall(
            r"^\| (\d) [^|]+\| (\d+) \| (\d+) \| (\d+) \|$", text, re.MULTILINE
        )
    }
    assert sorted(shown) == STAGES, "the table has a row per stage, core and bonus"
    graded: dict[int, list[float]] = {}
    for check in planned_checks(STAGES, points_in_use()):
        points = graded.setdefault(check.stage, [0.0, 0.0, 0.0])
        points[check.visibility == "hidden"] += check.points
        points[2] += check.points
    assert shown == {stage: tuple(points) for stage, points in graded.items()}
