"""python -m grader batch SUBMISSIONS_DIR --out OUT_DIR [--workers N] [--student ID] [--force] [--course FILE] [...]

Grades a class: SUBMISSIONS_DIR as the LMS downloaded it (--layout, see grader/intake.py), or a
sub-folder or .zip per student, named after it.
Writes OUT_DIR/<student>.json (the report), OUT_DIR/<student>.txt (the feedback the student
reads) and OUT_DIR/grades.csv. Each file is written whole or not at all. OUT_DIR holds one class:
OUT_DIR/class.toml names its layout and folder, and a class of another layout is refused. A re-run
grades only the students whose fingerprint changed (grader.fingerprint): new or changed files,
another grader, points table, device or options, or a report missing or incomplete; --force grades
everyone again.

This process is the judge of the class: it stages every submission, hashes it, decides who is
graded, and sends the staged files (never a path) to the lanes; it alone writes what they report.

Each lane is a judge process with its own sandbox (one torch-preloaded zygote), grading one
student at a time: a class pays the torch import once per lane, not once per student.
"""

import argparse
import csv
import datetime as dt
import io
import json
import multiprocessing
import os
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from pathlib import Path

from grader.fingerprint import (
    ASKED,
    FORCED,
    INCOMPLETE,
    NEW,
    REASONS,
    RunFingerprint,
    grader_hash,
    points_hash,
    why_grade,
)
from grader.intake import LAYOUTS, Student, canonical_id, detect_layout, list_students
from grader.late_policy import (
    MARKED_LATE_WITHOUT_TIME,
    NO_SUBMISSION_TIME,
    LatePolicy,
    late_record,
    load_course,
    utc_text,
)
from grader.output_files import inert, write_atomic
from grader.points import points_table, rounded, use_note_prices, use_points_file
from grader.course import course_stages, note_prices, read_course
from grader.runner.text import listing, printable
from grader.submission import (
    COPY_MARK,
    MISSING,
    NO_STAGE_FILES,
    UNREADABLE,
    StagedSubmission,
    SubmissionError,
    stage_submission,
)
from grader.submission_times import load_times
from grader.toml_file import read_toml

# Another tool reads these columns by name (the LMS gradebook exports read `final`): keep them.
def csv_columns(stages: list[int]) -> list[str]:
    """grades.csv's header: a column per graded stage (the course's tracks)."""
    return ["student_id", "score", "max_score", *[f"stage{n}" for n in stages], "submitted", "late_penalty", "final",
            "flags"]


MAX_SUMMARY_IDS = 50  # ids the summary line names
# In OUT: which class its reports are of (a file no student's report or feedback can be named)
CLASS_RECORD = "class.toml"


