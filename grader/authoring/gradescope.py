"""make gradescope: the autograder zip to upload to a Gradescope programming assignment.

    python -m grader.authoring.gradescope [OUT_ZIP] [--course FILE] [--points FILE]
                                                          (default dist/gradescope-autograder.zip)

Gradescope unpacks the zip into /autograder/source, runs setup.sh once to build its image and
run_autograder for every submission, which grades /autograder/submission with --sandbox isolated
and writes /autograder/results/results.json (what students see: grader.views.platforms.to_gradescope). The
zip holds what run_autograder runs and imports, the checks pytest collects and the solutions (the
hidden checks compare against them; neither students nor their code ever read the zip), each with
every module it imports and the data files they read (grader.authoring.shipping), a requirements.txt made from
pyproject.toml, so the versions are the repository's; and a course.toml saying whether the bonus
stages are graded, from the course file (default: course.toml at the repository's root), and a points table
(points.toml) where one is given, so that Gradescope prices checks as the batch does with --points. Entries
carry a fixed date: the same sources give the same zip.
"""

import argparse
import configparser
import sys
import tomllib
import zipfile
from pathlib import Path

from grader.authoring.layers import GRADING_LAYERS
from grader.authoring.shipping import layer_modules, script_modules, shipment
from grader.core.course import built_course_text, course_stages
from grader.core.inputs_key import KEY_FILE, new_key_text, read_key
from grader.core.points import read_points_file
from grader.core.stages import STAGE_MODULES

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).with_name("gradescope")
CHECKS = REPO / "grader" / "judge" / "checks"
# authoring tools, a class's tools and tests are for the repository, not for grading one submission
NEVER_SHIPPED = ("grader.authoring", "grader.classroom", "tests")
FIXED_DATE = (2026, 1, 1, 0, 0, 0)
POINTS_FILE = "points.toml"  # run_autograder passes it as --points where the zip holds one


def requirements() -> str:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return "".join(f"{requirement}\n" for requirement in project["dependencies"])


def entry_points() -> list[str]:
    """What grading runs: the modules run_autograder runs or imports, the check modules pytest collects
    (conftest.py and pytest.ini's python_files), and the reference's stage modules, which the judge loads by name."""
    python_files = configparser.ConfigParser()
    python_files.read(CHECKS / "pytest.ini")
    checks = sorted(
        {path.stem for pattern in python_files["pytest"]["python_files"].split() for path in CHECKS.glob(pattern)}
    )
    return [
        *script_modules((SCRIPTS / "run_autograder").read_text(encoding="utf-8")),
        "grader.judge.checks.conftest",
        *(f"grader.judge.checks.{name}" for name in checks),
        *(f"solutions.{name}" for name in STAGE_MODULES.values()),
    ]


def contents(
    course: Path | None = None, points: Path | None = None, inputs_key: Path | None = None
) -> dict[str, tuple[bytes, bool]]:
    """Zip entry name -> (bytes, executable), for the course file at ``course`` (None: the repository's), the
    points table at ``points`` (None: the registry's prices) and the key file ``inputs_key`` (None: a new key)."""
    entries = {name: ((SCRIPTS / name).read_bytes(), True) for name in ("setup.sh", "run_autograder")}
    entries["requirements.txt"] = (requirements().encode(), False)
    entries["course.toml"] = (built_course_text(course_stages(course), course).encode(), False)
    # each autograder its own key: its hidden checks draw inputs no copy of the repository can (drawn_inputs)
    key = new_key_text() if inputs_key is None else read_key(inputs_key).hex() + "\n"
    entries[KEY_FILE] = (key.encode(), False)
    if points is not None:
        read_points_file(points)  # a table the grader would refuse is refused now, not on every submission
        entries[POINTS_FILE] = (points.read_bytes(), False)
    entries.update(
        {
            name: (data, False)
            for name, data in shipment([*entry_points(), *layer_modules(GRADING_LAYERS)], never=NEVER_SHIPPED).items()
        }
    )
    return entries


def build(out: Path, course: Path | None = None, points: Path | None = None, inputs_key: Path | None = None) -> Path:
    entries = contents(course, points, inputs_key)
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, (data, executable) in sorted(entries.items()):
            info = zipfile.ZipInfo(name, FIXED_DATE)
            info.external_attr = (0o100755 if executable else 0o100644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?", type=Path, default=REPO / "dist" / "gradescope-autograder.zip")
    parser.add_argument(
        "--course",
        type=Path,
        metavar="FILE",
        help="the course settings (default: course.toml at the repository's root, if any)",
    )
    parser.add_argument(
        "--points",
        type=Path,
        metavar="FILE",
        help="a points table (python -m grader.cli.points writes one) that every submission is priced by",
    )
    parser.add_argument(
        "--inputs-key",
        type=Path,
        metavar="FILE",
        help="the key the hidden checks draw their inputs from (default: a new one; give the last zip's to "
        "rebuild it with the same hidden inputs)",
    )
    args = parser.parse_args(argv)
    try:
        target = build(args.out, args.course, args.points, args.inputs_key)
    except (ValueError, OSError) as error:  # CourseError, a points table refused or unreadable: one line
        print(f"gradescope: {error}", file=sys.stderr)
        return 2
    print(
        f"wrote {target}: upload it as the autograder of a Gradescope programming assignment "
        "(Ubuntu 22.04 or newer); students submit their stage files"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
