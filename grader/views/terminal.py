"""The report as a person reads it in a terminal (and in a student's .txt feedback)."""

import os
import sys

from grader.core.hints import explain
from grader.core.report import Report, Status
from grader.core.stages import BONUS, CORE, STAGE_MODULES, registry
from grader.runner.escaping import printable
from grader.views.feedback import (
    causes_to_fix,
    check_title,
    extra_words,
    flag_sentences,
    is_advice,
    mark,
    next_step,
    notes_heading,
    notes_to_read,
    points_text,
    record_sentences,
    repeat_message,
    score_text,
    shown_output,
    stage_number,
    student_view,
    total_label,
)
from grader.views.heatmap import heat_map_lines

COLOUR_CODES = {"green": "32", "red": "31", "yellow": "33", "dim": "2", "bold": "1"}

# A line of the terminal report: pieces of text, each with its tone (None: not coloured).
Line = list[tuple[str, str | None]]


def render_text(
    report: Report,
    submission: str,
    color: bool | None = None,
    student_facing: bool = False,
    folder: str | None = None,
    banner: bool = True,
) -> str:
    """The report as a person reads it. Every piece of text is escaped before any colour goes in,
    so the grader's colour codes are the only ones that can reach the terminal.

    ``student_facing``: hidden checks show their verdict and hint only (feedback.student_view); without
    it, everything, as an instructor (or a learner whose repository holds no hidden checks) reads it.
    ``folder``: where the learner finds their files, for the next step (default ``submission``; "" names
    the file alone, as for a class, where ``submission`` is an id). ``banner``: False leaves out the opening
    lines (what was graded, on what, and the flags' sentences), which `make watch` says once.
    """
    colored = sys.stdout.isatty() and "NO_COLOR" not in os.environ if color is None else color
    report = student_view(report) if student_facing else report
    return "\n".join(
        "".join(_paint(printable(text, keep_newlines=False), tone, colored) for text, tone in line)
        for line in _lines(report, submission, submission if folder is None else folder, banner)
    )


def _lines(report: Report, submission: str, folder: str, banner: bool = True) -> list[Line]:
    lines: list[Line] = []
    if banner:
        lines.append(_plain(f"Grading {submission} on {report['device']} (torch {report['torch']})"))
        lines += [_plain(sentence) for sentence in record_sentences(report)]
        lines += [_plain(sentence) for sentence in flag_sentences(report)]
        lines.append(_plain(""))
    titles = {
        stage["id"]: registry()[stage_number(stage)].title + (" (bonus)" if stage.get("track") == BONUS else "")
        for stage in report["stages"]
    }
    width = max([38, *map(len, titles.values())])  # one column, however long a title
    for stage in report["stages"]:
        number = stage_number(stage)
        score = f"{points_text(stage['score']):>5}/{points_text(stage['max_score'])}"
        title = titles[stage["id"]]
        lines.append(
            [
                (f"stage {number}  {title:<{width}} {score}  {_bar(stage['score'], stage['max_score'])}  ", None),
                *[(mark(c), "dim" if is_advice(c) else _tone(c["status"])) for c in stage["checks"]],
            ]
        )
    lines.extend(_what_to_fix(report))
    lines.extend(_notes(report))
    lines.extend(_next_step(report, folder))
    lines.append(_plain(""))
    total = score_text(report["score"], report["max_score"])
    lines.append([(f"{total_label(report)}: {total}{_by_track(report)}", "bold")])
    return lines


def _by_track(report: Report) -> str:
    """ " (core 100/100, bonus 45/60)" when bonus stages were graded beside core ones; else nothing."""
    tracks: dict[str, tuple[float, float]] = {}
    for stage in report["stages"]:
        score, max_score = tracks.get(stage.get("track", CORE), (0, 0))
        tracks[stage.get("track", CORE)] = (score + stage["score"], max_score + stage["max_score"])
    if len(tracks) < 2:
        return ""
    return (
        " ("
        + ", ".join(f"{track} {score_text(s, m)}{extra_words(report, track)}" for track, (s, m) in tracks.items())
        + ")"
    )


def _what_to_fix(report: Report) -> list[Line]:
    """One entry per cause (feedback.causes_to_fix): its checks' messages, then its hint and one heat map."""
    lines: list[Line] = []
    shown: dict[str, str] = {}  # an evidence's title -> the check that showed its heat map
    for cause in causes_to_fix(report):
        if not lines:
            lines += [_plain(""), [("What to fix", "bold")]]
        first = cause.checks[0][0]
        lines.append([(f"{cause.title}: {cause.score}", _tone(first["status"]))])
        alone = len(cause.checks) == 1
        printed: list[Line] = []  # a check alone: what its code printed comes last, after the hint and the map
        for c, same_as in cause.checks:
            indent = "    " if alone else "      "
            if not alone:
                lines.append([(f"  · {check_title(c)}: {score_text(c['score'], c['max_score'])}", _tone(c["status"]))])
            if same_as:  # in a cause of its own stage's checks: its title line says it is one of them
                if alone:
                    lines.append(_plain(f"{indent}{repeat_message(same_as)}"))
                continue
            lines += _indented(c["message"], indent)
            for heading, text in shown_output(c):
                own = [_plain(f"{indent}{heading}"), *_indented(text, f"{indent}| ")]
                (printed if alone else lines).extend(own)
        if cause.hint:
            lines.append([(f"    hint [{cause.hint}]: {explain(cause.hint, cause.stage)}", "dim")])
        if cause.evidences and repr(cause.evidences[0]) in shown:
            lines.append(_plain(f"    (the heat map is under {shown[repr(cause.evidences[0])]} above)"))
        elif cause.evidences:
            shown[repr(cause.evidences[0])] = first["id"]
            lines += [_plain(f"    {line}") for line in heat_map_lines(cause.evidences[0])]
        lines += printed
    return lines


def _notes(report: Report) -> list[Line]:
    notes = notes_to_read(report)
    if not notes:
        return []
    lines: list[Line] = [_plain(""), [(notes_heading(notes), "bold")]]
    for number, c in notes:
        worth = f": {score_text(c['score'], c['max_score'])}" if c["max_score"] else ""
        lines.append([(f"stage {number} · {c['id']}{worth}", "dim" if not c["max_score"] else _tone(c["status"]))])
        lines += _indented(c["message"])
        if c["hint"]:
            lines.append([(f"    hint [{c['hint']}]: {explain(c['hint'], number)}", "dim")])
    return lines


def _next_step(report: Report, folder: str) -> list[Line]:
    step = next_step(report)
    if step is None:
        return []
    number, message = step
    where = f"{folder.rstrip('/')}/" if folder else ""
    return [
        _plain(""),
        [("Next step", "bold")],
        _plain(f"    open {where}{STAGE_MODULES[number]}.py"),
        _plain(f"    {message}"),
    ]


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


TONES = {Status.PASSED: "green", Status.FAILED: "red", Status.ERROR: "red", Status.TIMEOUT: "yellow"}


def _tone(status: Status) -> str:
    return TONES.get(status, "dim")


def _paint(text: str, tone: str | None, colored: bool) -> str:
    return f"\033[{COLOUR_CODES[tone]}m{text}\033[0m" if colored and tone else text
