"""The grade of record under every combination of the term's rules: a model of the whole, driven by Hypothesis.

A small class hands in, is late, resubmits, gets overrides, sees its points table change (to, from and
between non-zero prices), its keep rule switch, and its bonus stage count as required or as extra credit. After every step the gradebook is written as a batch
writes it, from stored verdicts (no learner code), and the test checks what every output says against a
model of its own: the final grade is one number in grades.csv, the report, the student's feedback, Gradescope's
results.json and the LMS export; under "best" it is the best of every grading the model can price, and a grading it cannot is
named in the row, never dropped silently.
"""

import csv
import datetime as dt
import json
import re
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from grader.classroom.class_summary import summarise
from grader.classroom.fingerprint import points_hash
from grader.classroom.gradebook import late_of, late_summary, write_gradebook
from grader.classroom.history import keep_in_history
from grader.classroom.lms_export import read_grades
from grader.classroom.outputs import write_feedback, write_report
from grader.classroom.overrides import OVERRIDES_FILE
from grader.classroom.record import LEFT_OUT
from grader.classroom.repricing import reprice_class
from grader.core import report as report_model
from grader.core.late_policy import LatePolicy, late_record
from grader.core.points import Points, rounded
from grader.core.report import CheckResult, Status
from grader.intake.students import Student
from grader.judge.voiding import void_shortcut_targets, void_without_results
from grader.views.platforms import to_gradescope

DUE = dt.datetime(2025, 3, 14, 23, 59, tzinfo=dt.UTC)
POLICY = LatePolicy(
    due=DUE,
    penalty=10,
    cap=30,
    grace=dt.timedelta(minutes=15),
    slip_days=1,
    extensions={"bo": {"assignment": DUE + dt.timedelta(days=2)}},
)
# A core stage and a bonus one, whose points count as the course says: toward the maximum (required), or as
# extra credit on top of the core's (uncapped, or capped at 2 points).
STAGES = {"stage1": ["random.a", "property.b"], "stage6": ["random.c", "structure.d"]}
NUMBERS = [int(stage.removeprefix("stage")) for stage in STAGES]
BONUS_RULES = [None, {"cap": None}, {"cap": 2.0}]
# Three tables: T1 gives structure.d a price (from 0), T2 moves prices between non-zero values.
TABLES = [
    {"stage1": {"random.a": 2, "property.b": 3}, "stage6": {"random.c": 5, "structure.d": 0}},
    {"stage1": {"random.a": 4, "property.b": 3}, "stage6": {"random.c": 5, "structure.d": 1}},
    {"stage1": {"random.a": 2, "property.b": 1}, "stage6": {"random.c": 6, "structure.d": 0}},
]
STUDENTS = ("ada", "bo")
OPTIONS = {"visible_only": False, "timeout": 2.0, "budget": 30.0, "sandboxed": True, "stages": NUMBERS}
RECORDED = re.compile(r"^Grade recorded: ([0-9.]+)/", re.MULTILINE)


def judged(statuses: dict[str, bool], table: dict) -> list[CheckResult]:
    """The checks as the judge leaves them: priced by ``table``, then voided by its rules (a check of how a
    function computes earns nothing beside results that are all wrong)."""
    results = []
    for stage, checks in STAGES.items():
        number = int(stage.removeprefix("stage"))
        own = [
            CheckResult(
                number,
                check,
                "hidden",
                None,
                Status.PASSED if statuses[check] else Status.FAILED,
                table[stage][check] if statuses[check] else 0,
                table[stage][check],
                "",
                None,
                None,
                "",
            )
            for check in checks
        ]
        void_shortcut_targets(own)
        void_without_results(own)
        results += own
    return results


def priced(statuses: dict[str, bool], table: dict, keeps_targets: bool, extra: dict | None) -> report_model.Report:
    """A complete report whose checks passed as ``statuses`` say, priced by ``table`` and voided as the judge does,
    its bonus stage counted as ``extra`` says; without ``keeps_targets``, as a report written before the checks kept
    what voiding rests on."""
    report = report_model.build(judged(statuses, table), NUMBERS, "cpu", "2.13.0", [], "none", extra)
    if not keeps_targets:
        for stage in report["stages"]:
            for check in stage["checks"]:
                for key in ("target", "own", "from_source"):
                    check.pop(key, None)  # type: ignore[misc]
    return report_model.from_json(json.loads(report_model.to_json(report)))


