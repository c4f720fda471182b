"""Turn check verdicts into the report: the JSON contract, the terminal view, Gradescope's results."""

import os
import sys
from collections.abc import Iterable

from grader.feedback import (
    PRINTED_HEADING,
    checks_to_fix,
    flag_sentences,
    is_advice,
    mark,
    next_step,
    notes_heading,
    notes_to_read,
    points_text,
    repeat_message,
    repeated_causes,
    stage_number,
    student_view,
    total_label,
)
from grader.heatmap import heat_map_lines
from grader.hints import explain
from grader.plugin import CheckResult
from grader.points import rounded as _round
from grader.stages import BONUS, CORE, STAGE_MODULES, is_note, registry
from grader.runner.text import printable

TITLES = {number: stage.title for number, stage in registry().items()}


# A flag that starts with this marks a report whose grading the grader itself could not finish:
# complete is false, and the next batch run grades the student again.
INCOMPLETE = "incomplete"


def build(results: Iterable[CheckResult], stages: list[int], device: str, torch_version: str,
          flags: list[str], sandbox: str) -> dict:
    """The report as the JSON contract defines it (grader/schemas/report.schema.json)."""
    by_stage = {stage: [r for r in results if r.stage == stage] for stage in stages}
    report_stages = []
    for stage, checks in by_stage.items():
        _void_shortcut_targets(checks)
        report_stages.append({
            "id": f"stage{stage}",
            "title": TITLES[stage],
            "track": registry()[stage].track,
            "score": _round(sum(c.score for c in checks)),
            "max_score": _round(sum(c.max_score for c in checks)),
            "checks": [
                {"id": c.id, "visibility": c.visibility, "status": c.status, "score": _round(c.score),
                 "max_score": _round(c.max_score), "message": c.message, "hint": c.hint, "evidence": c.evidence,
                 "printed": c.printed, **({"visible_verdict": c.visible_verdict} if c.visible_verdict else {})}
                for c in checks
            ],
        })
    return {
        "score": _round(sum(s["score"] for s in report_stages)),
        "max_score": _round(sum(s["max_score"] for s in report_stages)),
        "device": device,
        "torch": torch_version,
        "sandbox": sandbox,
        "stages": report_stages,
        "flags": flags,
        "complete": not any(flag.startswith(INCOMPLETE) for flag in flags),
    }


# Why a shortcut check's verdict voids every check of its target, by the hint it carries.
VOIDED_BECAUSE = {
    "banned-api": "no credit: {target} calls PyTorch's own version of what it is meant to compute",
    "recorder-tampered": "no credit: the grader could not see the operations {target} runs; switching off "
                         "PyTorch's function or dispatch modes, or reaching into the grader, is not allowed",
}


def _void_shortcut_targets(checks: list[CheckResult]) -> None:
    """A function that calls what it should build, or hides what it runs, earns nothing for it, in any check.

    A visible check voided by what the code did with a hidden input keeps the verdict its own inputs
    earned as ``visible_verdict``: students read visible checks before hidden results are published
    (Gradescope), and a score that moved there would tell them what the hidden input held, since the
    code can choose whether to take the shortcut by it. What the source shows voids them outright."""
    voided = {c.target: (c.hint, c.from_source) for c in checks
              if c.id.startswith("shortcut.") and c.hint in VOIDED_BECAUSE}
    for c in checks:
        if c.target not in voided or not c.score:
            continue
        hint, from_source = voided[c.target]
        if c.visibility == "visible" and not from_source:
            c.visible_verdict = {"status": c.status, "score": _round(c.score), "message": c.message, "hint": c.hint}
        c.score, c.status, c.hint = 0, "failed", hint
        c.message = VOIDED_BECAUSE[hint].format(target=c.target)


# Terminal ---------------------------------------------------------------------------------

COLOUR_CODES = {"green": "32", "red": "31", "yellow": "33", "dim": "2", "bold": "1"}

# A line of the terminal report: pieces of text, each with its tone (None: not coloured).
Line = list[tuple[str, str | None]]


