"""python -m grader SUBMISSION --html FILE: the report as one HTML page that needs nothing else.

No script and no external file: styles are inline, heat maps are tables of coloured cells. Every
text of the report passes grader.runner.escaping.printable and then html.escape, so a learner's text
can neither act in a terminal it is copied to nor become markup.
"""

import html
import os
from pathlib import Path

from grader.core.hints import docs_link, sentence
from grader.core.report import Report
from grader.core.stages import STAGE_MODULES
from grader.runner.escaping import printable
from grader.views.feedback import (
    PRINTED_HEADING,
    STATUS_WORDS,
    cause_heading,
    causes_to_fix,
    check_title,
    flag_sentences,
    is_advice,
    mark,
    next_step,
    notes_heading,
    notes_to_read,
    points_text,
    repeat_message,
    stage_number,
    student_view,
    total_label,
)

REPO = Path(__file__).resolve().parents[2]  # where docs/ is, in this repository and in the students'
# Heat map colours as (red, green, blue): blue for weights; for a difference, red where yours is larger and blue
# where it is smaller; grey for a cell that is not a number.
BLUE, RED, MISSING = (31, 119, 180), (214, 39, 40), "#bbb"
STYLE = """
body { font-family: system-ui, sans-serif; max-width: 72rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
h1 { margin-bottom: .2rem; } .meta, .flags { color: #555; } .total { font-size: 1.4rem; font-weight: bold; }
table.stages { border-collapse: collapse; } table.stages td, table.stages th { padding: .2rem .8rem; text-align: left; }
.passed { color: #1a7f37; } .failed, .error { color: #cf222e; } .timeout { color: #9a6700; }
.not_implemented { color: #888; }
section.check { border-left: 4px solid #cf222e; padding: .2rem 1rem; margin: 1.2rem 0; background: #fafafa; }
section.check.timeout { border-color: #d4a72c; }
section.check.note { border-color: #57606a; } .note { color: #57606a; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f0f0f0; padding: .5rem; }
.maps { display: flex; flex-wrap: wrap; gap: 1.5rem; } figure { margin: 0; }
table.heat { border-collapse: collapse; font-size: .75rem; }
table.heat td { width: 2.6rem; height: 1.6rem; text-align: center; border: 1px solid #ddd; }
table.heat th { font-weight: normal; color: #777; padding: 0 .3rem; }
.bar { display: inline-block; width: 10rem; height: .8rem; vertical-align: middle; border: 1px solid #ccc; }
"""


def render_html(report: Report, submission: str, page: Path, student_facing: bool = False) -> str:
    """The page for ``report`` of ``submission``; ``page`` is where it will be written (for links to the docs).

    ``student_facing``: hidden checks show their verdict and hint only (grader.views.feedback.student_view).
    """
    report = student_view(report) if student_facing else report
    total = f"{points_text(report['score'])}/{points_text(report['max_score'])}"
    parts = [
        f"<h1>Grading report</h1><p class='meta'>{_text(submission)} on {_text(report['device'])} "
        f"(torch {_text(report['torch'])})</p>",
        *[f"<p class='flags'>{_text(sentence)}</p>" for sentence in flag_sentences(report)],
        f"<p class='total'>{total_label(report)}: {total}</p>",
        _stage_table(report),
        _what_to_fix(report, page.parent),
        _notes(report, page.parent),
        _next_step(report, submission),
    ]
    return (
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>Grading report: {total}</title><style>{STYLE}</style></head>\n<body>\n"
        + "\n".join(part for part in parts if part)
        + "\n</body></html>\n"
    )


def _stage_table(report: Report) -> str:
    rows = []
    for stage in report["stages"]:
        marks = "".join(
            f"<span class='{'note' if is_advice(c) else c['status']}' "
            f"title='{_text(c['id'])}: {'a note' if is_advice(c) else STATUS_WORDS[c['status']]}'>"
            f"{mark(c)}</span>"
            for c in stage["checks"]
        )
        rows.append(
            f"<tr><td>stage {stage_number(stage)}</td><td>{_text(stage['title'])}</td>"
            f"<td>{points_text(stage['score'])}/{points_text(stage['max_score'])}</td><td>{marks}</td></tr>"
        )
    header = "<tr><th>stage</th><th></th><th>score</th><th>checks</th></tr>"
    return f"<table class='stages'>{header}{''.join(rows)}</table>"


def _what_to_fix(report: Report, folder: Path) -> str:
    """One card per cause (feedback.causes_to_fix): its checks' messages, then its hint and every heat map."""
    sections = []
    for cause in causes_to_fix(report):
        alone = len(cause.checks) == 1
        body = [f"<h3>{_text(cause_heading(cause))}</h3>"]
        for c, same_as in cause.checks:
            if not alone:
                body.append(
                    f"<h4>{_text(check_title(c))}: {points_text(c['score'])}/{points_text(c['max_score'])}</h4>"
                )
            if same_as:
                body.append(f"<p>{_text(repeat_message(same_as))}</p>")
                continue
            body.append(f"<pre>{_text(c['message'])}</pre>" if c["message"] else "")
            body.append(f"<h4>{PRINTED_HEADING}</h4><pre>{_text(c['printed'])}</pre>" if c["printed"] else "")
        body.append(_hint(cause.hint, cause.stage, folder) if cause.hint and not cause.checks[0][1] else "")
        body.extend(_evidence(evidence) for evidence in cause.evidences)
        sections.append(f"<section class='check {cause.checks[0][0]['status']}'>{''.join(body)}</section>")
    return "<h2>What to fix</h2>" + "".join(sections) if sections else ""


