"""python -m grader batch SUBMISSIONS_DIR --out OUT_DIR [--workers N] [--student ID] [--force] [--course FILE] [...]

Grades a class: SUBMISSIONS_DIR as the LMS downloaded it (--layout, see grader/intake/layouts.py), or a
sub-folder or .zip per student, named after it.
Writes OUT_DIR/students/<student>.json (the report), OUT_DIR/students/<student>.txt (the feedback the student
reads) and OUT_DIR/grades.csv. Each file is written whole or not at all. OUT_DIR holds one class:
OUT_DIR/class.toml names its layout and folder, and a class of another layout is refused. A re-run
grades only the students whose fingerprint changed (grader.classroom.fingerprint): new or changed files,
another grader, points table, device or options, or a report missing or incomplete; --force grades
everyone again.

This process is the judge of the class: it stages every submission, hashes it, decides who is
graded, and sends the files read in (never a path) to the lanes; it alone writes what they report.

Each lane is a judge process with its own sandbox (grader/classroom/lanes.py).
"""

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path

from grader.classroom.class_record import INPUT_FILE_OPTIONS, check_class_record, recorded_anonymous, write_class_record
from grader.classroom.fingerprint import RunFingerprint, grader_hash, points_hash
from grader.classroom.gradebook import file_summary_lines, late_summary, write_gradebook
from grader.classroom.lanes import LaneError, grade_all
from grader.classroom.names import NAMES_FILE, named, roster_names, write_names
from grader.classroom.out_folder import state_file
from grader.classroom.outputs import migrate_layout
from grader.classroom.overrides import read_seen
from grader.classroom.plan import (
    MAX_SUMMARY_IDS,
    case_twins,
    chosen_ids,
    counted,
    name_strangers,
    plan,
    second_copies,
    with_times,
)
from grader.cli.options import add_grading_options, grading_options
from grader.core.course import COURSE_FILE, gradebook_anonymous, gradebook_keeps, read_course
from grader.core.inputs_key import KEY_FILE, key_id, read_key
from grader.core.late_policy import load_course
from grader.core.options import ClassOptions, GradingOptions
from grader.intake.layouts import LAYOUTS, detect_layout, list_students
from grader.intake.students import Student
from grader.intake.submission_times import load_times
from grader.runner.escaping import listing, printable
from grader.sandbox.zygote import Sandbox, SandboxError, confinement


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m grader batch", description=__doc__.split("\n\n")[1])
    parser.add_argument("submissions", type=Path, help="the class folder, as downloaded (see --layout)")
    parser.add_argument(
        "--layout",
        choices=LAYOUTS,
        default="auto",
        help="how the LMS laid the class folder out; auto tells it from the names in it",
    )
    parser.add_argument("--out", type=Path, required=True, help="where the reports and grades.csv go")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="students graded at once")
    parser.add_argument("--force", action="store_true", help="grade every student again, changed or not")
    parser.add_argument(
        "--student",
        action="append",
        metavar="ID",
        help="grade only this student, changed or not (repeatable); the others are left as they are",
    )
    parser.add_argument(
        "--course",
        type=Path,
        metavar="FILE",
        help="the course settings: due dates, late penalty, bonus stages (default: course.toml "
        "beside grader/, if any; see docs/grading-a-class.md); without one: no due date, no "
        "penalty, the core stages",
    )
    parser.add_argument(
        "--times",
        type=Path,
        metavar="FILE",
        help="submission times for a download that holds none: Moodle's grading worksheet, or a CSV "
        "of student_id,submitted (see grader/intake/submission_times.py)",
    )
    parser.add_argument(
        "--times-zone", metavar="ZONE", help="the zone of a Moodle worksheet's times, e.g. Europe/London"
    )
    parser.add_argument(
        "--student-timeout",
        type=float,
        default=300.0,
        help="seconds one student's grading may take in all before it is stopped",
    )
    parser.add_argument(
        "--lane-memory",
        type=size_in_bytes,
        metavar="SIZE",
        help="the memory each lane's processes may hold together, kernel memory included, e.g. 6G or 1500M "
        "(default: the machine's memory divided by the lanes plus one); kept by a cgroup where the kernel "
        "lets the grader make one (see docs/grading-a-class.md)",
    )
    parser.add_argument(
        "--roster",
        type=Path,
        metavar="FILE",
        help="a roster CSV naming the students (a Canvas gradebook export, a Moodle grading worksheet, or "
        "student_id,name): its names go beside the ids, over the ones the download gives",
    )
    named_or_not = parser.add_mutually_exclusive_group()
    named_or_not.add_argument(
        "--anonymous",
        action="store_true",
        help="keep every student's name out of every output (as [gradebook] anonymous = true does); the "
        "runs after this one into the same --out keep them out too, until one with --reveal",
    )
    named_or_not.add_argument(
        "--reveal",
        action="store_true",
        help="end anonymous grading: name the students in every output (names.csv, the feedback's header, "
        "the class report), grading no one again",
    )
    add_grading_options(parser)
    return parser.parse_args(argv)