def render_text(report: dict, submission: str, color: bool | None = None, student_facing: bool = False,
                folder: str | None = None) -> str:
    """The report as a person reads it. Every piece of text is escaped before any colour goes in,
    so the grader's colour codes are the only ones that can reach the terminal.

    ``student_facing``: hidden checks show their verdict and hint only (feedback.student_view); without
    it, everything, as an instructor (or a learner whose repository holds no hidden checks) reads it.
    ``folder``: where the learner finds their files, for the next step (default ``submission``; "" names
    the file alone, as for a class, where ``submission`` is an id).
    """
    colored = sys.stdout.isatty() and "NO_COLOR" not in os.environ if color is None else color
    report = student_view(report) if student_facing else report
    return "\n".join("".join(_paint(printable(text, keep_newlines=False), tone, colored) for text, tone in line)
                     for line in _lines(report, submission, submission if folder is None else folder))


def _lines(report: dict, submission: str, folder: str) -> list[Line]:
    lines = [_plain(f"Grading {submission} on {report['device']} (torch {report['torch']})")]
    lines += [_plain(sentence) for sentence in flag_sentences(report)]
    lines.append(_plain(""))
    titles = {stage["id"]: TITLES[stage_number(stage)] + (" (bonus)" if stage.get("track") == BONUS else "")
              for stage in report["stages"]}
    width = max([38, *map(len, titles.values())])  # one column, however long a title
    for stage in report["stages"]:
        number = stage_number(stage)
        score = f"{points_text(stage['score']):>5}/{points_text(stage['max_score'])}"
        title = titles[stage["id"]]
        lines.append([(f"stage {number}  {title:<{width}} {score}  {_bar(stage['score'], stage['max_score'])}  ",
                       None), *[(mark(c), "dim" if is_advice(c) else _tone(c["status"])) for c in stage["checks"]]])
    lines.extend(_what_to_fix(report))
    lines.extend(_notes(report))
    lines.extend(_next_step(report, folder))
    lines.append(_plain(""))
    total = f"{points_text(report['score'])}/{points_text(report['max_score'])}"
    lines.append([(f"{total_label(report)}: {total}{_by_track(report)}", "bold")])
    return lines


def _by_track(report: dict) -> str:
    """" (core 100/100, bonus 45/60)" when bonus stages were graded beside core ones; else nothing."""
    tracks = {}
    for stage in report["stages"]:
        score, max_score = tracks.get(stage.get("track", CORE), (0, 0))
        tracks[stage.get("track", CORE)] = (score + stage["score"], max_score + stage["max_score"])
    if len(tracks) < 2:
        return ""
    return " (" + ", ".join(f"{track} {points_text(s)}/{points_text(m)}" for track, (s, m) in tracks.items()) + ")"


def _what_to_fix(report: dict) -> list[Line]:
    lines: list[Line] = []
    shown: dict[str, str] = {}  # an evidence's title -> the check that showed its heat map
    for number, c, same_as in checks_to_fix(report):
        if not lines:
            lines += [_plain(""), [("What to fix", "bold")]]
        visibility = "" if c["visibility"] == "visible" else " (hidden check)"
        score = f"{points_text(c['score'])}/{points_text(c['max_score'])}"
        lines.append([(f"stage {number} · {c['id']}{visibility}: {score}", _tone(c["status"]))])
        if same_as:
            lines.append(_plain(f"    {repeat_message(same_as)}"))
            continue
        lines += _indented(c["message"])
        if c["hint"]:
            lines.append([(f"    hint [{c['hint']}]: {explain(c['hint'], number)}", "dim")])
        if c["evidence"] and repr(c["evidence"]) in shown:
            lines.append(_plain(f"    (the heat map is under {shown[repr(c['evidence'])]} above)"))
        elif c["evidence"]:
            shown[repr(c["evidence"])] = c["id"]
            lines += [_plain(f"    {line}") for line in heat_map_lines(c["evidence"])]
        if c["printed"]:
            lines += [_plain(f"    {PRINTED_HEADING}"), *_indented(c["printed"], "    | ")]
    return lines


def _notes(report: dict) -> list[Line]:
    notes = notes_to_read(report)
    if not notes:
        return []
    lines: list[Line] = [_plain(""), [(notes_heading(notes), "bold")]]
    for number, c in notes:
        worth = f": {points_text(c['score'])}/{points_text(c['max_score'])}" if c["max_score"] else ""
        lines.append([(f"stage {number} · {c['id']}{worth}", "dim" if not c["max_score"] else _tone(c["status"]))])
        lines += _indented(c["message"])
        if c["hint"]:
            lines.append([(f"    hint [{c['hint']}]: {explain(c['hint'], number)}", "dim")])
    return lines