def parse(argv: list[str]) -> argparse.Namespace:
    from grader.__main__ import add_grading_options

    parser = argparse.ArgumentParser(prog="python -m grader batch", description=__doc__.split("\n\n")[1])
    parser.add_argument("submissions", type=Path, help="the class folder, as downloaded (see --layout)")
    parser.add_argument("--layout", choices=LAYOUTS, default="auto",
                        help="how the LMS laid the class folder out; auto tells it from the names in it")
    parser.add_argument("--out", type=Path, required=True, help="where the reports and grades.csv go")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="students graded at once")
    parser.add_argument("--force", action="store_true", help="grade every student again, changed or not")
    parser.add_argument("--student", action="append", metavar="ID",
                        help="grade only this student, changed or not (repeatable); the others are left as they are")
    parser.add_argument("--course", type=Path, metavar="FILE",
                        help="the course settings: due dates, late penalty, bonus stages (default: course.toml "
                             "beside grader/, if any; see docs/grading-a-class.md); without one: no due date, no "
                             "penalty, the core stages")
    parser.add_argument("--times", type=Path, metavar="FILE",
                        help="submission times for a download that holds none: Moodle's grading worksheet, or a CSV "
                             "of student_id,submitted (see grader/submission_times.py)")
    parser.add_argument("--times-zone", metavar="ZONE", help="the zone of a Moodle worksheet's times, e.g. Europe/London")
    parser.add_argument("--points", type=Path, metavar="FILE",
                        help="grade with this points table instead of the registry's (grader/stages.toml): "
                             "[stage<N>] tables, each pricing exactly that stage's checks")
    parser.add_argument("--student-timeout", type=float, default=300.0,
                        help="seconds one student's grading may take in all before it is stopped")
    add_grading_options(parser)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    try:
        layout = detect_layout(args.submissions) if args.layout == "auto" else args.layout
        students, skipped = list_students(args.submissions, layout)
        if not students:  # a wrong folder or layout: a gradebook of no one would pass for a graded class
            passed_over = f" ({_counted(skipped, 'name')} skipped)" if skipped else ""
            raise ValueError(f"no student found in {args.submissions} as layout {layout}{passed_over}: --layout to "
                             "choose another, or check the folder")
        if args.times:
            students = _with_times(students, load_times(args.times, args.times_zone), args.times)
        policy = load_course(args.course)
        args.stages = course_stages(args.course)
        use_note_prices(note_prices(read_course(args.course), args.course))
        if args.points:
            use_points_file(args.points)
        chosen = _chosen(students, args.student, args.submissions)
        earlier_folder = check_class_record(args.out, layout, args.submissions, _input_files(args))
    except (ValueError, OSError) as error:
        print(f"grader batch: {error}", file=sys.stderr)
        return 2
    print(f"grader batch: layout {layout}, {_counted(students, 'student')} (--layout to choose another)",
          file=sys.stderr)
    for name, why in skipped:
        print(f"grader batch: skipped {printable(name, keep_newlines=False)} ({why})", file=sys.stderr)
    ids = [student.id for student in students]
    for pairs, named_as, why in ((second_copies(ids), "as a second download of another", ""),
                                 (case_twins(ids), "as another but for case",
                                  "on a macOS or Windows disk their reports are one file: ")):
        if pairs:
            print(f"grader batch: {_counted(pairs, 'submission')} named {named_as}, graded apart: "
                  f"{listing([f'{id} beside {first}' for id, first in pairs], MAX_SUMMARY_IDS)}; {why}"
                  "check whether they are one student's", file=sys.stderr)
    if earlier_folder:
        print(f"grader batch: {args.out} was graded from {earlier_folder} before, from {args.submissions} now: "
              "right for a new download of the same class; another class needs its own --out", file=sys.stderr)
    from grader.sandbox import SandboxError, confinement

    try:
        sandbox = confinement(args.sandbox)
    except SandboxError as error:
        print(f"grader batch: {error}", file=sys.stderr)
        return 2
    if not sandbox.confined and args.sandbox != "none":
        print(f"grader batch: refusing to grade a class without a sandbox: {sandbox.detail}. Students' code "
              "could reach one another's; install bubblewrap, or pass --sandbox none to grade anyway "
              "(every report then says unsandboxed)", file=sys.stderr)
        return 2
    try:
        args.device = _device(args)  # "auto" resolved once: every lane and every fingerprint use the same
    except SandboxError as error:
        print(f"grader batch: {error}", file=sys.stderr)
        return 2
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        write_class_record(args.out, layout, args.submissions, _input_files(args))
    except OSError as error:
        print(f"grader batch: {args.out} cannot be written ({error.strerror or error}): give an --out you can write",
              file=sys.stderr)
        return 2
    run = RunFingerprint(grader_hash(), points_hash(points_table()), args.device,
                         {"visible_only": args.visible_only, "timeout": args.timeout, "sandboxed": sandbox.confined,
                          "stages": args.stages})
    current, todo = _plan(students, chosen, args, run)
    try:
        _grade_all(todo, args, run, current, policy)
    except LaneError as error:
        print(f"grader batch: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("grader batch: interrupted; what was graded is kept, run again to go on", file=sys.stderr)
        return 130
    try:
        flagged = write_gradebook(args.out, students, current, policy, args.stages)
    except OSError as error:  # the reports are written: only the gradebook waits for another run
        print(f"grader batch: {args.out / 'grades.csv'} cannot be replaced ({error.strerror or error}): the reports "
              "are written; close grades.csv if a program (a spreadsheet) holds it open, and run again",
              file=sys.stderr)
        return 2
    print(f"grader batch: {_counted(students, 'student')} in {args.out / 'grades.csv'}", file=sys.stderr)
    for line in file_summary_lines(args.out, students):
        print(line, file=sys.stderr)
    for line in late_summary(flagged):
        print(f"grader batch: {line}", file=sys.stderr)
    return 0


# The files of a run whose loss would change other students' rows: class.toml key -> the option that gives it
INPUT_FILE_OPTIONS = {"times": "--times", "course": "--course"}


def _input_files(args: argparse.Namespace) -> dict[str, Path | None]:
    """The files of INPUT_FILE_OPTIONS this run was given (None: not given)."""
    return {key: getattr(args, key) for key in INPUT_FILE_OPTIONS}


def check_class_record(out: Path, layout: str, submissions: Path, files: dict[str, Path | None]) -> str | None:
    """Refuse (ValueError, one line) to grade a ``layout`` class into an ``out`` that holds the reports of a
    class of another layout: ids of two LMSs can meet (a Gradescope SID that is a Canvas user id), and one
    report would replace the other's. Refuse too a run that omits a file of ``files`` (--times, --course)
    the last run into ``out`` gave: every student's time and penalty would be wiped from grades.csv and the
    reports (another file is taken: a due date moves). The folder ``out`` was last graded from, when that
    was another one (a fresh download of the same class is graded into the same ``out``: a regrade)."""
    _check_out(out, submissions)
    if not (out / CLASS_RECORD).exists():
        return None  # a new OUT, or one graded before it held a record
    try:
        record = read_toml(out / CLASS_RECORD)
    except ValueError as error:
        raise ValueError(f"{error}: delete it if {out} holds this class's reports, or give this class its own "
                         "--out") from None
    if record.get("layout") != layout:
        raise ValueError(f"{out} holds the reports of a {printable(str(record.get('layout')), keep_newlines=False)} "
                         f"class (graded from {printable(str(record.get('folder')), keep_newlines=False)}), and "
                         f"{submissions} is a {layout} class: give each class its own --out")
    for key, option in INPUT_FILE_OPTIONS.items():
        if files[key] is None and key in record:
            earlier_file = printable(str(record[key]), keep_newlines=False)
            raise ValueError(f"{out} was last graded with {option} {earlier_file}: give {option} {earlier_file} "
                             "again (or the file that replaces it), or every student's submission time and late "
                             "penalty there is lost")
    earlier = printable(str(record.get("folder")), keep_newlines=False)
    return earlier if earlier != _path_text(submissions) else None


def _check_out(out: Path, submissions: Path) -> None:
    """Refuse (ValueError) an ``out`` that is a file, or lies in the class folder: its reports would be
    graded as a student (or make the folder look like another class) on the next run."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file, not a folder: name the folder the reports go to")
    if out.resolve().is_relative_to(submissions.resolve()):
        raise ValueError(f"--out {out} is inside the class folder {submissions}: the next run would take the reports "
                         "for a submission; give an --out outside it")


def write_class_record(out: Path, layout: str, submissions: Path, files: dict[str, Path | None]) -> None:
    """Say in ``out`` which class its reports are of, and the ``files`` they were graded with
    (check_class_record reads it)."""
    lines = [f"layout = {json.dumps(layout)}", f"folder = {_toml_text(submissions)}",
             *[f"{key} = {_toml_text(path)}" for key, path in files.items() if path is not None]]
    write_atomic(out / CLASS_RECORD, "# The class whose reports this folder holds: grader batch refuses another\n"
                                     + "".join(f"{line}\n" for line in lines))


def _path_text(path: Path) -> str:
    """``path``, absolute and printable: TOML and a terminal both take it as it is."""
    return printable(str(path.resolve()), keep_newlines=False)


def _toml_text(path: Path) -> str:
    return json.dumps(_path_text(path), ensure_ascii=False)  # a TOML basic string, as JSON writes one


def second_copies(ids: list[str]) -> list[tuple[str, str]]:
    """Each id named as a browser or an operating system names a second copy of another id's file
    (``ada (1)`` beside ``ada``), with that id."""
    known = set(ids)
    return [(id, first) for id in ids if (first := COPY_MARK.sub("", id)) != id and first in known]


def case_twins(ids: list[str]) -> list[tuple[str, str]]:
    """Each id that differs from an earlier one of ``ids`` only by case (``Ada`` after ``ada``), with that
    one: file systems that ignore case (macOS's, Windows's) keep one report file for both."""
    first_of: dict[str, str] = {}
    return [(id, first) for id in ids if (first := first_of.setdefault(id.casefold(), id)) != id]


def _plan(students: list[Student], chosen: set[str] | None, args: argparse.Namespace,
          run: RunFingerprint) -> tuple[dict[str, dict], list[Student]]:
    """Each student's current fingerprint (their files staged and hashed by the judge), and who is graded:
    the ``chosen`` ones, else everyone with --force, else those whose report is not current. Says so."""
    current = {student.id: run.of(_stage(student)) for student in students}
    reasons = {student.id: why_grade(*_saved_report(args.out, student), current[student.id]) for student in students}
    if chosen is not None:
        todo = {student.id: ASKED for student in students if student.id in chosen}
    else:
        todo = {s.id: FORCED if args.force else reasons[s.id] for s in students if args.force or reasons[s.id]}
    print(f"grader batch: {plan_summary(len(students), list(todo.values()), chosen, reasons)}", file=sys.stderr)
    if 0 < len(todo) < len(students):  # who, when not everyone: a resubmission is checked by name
        for reason in REASONS:
            if ids := [student_id for student_id, why in todo.items() if why == reason]:
                print(f"grader batch:   {reason}: {listing(ids, MAX_SUMMARY_IDS)}", file=sys.stderr)
    return current, [student for student in students if student.id in todo]


# Characters one is typed or read for the other: a substitution between them is half a mistake
LOOK_ALIKE = [set("l1Ii|"), set("O0o"), set("S5s"), set("B8")]


def close_ids(typed: str, known: list[str], most: int = 5) -> list[str]:
    """The ids of ``known`` a mistyped ``typed`` may have meant, closest first: by edit distance
    (a swap of two neighbours is one edit; a look-alike or another case, half of one), then by id;
    none further than a third of the typed length (at least one edit)."""
    limit = max(1.0, len(typed) / 3)
    ranked = sorted((distance, candidate) for candidate in known
                    if (distance := _edit_distance(typed, candidate)) <= limit)
    return [candidate for _, candidate in ranked[:most]]


def _edit_distance(a: str, b: str) -> float:
    """Damerau-Levenshtein distance (optimal string alignment), look-alike substitutions costing 0.5."""
    rows = [[float(j) for j in range(len(b) + 1)]]
    for i, x in enumerate(a, 1):
        row = [float(i)]
        for j, y in enumerate(b, 1):
            swap = 0 if x == y else 0.5 if x.lower() == y.lower() or any({x, y} <= group for group in LOOK_ALIKE) else 1
            row.append(min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + swap))
            if i > 1 and j > 1 and x == b[j - 2] and a[i - 2] == y:
                row[j] = min(row[j], rows[-2][j - 2] + 1)
        rows.append(row)
    return rows[-1][-1]


def _chosen(students: list[Student], ids: list[str] | None, folder: Path) -> set[str] | None:
    """The ids --student asked for (None: not given), in the form ids take (canonical_id: typed é is
    a folder's e and U+0301); ValueError names an id that is no student's."""
    if ids is None:
        return None
    known = [student.id for student in students]
    ids = [canonical_id(student_id) for student_id in ids]
    for student_id in ids:
        if student_id not in known:
            close = close_ids(student_id, known)
            hint = f"close: {', '.join(close)}" if close else "no id is close; grades.csv lists them all"
            raise ValueError(f"no student {printable(student_id, keep_newlines=False)} in {folder} ({hint})")
    return set(ids)


def _device(args: argparse.Namespace) -> str:
    """The device the class is graded on: --device auto is asked of a sandbox, the way a lane would."""
    if args.device != "auto":
        return args.device
    from grader.sandbox import Sandbox

    with Sandbox("auto", args.sandbox) as probe:
        return probe.device


def _stage(student: Student) -> StagedSubmission:
    """``student``'s stage files, read by the judge. Never raises: what cannot be read is graded as an
    empty submission flagged with why, and the class goes on."""
    if student.conflict:
        return StagedSubmission(problem=student.conflict)
    try:
        return stage_submission(student.source)
    except SubmissionError as error:
        return StagedSubmission(problem=str(error))
    except Exception as error:  # staging raises only SubmissionError: this is the last line of defence
        return StagedSubmission(problem=printable(f"{type(error).__name__}: {error}", keep_newlines=False))


def plan_summary(total: int, todo_reasons: list[str], chosen: set[str] | None,
                 reasons: dict[str, str | None]) -> str:
    """How many students a run grades and why, e.g. "2 of 9 to grade (1 new, 1 resubmitted); 7 unchanged"."""
    counts = Counter(todo_reasons)
    line = f"{len(todo_reasons)} of {total} to grade"
    if len(counts) == 1 and len(todo_reasons) == total:
        line += f" ({todo_reasons[0]}: all {total})"
    elif counts:
        line += f" ({', '.join(f'{counts[reason]} {reason}' for reason in REASONS if counts[reason])})"
    rest = total - len(todo_reasons)
    if chosen is not None:
        changed = sum(1 for student_id, reason in reasons.items() if reason and student_id not in chosen)
        line += f"; {rest} not asked for" + (f", of which {changed} changed: run without --student to grade them"
                                            if changed else "")
    elif rest:
        line += f"; {rest} unchanged"
    return line


def late_summary(flagged: Counter) -> list[str]:
    """What the instructor must know about the late policy's inputs: never a silent "on time"."""
    lines = []
    if flagged[NO_SUBMISSION_TIME]:
        lines.append(f"{flagged[NO_SUBMISSION_TIME]} without a submission time, not penalised "
                     f"(flag {NO_SUBMISSION_TIME})")
    if flagged[MARKED_LATE_WITHOUT_TIME]:
        lines.append(f"{flagged[MARKED_LATE_WITHOUT_TIME]} marked late by Canvas without a time, not penalised "
                     f"(flag {MARKED_LATE_WITHOUT_TIME})")
    if flagged["penalised"]:
        lines.append(f"{flagged['penalised']} late, with their penalty in grades.csv (late_penalty, final)")
    return lines


# Lanes --------------------------------------------------------------------------------------


class LaneError(RuntimeError):
    """A lane could not start its sandbox: nothing can be graded."""


def _lane(connection: Connection, args: argparse.Namespace, cores: set[int] | None) -> None:
    """A judge process: one sandbox, then one student per message until told to stop.

    ``cores``: the CPUs this lane and everything it starts keep to (workers cannot change theirs),
    so that no student's threads take time from another lane's students; None shares them all.
    """
    from grader.runner.confine import die_with_parent
    from grader.sandbox import Sandbox, SandboxError
    from grader.session import grade_each

    die_with_parent()
    if cores:
        os.sched_setaffinity(0, cores)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the coordinator decides when lanes stop
    try:
        sandbox = Sandbox(args.device, args.sandbox, many_students=True)
        sandbox.device  # noqa: B018 - fail here, once, if the zygote cannot start
    except SandboxError as error:
        connection.send(("fatal", str(error)))
        return
    connection.send(("ready", None))
    with sandbox:  # each student as the coordinator staged them, until it sends None
        grade_each(sandbox, iter(connection.recv, None), lambda report: connection.send(("done", report)),
                   args.stages, args.visible_only, args.timeout)


@dataclass
class _Lane:
    process: multiprocessing.Process
    connection: Connection
    cores: set[int] | None
    student: Student | None = None
    started: float = 0.0
    fingerprint: dict | None = None  # of the files the lane was sent for ``student``


def lane_cores(count: int) -> list[set[int] | None]:
    """The CPUs of each of ``count`` lanes: one each while there are enough (a student's code then
    competes with its own judge only), else all of them for every lane."""
    available = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if count < 2 or count > len(available):
        return [None] * count
    return [{core} for core in available[:count]]


def _start_lanes(context, args, cores: list[set[int] | None]) -> list[_Lane]:
    """Start a lane on each of ``cores`` side by side (each imports torch in its zygote), then wait for all."""
    lanes = []
    for own in cores:
        ours, theirs = context.Pipe()
        process = context.Process(target=_lane, args=(theirs, args, own), daemon=True)
        process.start()
        theirs.close()
        lanes.append(_Lane(process, ours, own))
    for lane in lanes:
        kind, detail = lane.connection.recv() if lane.connection.poll(120) else ("fatal", "no answer in 120 s")
        if kind != "ready":
            for other in lanes:
                other.process.kill()
            raise LaneError(f"a grading lane could not start: {detail}")
    return lanes


def _grade_all(todo: list[Student], args: argparse.Namespace, run: RunFingerprint, current: dict[str, dict],
               policy: LatePolicy) -> None:
    """Grade ``todo``, staging each student again as a lane takes them: a report's fingerprint is that of
    the very files graded, which ``current`` then holds."""
    if not todo:
        return
    import grader.session  # noqa: F401 - torch, pytest and the judge, imported once and shared by every fork

    context = multiprocessing.get_context("fork")
    lanes = _start_lanes(context, args, lane_cores(max(1, min(args.workers, len(todo)))))
    queue = list(todo)
    progress = Progress(len(todo))
    retried: set[str] = set()

    def finish(lane: _Lane, report: dict) -> None:
        """Write the report; a student whose grading the grader itself disrupted goes once more to the end of the queue."""
        student = lane.student
        report.update(fingerprint=lane.fingerprint, graded_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                      late=_late(policy, student, report))
        _finish(lane, report, args, progress)
        if not report["complete"] and student.id not in retried:
            retried.add(student.id)
            queue.append(student)
            progress.expect_one_more()

    try:
        while queue or any(lane.student for lane in lanes):
            for lane in lanes:
                if lane.student is None and queue:
                    lane.student = queue.pop(0)
                    staged = _stage(lane.student)
                    lane.fingerprint = current[lane.student.id] = run.of(staged)
                    lane.started = time.monotonic()
                    lane.connection.send(staged)
            busy = {lane.connection: lane for lane in lanes if lane.student}
            for connection in wait(list(busy), timeout=1.0):
                lane = busy[connection]
                try:
                    _, report = connection.recv()
                except (EOFError, OSError):
                    report = _failed_report(args, "the grader stopped while grading this submission")
                    lanes[lanes.index(lane)] = _restart(lane, context, args)
                finish(lane, report)
            for index, lane in enumerate(lanes):
                if lane.student and time.monotonic() - lane.started > args.student_timeout:
                    lanes[index] = _restart(lane, context, args)
                    finish(lane, _failed_report(args, f"grading stopped after {args.student_timeout:g} s"))
    finally:
        for lane in lanes:
            if lane.process.is_alive():
                if lane.student is None:
                    lane.connection.send(None)
                lane.process.join(timeout=5)
                lane.process.kill()
        progress.close()


def _restart(lane: _Lane, context, args) -> _Lane:
    lane.process.kill()
    lane.process.join()
    return _start_lanes(context, args, [lane.cores])[0]


def _finish(lane: _Lane, report: dict, args, progress: "Progress") -> None:
    """Write the student ``lane`` held (a lane being replaced still holds it), and free the lane."""
    student = lane.student
    lane.student = None
    try:
        _write_feedback(args.out, student, report)
        _write_report(args.out, student, report)  # last: it means "graded"
    except OSError as error:  # one student's files, not the class: left ungraded, a later run tries again
        print(f"grader batch: cannot write the report of {student.id}, left ungraded: {error.strerror or error}",
              file=sys.stderr)
    progress.advance(student.id, report)


def _failed_report(args: argparse.Namespace, reason: str) -> dict:
    """A zero marked incomplete, for a submission whose grading did not finish: graded again next run."""
    from grader.points import points_table
    from grader.report import INCOMPLETE, TITLES
    from grader.stages import registry

    stages = [{"id": f"stage{n}", "title": TITLES[n], "track": registry()[n].track, "score": 0,
               "max_score": sum(points_table()[f"stage{n}"].values()), "checks": []} for n in args.stages]
    return {"score": 0, "max_score": sum(s["max_score"] for s in stages), "device": args.device, "torch": "",
            "sandbox": "", "stages": stages, "flags": [f"{INCOMPLETE}: not graded: {reason}"], "complete": False}


# Output -------------------------------------------------------------------------------------


def _report_path(out: Path, student: Student) -> Path:
    return out / f"{student.id}.json"


def _saved_report(out: Path, student: Student) -> tuple[dict | None, bool]:
    """The report written for ``student`` (None if there is none that can be read), and whether its file exists."""
    path = _report_path(out, student)
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError):
        return None, path.exists()
    return (report if _listable(report) else None), True


def _listable(report) -> bool:
    """Whether ``report`` holds what a gradebook row is made of: a report edited by hand may not."""
    def number(value) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    try:
        return (number(report["score"]) and number(report["max_score"])
                and isinstance(report["flags"], list) and all(isinstance(flag, str) for flag in report["flags"])
                and all(isinstance(s["id"], str) and number(s["score"]) and number(s["max_score"])
                        for s in report["stages"]))
    except (KeyError, TypeError):
        return False


def _write_feedback(out: Path, student: Student, report: dict) -> None:
    """The .txt the student reads: no hidden check's data (grader.feedback.student_view)."""
    from grader.report import render_text

    text = render_text(report, student.id, color=False, student_facing=True, folder="")  # an id is no folder of theirs
    write_atomic(out / f"{student.id}.txt", text + "\n")


def _write_report(out: Path, student: Student, report: dict) -> None:
    write_atomic(_report_path(out, student), json.dumps(report, indent=2) + "\n")


def _with_times(students: list[Student], times: dict[str, dt.datetime], source: Path) -> list[Student]:
    """``students`` with the times ``source`` gives them; an id there that is no student here is named, not dropped."""
    strangers = sorted(set(times) - {s.id for s in students})
    if strangers:
        print(f"grader batch: {source} gives times to {_counted(strangers, 'id')} of no student of the class: "
              f"{listing(strangers, MAX_SUMMARY_IDS)}", file=sys.stderr)
    return [replace(s, submitted=times[s.id]) if s.id in times else s for s in students]


def _late(policy: LatePolicy, student: Student, report: dict) -> dict:
    # Canvas marks a submission LATE though its download gives no time: the mark is kept apart from a time.
    return late_record(policy, student.submitted, student.late_marked, report["stages"], student.time_unread)


def write_gradebook(out: Path, students: list[Student], current: dict[str, dict], policy: LatePolicy,
                    stages_graded: list[int]) -> Counter:
    """grades.csv from the reports on disk whose fingerprint is ``current``'s, in student order: the same
    reports give the same bytes. Any other student's row says why they have no grade, never an old score.

    A current report whose ``late`` object no longer matches ``policy`` (a due date moved) gets the new one.
    Returns how many rows carry each late flag, and how many were "penalised".
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(csv_columns(stages_graded))
    flagged: Counter = Counter()
    for student in students:
        report, exists = _saved_report(out, student)
        reason = why_grade(report, exists, current[student.id])
        submitted = utc_text(student.submitted) or ""
        if reason is not None:
            why = "; ".join(report["flags"]) if reason == INCOMPLETE else f"not graded: {_row_reason(reason)}"
            writer.writerow(inert([student.id, "", "", *[""] * len(stages_graded), submitted, "", "", why]))
            continue
        late = _late(policy, student, report)
        if report.get("late") != late:
            report["late"] = late
            try:
                _write_feedback(out, student, report)
                _write_report(out, student, report)
            except OSError as error:  # the row has it; the report keeps the old one until a later run
                print(f"grader batch: cannot update the late penalty in the report of {student.id}: "
                      f"{error.strerror or error}", file=sys.stderr)
        flagged.update(flag.partition(":")[0] for flag in late["flags"])  # counted by flag, whatever it details
        flagged["penalised"] += late["penalty_points"] > 0
        stages = {s["id"]: s["score"] for s in report["stages"]}
        writer.writerow(inert([student.id, report["score"], report["max_score"],
                                *[stages.get(f"stage{n}", "") for n in stages_graded],
                                submitted, late["penalty_points"],
                                rounded(max(0, report["score"] - late["penalty_points"])),
                                "; ".join([*report["flags"], *late["flags"]])]))
    write_atomic(out / "grades.csv", buffer.getvalue())
    return flagged


def _row_reason(reason: str) -> str:
    """A reason to grade, as the reason a student stands without a grade after the run."""
    return "no report yet" if reason == NEW else reason


# Flags the batch's last lines count, each with what it means for the grade.
FILE_FLAGS = {
    NO_STAGE_FILES: ("had no stage file", "had no stage file"),
    UNREADABLE: ("could not be read (or two submissions claim its id), and scores nothing",
                 "could not be read (or two submissions claim their ids), and score nothing"),
    MISSING: ("lacks some stage files, and scores nothing for those stages",
              "lack some stage files, and score nothing for those stages"),
    "renamed": ("had a stage file under a near name, graded as the file it stands for",
                "had stage files under near names, graded as the files they stand for"),
}


def file_summary_lines(out: Path, students: list[Student]) -> list[str]:
    """A line for each flag of FILE_FLAGS some student's current report holds, naming them: a zero
    (or a stage's) that is no one's work on the code must not pass as one."""
    holders: dict[str, list[str]] = {flag: [] for flag in FILE_FLAGS}
    for student in students:
        for flag in (_saved_report(out, student)[0] or {}).get("flags", []):
            if (name := flag.partition(":")[0]) in holders:
                holders[name].append(student.id)
    return [f"grader batch: {_counted(ids, 'submission')} {meaning[len(ids) > 1]}: {listing(ids, MAX_SUMMARY_IDS)} (flag {flag})"
            for flag, meaning in FILE_FLAGS.items() if (ids := holders[flag])]


def _counted(items: list, noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


class Progress:
    """A bar with count, rate and ETA on a terminal; a plain line every tenth of the way in a log."""

    def __init__(self, total: int):
        self.total = total
        self.done = 0
        self.started = time.monotonic()
        self.bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="student", dynamic_ncols=True)

    def expect_one_more(self) -> None:
        self.total += 1
        if self.bar is not None:
            self.bar.total = self.total
            self.bar.refresh()

    def advance(self, student_id: str, report: dict) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.set_postfix_str(f"{student_id}: {report['score']:g}/{report['max_score']:g}", refresh=False)
            self.bar.update()
        elif self.done == self.total or self.done % max(1, self.total // 10) == 0:
            elapsed = time.monotonic() - self.started
            rate = self.done / elapsed if elapsed else 0.0
            eta = (self.total - self.done) / rate if rate else 0.0
            print(f"grader batch: {self.done}/{self.total} graded, {rate:.1f}/s, ETA {eta:.0f} s",
                  file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