def size_in_bytes(text: str) -> int:
    """``text`` as bytes: a number with K, M or G (powers of 1024) or none."""
    number, unit = text.strip()[:-1], text.strip()[-1:].upper()
    if unit.isdigit():
        number, unit = text.strip(), ""
    try:
        size = int(float(number) * 1024 ** " KMG".index(unit or " "))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 6G or 1500M") from None
    if size < 256 * 1024**2:
        raise argparse.ArgumentTypeError(f"{text!r} is less than 256M, too little for torch")
    return size


def main(argv: list[str]) -> int:
    args = parse(argv)
    out = args.out
    try:
        for line in migrate_layout(out):  # an OUT of an earlier version: its files into their folders, once
            print(f"grader batch: {line}", file=sys.stderr)
        layout = detect_layout(args.submissions) if args.layout == "auto" else args.layout
        students, skipped = list_students(args.submissions, layout)
        if not students:  # a wrong folder or layout: a gradebook of no one would pass for a graded class
            passed_over = f" ({counted(skipped, 'name')} skipped)" if skipped else ""
            raise ValueError(
                f"no student found in {args.submissions} as layout {layout}{passed_over}: --layout to "
                "choose another, or check the folder"
            )
        if args.times:
            students = with_times(students, load_times(args.times, args.times_zone), args.times)
        course = read_course(args.course)
        policy, keep = load_course(args.course), gradebook_keeps(course, args.course)
        anonymous = not args.reveal and (
            args.anonymous or gradebook_anonymous(course, args.course) or recorded_anonymous(out)
        )
        students = named(students, roster_names(args.roster) if args.roster else {}, anonymous)
        name_strangers(policy.extensions, students, f"{args.course or COURSE_FILE} [extensions] gives due times")
        grading = grading_options(args, args.course, points_file=args.points)
        for line in grading.points.changes:  # a note price or a stage maximum the points file moves
            print(f"grader batch: points: {line}", file=sys.stderr)
        chosen = chosen_ids(students, args.student, args.submissions)
        earlier_folder = check_class_record(out, layout, args.submissions, _input_files(args))
        read_seen(out)  # the grader's state in OUT, checked before anyone is graded: a broken file is named
    except (ValueError, OSError) as error:
        print(f"grader batch: {error}", file=sys.stderr)
        return 2
    print(
        f"grader batch: layout {layout}, {counted(students, 'student')} (--layout to choose another)", file=sys.stderr
    )
    for name, why in skipped:
        print(f"grader batch: skipped {printable(name, keep_newlines=False)} ({why})", file=sys.stderr)
    ids = [student.id for student in students]
    for pairs, named_as, why in (
        (second_copies(ids), "as a second download of another", ""),
        (case_twins(ids), "as another but for case", "on a macOS or Windows disk their reports are one file: "),
    ):
        if pairs:
            print(
                f"grader batch: {counted(pairs, 'submission')} named {named_as}, graded apart: "
                f"{listing([f'{id} beside {first}' for id, first in pairs], MAX_SUMMARY_IDS)}; {why}"
                "check whether they are one student's",
                file=sys.stderr,
            )
    if earlier_folder:
        print(
            f"grader batch: {out} was graded from {earlier_folder} before, from {args.submissions} now: "
            "right for a new download of the same class; another class needs its own --out",
            file=sys.stderr,
        )
    try:
        sandbox = confinement(args.sandbox)
    except SandboxError as error:
        print(f"grader batch: {error}", file=sys.stderr)
        return 2
    if not sandbox.confined and args.sandbox != "none":
        print(
            f"grader batch: refusing to grade a class without a sandbox: {sandbox.detail}. Students' code "
            "could reach one another's; install bubblewrap, or pass --sandbox none to grade anyway "
            "(every report then says unsandboxed)",
            file=sys.stderr,
        )
        return 2
    try:
        grading = replace(grading, device=_device(grading))  # "auto" resolved once: every lane and fingerprint the same
    except SandboxError as error:
        print(f"grader batch: {error}", file=sys.stderr)
        return 2
    try:
        out.mkdir(parents=True, exist_ok=True)
        write_class_record(out, layout, args.submissions, _input_files(args), anonymous)
        names_said = _write_names(out, students, anonymous, layout)
    except OSError as error:
        print(
            f"grader batch: {out} cannot be written ({error.strerror or error}): give an --out you can write",
            file=sys.stderr,
        )
        return 2
    try:  # the class's secret for its hidden checks' inputs: one that is broken is named, never replaced
        grading = replace(grading, inputs_key=read_key(state_file(out, KEY_FILE), make=True))
    except ValueError as error:
        print(f"grader batch: {error}", file=sys.stderr)
        return 2
    run = RunFingerprint(
        grader_hash(),
        points_hash(grading.points.as_dict()),
        grading.device,
        {
            "visible_only": grading.visible_only,
            "timeout": grading.timeout,
            "budget": grading.budget,
            "sandboxed": sandbox.confined,
            "stages": list(grading.stages),
            "inputs_key": key_id(grading.inputs_key),  # the hidden checks' inputs (grader.judge.drawn_inputs)
            # bonus stages as extra credit change every total: a switch regrades (absent where off, as before)
            **({"extra_credit": grading.extra_credit} if grading.extra_credit is not None else {}),
        },
    )
    options = ClassOptions(
        grading,
        args.workers,
        args.force,
        tuple(args.student) if args.student else None,
        args.student_timeout,
        args.lane_memory,
    )
    current, todo = plan(students, chosen, out, options.force, run, grading.points)
    try:
        grade_all(todo, options, out, run, current, policy)
    except LaneError as error:
        print(f"grader batch: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("grader batch: interrupted; what was graded is kept, run again to go on", file=sys.stderr)
        return 130
    try:
        flagged = write_gradebook(
            out, students, current, policy, list(grading.stages), grading.points, keep, grading.extra_credit
        )
    except OSError as error:  # the reports are written: only the gradebook waits for another run
        print(
            f"grader batch: {out / 'grades.csv'} cannot be replaced ({error.strerror or error}): the reports "
            "are written; close grades.csv if a program (a spreadsheet) holds it open, and run again",
            file=sys.stderr,
        )
        return 2
    print(f"grader batch: {counted(students, 'student')} in {out / 'grades.csv'}", file=sys.stderr)
    if names_said:
        print(f"grader batch: {names_said}", file=sys.stderr)
    for line in file_summary_lines(out, students):
        print(line, file=sys.stderr)
    for line in late_summary(flagged):
        print(f"grader batch: {line}", file=sys.stderr)
    return 0


def _write_names(out: Path, students: list[Student], anonymous: bool, layout: str) -> str:
    """OUT/.grader/names.csv, or none under anonymous grading; what the batch says of it (one line, or "")."""
    had = state_file(out, NAMES_FILE).exists()
    write_names(out, students)  # none has a name under anonymous grading: an earlier names.csv goes
    if anonymous:
        ids = (
            f" (a {layout} class's ids are its folders' names: rename any that name a student)"
            if layout in ("folders", "nbgrader")
            else ""
        )
        return (
            f"graded anonymously: no student's name in any output{f' ({NAMES_FILE} removed)' if had else ''}; "
            f"--reveal names them{ids}"
        )
    named_students = sum(bool(s.name) for s in students)
    return (
        f"{named_students} of {counted(students, 'student')} named in {state_file(out, NAMES_FILE)}"
        if named_students
        else ""
    )


def _input_files(args: argparse.Namespace) -> dict[str, Path | None]:
    """The files of INPUT_FILE_OPTIONS this run was given (None: not given)."""
    return {key: getattr(args, key) for key in INPUT_FILE_OPTIONS}


def _device(options: GradingOptions) -> str:
    """The device the class is graded on: --device auto is asked of a sandbox, the way a lane would."""
    if options.device != "auto":
        return options.device
    with Sandbox("auto", options.sandbox) as probe:
        return probe.device


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
