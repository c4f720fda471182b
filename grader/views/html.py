"""python -m grader SUBMISSION --html FILE: the report as one HTML page that needs nothing else.

No script and no external file: styles are inline, heat maps are tables of coloured cells. Every
text of the report passes grader.runner.escaping.printable and then html.escape, so a learner's text
can neither act in a terminal it is copied to nor become markup.
"""

import html
import os
from pathlib import Path

from grader.core.hints import docs_link, sentence
from grader.core.report import CheckReport, Report, Status
from grader.core.stages import STAGE_MODULES
from grader.runner.escaping import printable
from grader.views.feedback import (
    STATUS_WORDS,
    causes_to_fix,
    check_title,
    flag_sentences,
    is_advice,
    mark,
    next_step,
    notes_heading,
    notes_to_read,
    record_sentences,
    repeat_message,
    score_text,
    shown_output,
    stage_number,
    student_view,
    total_label,
)

REPO = Path(__file__).resolve().parents[2]  # where docs/ is, in this repository and in the students'
# Heat map colours as (red, green, blue): blue for weights; for a difference, red where yours is larger and blue
# where it is smaller; grey for a cell that is not a number.
BLUE, RED, MISSING = (31, 119, 180), (214, 39, 40), "#bbb"
STYLE = """
body { font-family: system-ui, sans-serif; max-width: 64rem; margin: 1.5rem auto; padding: 0 1rem; color: #1f2328;
       line-height: 1.45; }
h1 { margin-bottom: .2rem; } h2 { margin-top: 2rem; } h3 { margin: .6rem 0; font-size: 1.05rem; }
h4 { margin: .8rem 0 .3rem; font-size: .95rem; } .meta, .flags { color: #57606a; }
.total { font-size: 1.4rem; font-weight: bold; }
.scroll { overflow-x: auto; max-width: 100%; }
table.stages { border-collapse: collapse; } table.stages td, table.stages th { padding: .2rem .6rem; text-align: left; }
td.marks { word-break: break-all; letter-spacing: .05rem; }
.marks .passed, .verdict.passed { color: #1a7f37; } .marks .failed, .marks .error, .verdict.failed, .verdict.error
{ color: #cf222e; } .marks .timeout, .verdict.timeout { color: #9a6700; }
.marks .not_implemented, .verdict.not_implemented { color: #6e7781; } .marks .note { color: #57606a; }
.verdict { font-weight: bold; white-space: nowrap; }
section.cause { border-left: 4px solid #cf222e; padding: .3rem 1rem .6rem; margin: 1.2rem 0; background: #f6f8fa; }
section.cause.timeout { border-color: #d4a72c; } section.cause.not_implemented { border-color: #8c959f; }
section.cause.note { border-color: #8c959f; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #fff; border: 1px solid #d0d7de; padding: .5rem;
      font-size: .85rem; }
details > summary { cursor: pointer; margin: .3rem 0; }
h3, summary, li, p, td { overflow-wrap: anywhere; } p.same-cause { margin: .2rem 0 .2rem 1.1rem; }
.maps { display: flex; flex-wrap: wrap; gap: 1.5rem; } figure { margin: 0; max-width: 100%; overflow-x: auto; }
table.heat { border-collapse: collapse; font-size: .75rem; }
table.heat td { width: 2.6rem; height: 1.6rem; text-align: center; border: 1px solid #d0d7de; }
table.heat th { font-weight: normal; color: #57606a; padding: 0 .3rem; } table.heat th.nan-row { color: #cf222e; }
.bar { display: inline-block; width: 8rem; height: .8rem; vertical-align: middle; border: 1px solid #d0d7de; }
ul.passed-checks { columns: 16rem; color: #1f2328; }
@media (max-width: 40rem) {
  body { margin: .8rem auto; padding: 0 .6rem; }
  table.heat td { width: 1.9rem; height: 1.3rem; font-size: .65rem; }
  table.stages td, table.stages th { padding: .2rem .3rem; }
}
"""