def _next_step(report: dict, folder: str) -> list[Line]:
    step = next_step(report)
    if step is None:
        return []
    number, message = step
    where = f"{folder.rstrip('/')}/" if folder else ""
    return [_plain(""), [("Next step", "bold")],
            _plain(f"    open {where}{STAGE_MODULES[number]}.py"), _plain(f"    {message}")]


def _plain(text: str) -> Line:
    return [(text, None)]


def _indented(text: str, prefix: str = "    ") -> list[Line]:
    """A line of the report for each line of ``text``."""
    # newlines only: str.splitlines also breaks at \r, \x85, U+2028 and others a learner can send
    text = text.rstrip("\n")
    return [_plain(f"{prefix}{line}") for line in text.split("\n")] if text else []


def _bar(score: float, max_score: float, width: int = 10) -> str:
    # full only when nothing is missing: 19/20 rounds to a full bar otherwise
    filled = min(round(width * score / max_score), width - (score < max_score)) if max_score else 0
    return "█" * filled + "░" * (width - filled)


def _tone(status: str) -> str:
    return {"passed": "green", "failed": "red", "error": "red", "timeout": "yellow"}.get(status, "dim")


def _paint(text: str, tone: str | None, colored: bool) -> str:
    return f"\033[{COLOUR_CODES[tone]}m{text}\033[0m" if colored and tone else text


# Gradescope and GitHub Classroom ---------------------------------------------------------


def _checks_with_feedback(report: dict):
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
            if c["printed"]:
                output += f"\n{PRINTED_HEADING}\n{c['printed']}"
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


def to_gradescope(report: dict) -> dict:
    """Gradescope's results.json: until grades are published a student sees the visible checks alone, and
    their score; the hidden checks appear after publishing, with their verdicts and hints only. No
    execution time: the hidden checks' share of it depends on what their inputs made the learner's code do."""
    shown = _before_publishing(report)
    tests = [{"name": f"stage {number}: {c['id']}", "score": c["score"], "max_score": c["max_score"],
              "status": "passed" if _passes(c) else "failed", "output": output,
              "visibility": "visible" if c["visibility"] == "visible" else "after_published"}
             for number, c, output in _checks_with_feedback(shown)]
    summary = "\n".join([_visible_score(shown), *flag_sentences(report)])
    return _printable_strings({"score": report["score"],
                               "output": summary, "visibility": "visible", "stdout_visibility": "hidden",
                               "extra_data": {"sandbox": report["sandbox"]}, "tests": tests})


def _before_publishing(report: dict) -> dict:
    """``report`` with each visible check as its own inputs judged it (its ``visible_verdict``, where a
    shortcut seen on a hidden input voided it): what students may read before grades are published. The
    top-level score, hidden until then, stays the report's."""
    def own(check: dict) -> dict:
        return {**check, **check["visible_verdict"]} if check.get("visible_verdict") else check
    return {**report, "stages": [{**stage, "checks": [own(c) for c in stage["checks"]]} for stage in report["stages"]]}


def _visible_score(report: dict) -> str:
    """The visible checks' points, and how many points the hidden checks hold, never what they earned."""
    checks = [c for stage in report["stages"] for c in stage["checks"]]
    visible = [c for c in checks if c["visibility"] == "visible"]
    score = points_text(_round(sum(c["score"] for c in visible)))
    line = f"Visible checks: {score}/{points_text(_round(sum(c['max_score'] for c in visible)))} on {report['device']}."
    hidden = _round(sum(c["max_score"] for c in checks if c["visibility"] != "visible"))
    if hidden:
        line += (f" The hidden checks ({points_text(hidden)} of the {points_text(report['max_score'])} points) "
                 "count once your instructor publishes the grades.")
    return line


def to_classroom(report: dict) -> dict:
    """The result a GitHub Classroom grading reporter reads (one runner): points per check."""
    tests = [{"name": f"stage {number}: {c['id']}", "status": "pass" if _passes(c) else "fail",
              "score": c["score"], "message": output} for number, c, output in _checks_with_feedback(report)]
    passed = all(t["status"] == "pass" for t in tests)
    return _printable_strings({"version": 1, "status": "pass" if passed else "fail",
                               "max_score": report["max_score"], "tests": tests})


def _passes(check: dict) -> bool:
    """Passed, for a platform's red and green: a note that costs nothing passes whatever it says."""
    return check["status"] == "passed" or (is_note(check["id"]) and not check["max_score"])


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
