"""make gradescope: the autograder zip to upload to a Gradescope programming assignment.

    python -m grader.authoring.gradescope [OUT_ZIP] [--course FILE]   (default dist/gradescope-autograder.zip)

Gradescope unpacks the zip into /autograder/source, runs setup.sh once to build its image and
run_autograder for every submission, which grades /autograder/submission with --sandbox isolated
and writes /autograder/results/results.json (what students see: grader.report.to_gradescope). The
zip holds the grader with its checks and the solutions (the hidden checks compare against them;
neither students nor their code ever read the zip) and a requirements.txt made from
pyproject.toml, so the versions are the repository's; and a course.toml saying whether the bonus
stages are graded, from the course file (default: course.toml at the repository's root). Entries
carry a fixed date: the same sources give the same zip.
"""

import argparse
import sys
import tomllib
import zipfile
from pathlib import Path

from grader.course import course_stages, course_text

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).with_name("gradescope")
PACKAGES = ["grader", "solutions"]
LEFT_OUT = {"authoring", "__pycache__"}  # authoring tools are for the repository, not for grading
FIXED_DATE = (2026, 1, 1, 0, 0, 0)


def requirements() -> str:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return "".join(f"{requirement}\n" for requirement in project["dependencies"])


def contents(course: Path | None = None) -> dict[str, tuple[bytes, bool]]:
    """Zip entry name -> (bytes, executable), for the course file at ``course`` (None: the repository's)."""
    entries = {name: ((SCRIPTS / name).read_bytes(), True) for name in ("setup.sh", "run_autograder")}
    entries["requirements.txt"] = (requirements().encode(), False)
    entries["course.toml"] = (course_text(course_stages(course)).encode(), False)
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*")):
            relative = path.relative_to(REPO)
            if path.is_file() and not LEFT_OUT & set(relative.parts) and path.suffix != ".pyc":
                entries[relative.as_posix()] = (path.read_bytes(), False)
    return entries


def build(out: Path, course: Path | None = None) -> Path:
    entries = contents(course)
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
    parser.add_argument("--course", type=Path, metavar="FILE",
                        help="the course settings (default: course.toml at the repository's root, if any)")
    args = parser.parse_args(argv)
    try:
        target = build(args.out, args.course)
    except ValueError as error:  # CourseError: one line
        print(f"gradescope: {error}", file=sys.stderr)
        return 2
    print(f"wrote {target}: upload it as the autograder of a Gradescope programming assignment "
          "(Ubuntu 22.04 or newer); students submit their stage files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