def _notes(report: Report, folder: Path) -> str:
    """The notes with something to say, apart from the checks to fix and in their own colour."""
    notes = notes_to_read(report)
    sections = []
    for number, c in notes:
        worth = f": {points_text(c['score'])}/{points_text(c['max_score'])}" if c["max_score"] else ""
        body = [
            f"<h3>stage {number} · {_text(c['id'])}{worth}</h3>",
            f"<pre>{_text(c['message'])}</pre>" if c["message"] else "",
            _hint(c["hint"], number, folder) if c["hint"] else "",
        ]
        sections.append(f"<section class='check note'>{''.join(body)}</section>")
    return f"<h2>{_text(notes_heading(notes))}</h2>" + "".join(sections) if sections else ""


def _hint(hint: str, stage: int, folder: Path) -> str:
    link = docs_link(hint, stage)
    page = REPO / link.partition("#")[0]
    href = f"{Path(os.path.relpath(page, folder)).as_posix()}#{hint}"
    where = f"<a href='{html.escape(href)}'>{_text(link)}</a>" if page.is_file() else _text(link)
    return f"<p><b>hint [{_text(hint)}]</b>: {_text(sentence(hint, stage))} (see {where})</p>"


def _evidence(evidence: dict) -> str:
    expected, actual = evidence["expected"], evidence["actual"]
    rows, columns = evidence["shape"]
    kept_rows, kept_columns = len(expected), len(expected[0])
    shown = f" (the top-left {kept_rows}×{kept_columns} of {rows}×{columns})"
    if (kept_rows, kept_columns) == (rows, columns):
        shown = ""
    difference = [[None if a is None or e is None else a - e for e, a in zip(*pair)] for pair in zip(expected, actual)]
    peak = max((v for table in (expected, actual) for row in table for v in row if v is not None), default=0.0)
    spread = max((abs(v) for row in difference for v in row if v is not None), default=0.0)
    maps = [
        ("expected", _heat_table(expected, lambda v: _weight_colour(v, peak))),
        ("yours", _heat_table(actual, lambda v: _weight_colour(v, peak))),
        ("difference (yours − expected)", _heat_table(difference, lambda v: _difference_colour(v, spread))),
    ]
    figures = "".join(f"<figure><figcaption>{name}</figcaption>{table}</figure>" for name, table in maps)
    legend = (
        f"<p>weights: 0 <span class='bar' style='background:linear-gradient(to right, white, {_rgb(BLUE)})'>"
        f"</span> {peak:.4g}; difference: −{spread:.4g} <span class='bar' style='background:linear-gradient("
        f"to right, {_rgb(BLUE)}, white, {_rgb(RED)})'></span> +{spread:.4g}; rows are queries (the token "
        f"that attends), columns keys (the token attended to); grey: not a number</p>"
    )
    note = f"<p>{_text(evidence['note'])}</p>" if evidence["note"] else ""
    return f"<h4>{_text(evidence['title'])}{shown}</h4><div class='maps'>{figures}</div>{legend}{note}"


def _heat_table(table: list[list[float | None]], colour) -> str:
    header = "<tr><th></th>" + "".join(f"<th>{j}</th>" for j in range(len(table[0]))) + "</tr>"
    rows = []
    for i, row in enumerate(table):
        cells = []
        for j, value in enumerate(row):
            shown = "NaN" if value is None else f"{value:.2f}"
            exact = "not a number" if value is None else f"{value:.4f}"
            cells.append(f"<td style='{colour(value)}' title='row {i}, column {j}: {exact}'>{shown}</td>")
        rows.append(f"<tr><th>{i}</th>{''.join(cells)}</tr>")
    return f"<table class='heat'>{header}{''.join(rows)}</table>"


def _weight_colour(value: float | None, peak: float) -> str:
    if value is None:
        return f"background:{MISSING}"
    return _shade(BLUE, max(0.0, value) / peak if peak > 0 else 0.0)


def _difference_colour(value: float | None, spread: float) -> str:
    if value is None:
        return f"background:{MISSING}"
    return _shade(RED if value > 0 else BLUE, abs(value) / spread if spread > 0 else 0.0)


def _shade(rgb: tuple[int, int, int], strength: float) -> str:
    text = "white" if strength > 0.6 else "#222"
    return f"background:rgba({rgb[0]},{rgb[1]},{rgb[2]},{strength:.2f});color:{text}"


def _rgb(rgb: tuple[int, int, int]) -> str:
    return f"rgb({rgb[0]},{rgb[1]},{rgb[2]})"


def _next_step(report: Report, submission: str) -> str:
    step = next_step(report)
    if step is None:
        return ""
    number, message = step
    path = f"{submission.rstrip('/')}/{STAGE_MODULES[number]}.py"
    return f"<h2>Next step</h2><p>open {_text(path)}: {_text(message)}</p>"


def _text(value: str) -> str:
    """Report text as HTML: control and bidi characters as visible escapes, then markup characters escaped."""
    return html.escape(printable(str(value), keep_newlines=True))