class Term(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.out = Path(tempfile.mkdtemp(prefix="term-"))
        self.table = 0
        self.keep = "latest"
        self.extra: dict | None = None  # how the bonus stage counts (BONUS_RULES)
        # each grading: its statuses, its table, its hand-in time, and whether its report keeps its checks' targets
        self.handed: dict[str, list[tuple[dict, int, dt.datetime, bool]]] = {s: [] for s in STUDENTS}
        self.overrides: dict[tuple[str, str], float] = {}
        self.submitted: dict[str, dt.datetime] = {}
        self.grades: dict[str, float] = {}

    def teardown(self):
        shutil.rmtree(self.out, ignore_errors=True)

    def points(self) -> Points:
        return Points(TABLES[self.table])

    def students(self) -> list[Student]:
        return [Student(s, self.out, self.submitted.get(s)) for s in STUDENTS]

    def fingerprint(self, student: str, submission: int) -> dict:
        return {
            "submission": f"sha256:{submission:064x}",
            "grader": "sha256:" + "0" * 64,
            "points": points_hash(TABLES[self.table]),
            "device": "cpu",
            "options": OPTIONS | ({"extra_credit": self.extra} if self.extra is not None else {}),
        }

    def grade(self, student: Student, statuses: dict, keeps_targets: bool) -> None:
        """What a batch lane does with a new grading: the report, its late penalty, its history file."""
        report = priced(statuses, TABLES[self.table], keeps_targets, self.extra)
        report["fingerprint"] = self.fingerprint(student.id, len(self.handed[student.id]) - 1)
        report["graded_at"] = "2025-03-20T00:00:00+00:00"
        report["late"] = late_of(POLICY, student, report)
        write_report(self.out, student, report)
        write_feedback(self.out, student, report)
        keep_in_history(self.out, student, report)

    @rule(
        student=st.sampled_from(STUDENTS),
        statuses=st.fixed_dictionaries({c: st.booleans() for checks in STAGES.values() for c in checks}),
        hours=st.sampled_from([-5, 0.1, 20, 50, 80]),
        keeps_targets=st.booleans(),
    )
    def hand_in(self, student, statuses, hours, keeps_targets):
        self.submitted[student] = DUE + dt.timedelta(hours=hours)
        self.handed[student].append((statuses, self.table, self.submitted[student], keeps_targets))
        self.grade(next(s for s in self.students() if s.id == student), statuses, keeps_targets)

    @rule(table=st.sampled_from(range(len(TABLES))))
    def change_points(self, table):
        """A points change: the batch re-prices what it can, and grades again whom it cannot (a new grading)."""
        self.table = table
        students = [s for s in self.students() if self.handed[s.id]]
        current = {s.id: self.fingerprint(s.id, len(self.handed[s.id]) - 1) for s in students}
        done = reprice_class(students, self.out, current, self.points())
        for student in students:
            if student.id not in done:
                statuses, _, when, _ = self.handed[student.id][-1]
                self.handed[student.id].append((statuses, table, when, True))  # a regrade keeps them
                self.grade(student, statuses, True)

    @rule(extra=st.sampled_from(range(len(BONUS_RULES))))
    def switch_bonus(self, extra):
        """The course counts the bonus otherwise: the options changed, so the batch grades everyone again."""
        if BONUS_RULES[extra] == self.extra:
            return
        self.extra = BONUS_RULES[extra]
        for student in [s for s in self.students() if self.handed[s.id]]:
            statuses, _, when, _ = self.handed[student.id][-1]
            self.handed[student.id].append((statuses, self.table, when, True))
            self.grade(student, statuses, True)

    @rule(
        student=st.sampled_from(STUDENTS),
        stage=st.sampled_from([*STAGES, "total"]),
        points=st.sampled_from([0, 1.5, 4]),
    )
    def set_override(self, student, stage, points):
        self.overrides[(student, stage)] = points

    @precondition(lambda self: self.overrides)
    @rule(data=st.data())
    def remove_override(self, data):
        del self.overrides[data.draw(st.sampled_from(sorted(self.overrides)))]

    @rule(keep=st.sampled_from(["latest", "best"]))
    def switch_keep(self, keep):
        self.keep = keep

    def write(self) -> dict[str, dict]:
        with open(self.out / OVERRIDES_FILE, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["student_id", "stage", "points", "reason"])
            for (student, stage), points in sorted(self.overrides.items()):
                writer.writerow([student, stage, points, "by hand"])
        students = [s for s in self.students() if self.handed[s.id]]
        current = {s.id: self.fingerprint(s.id, len(self.handed[s.id]) - 1) for s in students}
        flagged = write_gradebook(self.out, students, current, POLICY, NUMBERS, self.points(), self.keep, self.extra)
        # the batch's closing lines count the rows that left a grading out
        said = " ".join(late_summary(flagged))
        assert (LEFT_OUT in said) == any(self.left_out(s.id) for s in students if self.keep == "best"), said
        with open(self.out / "grades.csv", newline="") as handle:
            return {row["student_id"]: row for row in csv.DictReader(handle)}

    def model_final(
        self, student: str, statuses: dict, table: int, when: dt.datetime, keeps_targets: bool
    ) -> float | None:
        """What the model says a grading is worth now: what grading it afresh under the table in force would give
        (re-pricing must equal a regrade); None where its report cannot be re-priced (a check whose price went from
        0 or to 0, in a report that does not keep what voiding rests on)."""
        then, now = TABLES[table], TABLES[self.table]
        if not keeps_targets and any((then[s][c] == 0) != (now[s][c] == 0) for s in STAGES for c in STAGES[s]):
            return None
        fresh = judged(statuses, now)
        stages = {s: sum(r.score for r in fresh if r.stage == int(s.removeprefix("stage"))) for s in STAGES}
        # an override above what it replaces can earn is refused, with a line: the grade goes on without it; the
        # whole is out of the core's points where the bonus is extra credit
        maxima = {s: sum(now[s].values()) for s in STAGES}
        cap = (self.extra or {}).get("cap")
        if self.extra is None:
            maxima["total"] = sum(maxima.values())
        else:  # the core's points, and the bonus's up to the cap
            maxima["total"] = maxima["stage1"] + (maxima["stage6"] if cap is None else min(maxima["stage6"], cap))
        valid = {s: p for (who, s), p in self.overrides.items() if who == student and p <= maxima[s]}
        if "total" in valid:
            return valid["total"]
        stages |= {s: valid[s] for s in STAGES if s in valid}
        scored = [{"id": s, "score": v, "max_score": sum(now[s].values())} for s, v in stages.items()]
        late = late_record(POLICY, when, False, scored, student=student)
        assert late["penalty_points"] <= sum(stages.values()) + 1e-9
        bonus = stages["stage6"] if cap is None else min(stages["stage6"], cap)
        return rounded(max(0, stages["stage1"] + bonus - late["penalty_points"]))

    def left_out(self, student: str) -> int:
        return sum(self.model_final(student, *grading) is None for grading in self.handed[student][:-1])

    @invariant()
    def one_grade_of_record(self):
        if not any(self.handed.values()):
            return
        rows = self.write()
        exported = read_grades(self.out / "grades.csv")
        summary = summarise(self.out)  # the class report renders the same rows: finals, and each stage kept
        graded = [r for r in rows.values() if r["score"]]
        assert sorted(summary.finals) == sorted(float(r["final"]) for r in graded)
        for stage in STAGES:
            assert sorted(summary.stage_scores.get(stage, [])) == sorted(float(r[stage]) for r in graded)
        for student, handed in self.handed.items():
            if not handed:
                continue
            row, report = rows[student], json.loads((self.out / "students" / f"{student}.json").read_text())
            final = float(row["final"])
            shown = RECORDED.search((self.out / "students" / f"{student}.txt").read_text())
            assert shown and float(shown.group(1)) == final, (row, shown)
            assert report["record"]["final"] == final and exported[student].points == final
            assert to_gradescope(report_model.from_json(report))["score"] == final  # results.json of the kept grading
            finals = [self.model_final(student, *grading) for grading in handed]
            latest = finals[-1]
            assert latest is not None  # the latest is always priced by the table in force
            if self.keep == "latest":
                assert final == latest
                continue
            assert final == max(f for f in finals if f is not None)
            left_out = sum(f is None for f in finals[:-1])
            flags = row["flags"]
            assert (LEFT_OUT in flags) == bool(left_out), (flags, finals)
            if left_out:
                assert flags.split(f"{LEFT_OUT}: ")[1].count("grading ") == left_out


TestTerm = Term.TestCase
TestTerm.settings = settings(
    max_examples=150, stateful_step_count=15, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
