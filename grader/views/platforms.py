"""What students see on Gradescope and GitHub Classroom: each platform's result, from a report."""

from collections.abc import Iterator

from grader.core.hints import explain
from grader.core.points import rounded
from grader.core.report import CheckReport, Report, StageReport, Status
from grader.core.stages import BONUS, is_note
from grader.runner.escaping import printable
from grader.views.feedback import (
    flag_sentences,
    points_text,
    recorded_score,
    repeat_message,
    repeated_causes,
    shown_output,
    stage_number,
    student_view,
)


def _checks_with_feedback(report: Report) -> Iterator[tuple[int, CheckReport, str]]:
    """(stage number, check, the text a student reads for it) for every check of the report: what a
    student sees on either platform, so hidden checks give their verdict and hint only."""
    for stage in student_view(report)["stages"]:
        number = stage_number(stage)
        repeats = repeated_causes(stage)
        for c in stage["checks"]:
            if c["id"] in repeats:
                yield number, c, repeat_message(repeats[c["id"]])
                continue
            output = c["message"] or ""
            if c["hint"]:
                output += f"\nhint [{c['hint']}]: {explain(c['hint'], number)}"
            for heading, text in shown_output(c):
                output += f"\n{heading}\n{text}"
            yield number, c, output.strip()


# Gradescope's autograder specification (gradescope-autograders.readthedocs.io/en/latest/specs/, the
# source of which is docs/specs.md in github.com/gradescope/autograder_samples) is what these fields rest on:
# - a test's "visibility" is hidden, after_due_date, after_published ("shown only when the assignment is
#   explicitly published from the Review Grades page") or visible, and overrides the top level's;
# - "If test cases are hidden, students will not be able to see their total score. Test cases with
#   visibility set to `hidden` don't affect this": after_published hidden checks keep the top-level
#   "score" (which "overrides total of tests") from students until grades are published, so it can be the
#   whole score, for the gradebook;
# - the top-level "output" is shown with the results, so it names the visible checks' score only;
# - what run_autograder prints is "only shown to instructors" unless "stdout_visibility" says otherwise:
#   it holds the full report (python -m grader prints it), and "hidden" says so explicitly;
# - "extra_data" is stored, not shown: what kept the learner's code in, for the instructor.


def to_gradescope(report: Report) -> dict:
    """Gradescope's results.json: until grades are published a student sees the visible checks alone, and
    their score; the hidden checks appear after publishing, with their verdicts and hints only. No
    execution time: the hidden checks' share of it depends on what their inputs made the learner's code do."""
    shown = _before_publishing(report)
    skipped = _not_attempted(report)
    tests = [
        {
            "name": f"stage {number}: {c['id']}",
            "score": c["score"],
            "max_score": c["max_score"],
            "status": "passed" if _passes(c) else "failed",
            "output": output,
            "visibility": "visible" if c["visibility"] == "visible" else "after_published",
        }
        for number, c, output in _checks_with_feedback(shown)
        if number not in skipped
    ]
    for number, stage in skipped.items():  # one neutral line, no status: nothing failed, nothing is owed
        tests.append(
            {
                "name": f"stage {number}: not attempted (bonus, extra credit)",
                "score": 0,
                "max_score": 0,
                "output": f"{stage['title']}: not attempted. Bonus stages are extra credit here: leaving one out "
                "costs nothing.",
                "visibility": "visible",
            }
        )
    summary = "\n".join([_visible_score(shown, skipped), *flag_sentences(report)])
    return _printable_strings(
        {
            "score": recorded_score(report),
            "output": summary,
            "visibility": "visible",
            "stdout_visibility": "hidden",
            "extra_data": {"sandbox": report["sandbox"]},
            "tests": tests,
        }
    )


def _not_attempted(report: Report) -> dict[int, StageReport]:
    """stage number -> stage, for each bonus stage counted as extra credit whose every check found nothing
    implemented (no file, or the stub as handed out)."""
    if "extra_credit" not in report:
        return {}
    return {
        stage_number(stage): stage
        for stage in report["stages"]
        if stage["track"] == BONUS and all(c["status"] == Status.NOT_IMPLEMENTED for c in stage["checks"])
    }


def _before_publishing(report: Report) -> Report:
    """``report`` with each visible check as its own inputs judged it (its ``visible_verdict``, where a
    shortcut seen on a hidden input voided it): what students may read before grades are published. The
    top-level score, hidden until then, stays the report's."""

    def own(check: CheckReport) -> CheckReport:
        return {**check, **check["visible_verdict"]} if check.get("visible_verdict") else check

    stages: list[StageReport] = [{**stage, "checks": [own(c) for c in stage["checks"]]} for stage in report["stages"]]
    return {**report, "stages": stages}


def _visible_score(report: Report, skipped: dict[int, StageReport] | None = None) -> str:
    """The visible checks' points, and how many points the hidden checks hold, never what they earned: the
    chapter's stages first, then the bonus stages graded, each summed apart (a bonus point is no chapter point);
    ``skipped``: bonus stages not attempted where they are extra credit, named as such and counted nowhere."""
    skipped = skipped or {}

    def points(stages: list[StageReport]) -> tuple[str, str, float]:
        checks = [c for stage in stages for c in stage["checks"]]
        visible = [c for c in checks if c["visibility"] == "visible"]
        score = points_text(rounded(sum(c["score"] for c in visible)))
        hidden = rounded(sum(c["max_score"] for c in checks if c["visibility"] != "visible"))
        return score, points_text(rounded(sum(c["max_score"] for c in visible))), hidden

    chapter = [stage for stage in report["stages"] if stage["track"] != BONUS]
    bonus = [s for s in report["stages"] if s["track"] == BONUS and stage_number(s) not in skipped]
    score, worth, hidden = points(chapter)
    line = f"Visible checks: {score}/{worth} on {report['device']}."
    if hidden:
        total = points_text(rounded(sum(stage["max_score"] for stage in chapter)))
        line += (
            f" The hidden checks ({points_text(hidden)} of the {total} points) count once your instructor "
            "publishes the grades."
        )
    if bonus:
        score, worth, hidden = points(bonus)
        line += f" Bonus stages: visible checks {score}/{worth}" + (
            f"; their hidden checks hold {points_text(hidden)} points more." if hidden else "."
        )
    if skipped:
        line += f" Bonus stages not attempted: {', '.join(map(str, sorted(skipped)))} (extra credit: nothing owed)."
    return line


def to_classroom(report: Report) -> dict:
    """The result a GitHub Classroom grading reporter reads (one runner): points per check."""
    tests = [
        {
            "name": f"stage {number}: {c['id']}",
            "status": "pass" if _passes(c) else "fail",
            "score": c["score"],
            "message": output,
        }
        for number, c, output in _checks_with_feedback(report)
    ]
    passed = all(t["status"] == "pass" for t in tests)
    return _printable_strings(
        {"version": 1, "status": "pass" if passed else "fail", "max_score": report["max_score"], "tests": tests}
    )


def _passes(check: CheckReport) -> bool:
    """Passed, for a platform's red and green: a note that costs nothing passes whatever it says."""
    return check["status"] == Status.PASSED or (is_note(check["id"]) and not check["max_score"])


def _printable_strings(value):
    """``value`` with every string in it escaped (newlines kept): both platforms show these strings as text
    on a page or in a log, where control characters would act rather than show."""
    if isinstance(value, str):
        return printable(value, keep_newlines=True)
    if isinstance(value, list):
        return [_printable_strings(item) for item in value]
    if isinstance(value, dict):
        return {key: _printable_strings(item) for key, item in value.items()}
    return value