def render_html(report: Report, submission: str, page: Path, student_facing: bool = False) -> str:
    """The page for ``report`` of ``submission``; ``page`` is where it will be written (for links to the docs).

    ``student_facing``: hidden checks show their verdict and hint only (grader.views.feedback.student_view).
    """
    report = student_view(report) if student_facing else report
    total = score_text(report["score"], report["max_score"])
    parts = [
        f"<h1>Grading report</h1><p class='meta'>{_text(submission)} on {_text(report['device'])} "
        f"(torch {_text(report['torch'])})</p>",
        *[f"<p class='record'>{_text(sentence)}</p>" for sentence in record_sentences(report)],
        *[f"<p class='flags'>{_text(sentence)}</p>" for sentence in flag_sentences(report)],
        f"<p class='total'>{total_label(report)}: {total}</p>",
        _stage_table(report),
        _what_to_fix(report, page.parent),
        _notes(report, page.parent),
        _next_step(report, submission),
        _passed(report),
    ]
    return (
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
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
            f"<td>{score_text(stage['score'], stage['max_score'])}</td>"
            f"<td class='marks'>{marks}</td></tr>"
        )
    header = "<tr><th>stage</th><th></th><th>score</th><th>checks</th></tr>"
    return f"<div class='scroll'><table class='stages'>{header}{''.join(rows)}</table></div>"


def _passed(report: Report) -> str:
    """The checks that passed, a folded list per stage: there to look up, out of the way of what to fix."""
    folds = []
    for stage in report["stages"]:
        passed = [c for c in stage["checks"] if c["status"] == Status.PASSED]
        if passed:
            items = "".join(f"<li>{_text(check_title(c))}</li>" for c in passed)
            folds.append(
                f"<details><summary>stage {stage_number(stage)}: {len(passed)} of {len(stage['checks'])} checks "
                f"passed</summary><ul class='passed-checks'>{items}</ul></details>"
            )
    return "<h2>Checks that passed</h2>" + "".join(folds) if folds else ""


def _what_to_fix(report: Report, folder: Path) -> str:
    """One card per cause (feedback.causes_to_fix): its checks' messages (folded but the first, where it
    has several), then its hint and every heat map its checks carry."""
    sections = []
    for cause in causes_to_fix(report):
        status = cause.checks[0][0]["status"]
        body = [f"<h3>{_text(cause.title)}: <span class='verdict {status}'>{cause.score}</span></h3>"]
        for index, (c, same_as) in enumerate(cause.checks):
            if same_as and len(cause.checks) > 1:  # one of the checks the cause's first message speaks for
                body.append(
                    f"<p class='same-cause'>{_text(check_title(c))}: <span class='verdict {c['status']}'>"
                    f"{score_text(c['score'], c['max_score'])}</span></p>"
                )
                continue
            said = (
                f"<p>{_text(repeat_message(same_as))}</p>"
                if same_as
                else (f"<pre>{_text(c['message'])}</pre>" if c["message"] else "") + _printed(c)
            )
            if len(cause.checks) == 1:
                body.append(said)
                continue
            opened = " open" if index == 0 else ""
            body.append(
                f"<details{opened}><summary>{_text(check_title(c))}: <span class='verdict {c['status']}'>"
                f"{score_text(c['score'], c['max_score'])}</span></summary>{said}</details>"
            )
        body.append(_hint(cause.hint, cause.stage, folder) if cause.hint else "")
        body.extend(_evidence(evidence) for evidence in cause.evidences)
        sections.append(f"<section class='cause {status}'>{''.join(body)}</section>")
    return "<h2>What to fix</h2>" + "".join(sections) if sections else ""


def _printed(check: CheckReport) -> str:
    shown = shown_output(check)
    return "".join(f"<details><summary>{head}</summary><pre>{_text(text)}</pre></details>" for head, text in shown)


def _notes(report: Report, folder: Path) -> str:
    """The notes with something to say, apart from the checks to fix and in their own colour."""
    notes = notes_to_read(report)
    sections = []
    for number, c in notes:
        worth = f": {score_text(c['score'], c['max_score'])}" if c["max_score"] else ""
        body = [
            f"<h3>stage {number} · {_text(c['id'])}{worth}</h3>",
            f"<pre>{_text(c['message'])}</pre>" if c["message"] else "",
            _hint(c["hint"], number, folder) if c["hint"] else "",
        ]
        sections.append(f"<section class='cause note'>{''.join(body)}</section>")
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
        if all(value is None for value in row):  # a query that attends to nothing: every key of it masked
            label = f"<th class='nan-row' title='row {i}: not a number in any column (every key hidden?)'>{i} ⚠</th>"
        else:
            label = f"<th>{i}</th>"
        rows.append(f"<tr>{label}{''.join(cells)}</tr>")
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
