"""OUT/class-report.html: the class at a glance, one self-contained page (no script, no network, plots as
inline SVG) drawn from a ClassSummary; each student named links to the feedback the batch wrote them."""

import html
from collections import Counter
from urllib.parse import quote

from grader.classroom.class_summary import ClassSummary, file_id
from grader.classroom.names import with_name
from grader.classroom.out_folder import STUDENTS
from grader.classroom.similarity import REPORT_NAME as SIMILARITY_PAGE
from grader.core.hints import catalog, sentence

BINS = 5  # bars of a stage's score histogram
SHOWN = 10  # rows of the "most" tables
STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:1rem;color:#1d1d1f}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
.plots{display:flex;flex-wrap:wrap;gap:1rem}figure{margin:0;flex:1 1 200px;max-width:260px}
figcaption{font-size:.85rem}svg{width:100%;height:auto}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #eee;padding:.3rem .4rem;text-align:left;
vertical-align:top}.count{text-align:right;width:4rem}.who{font-size:.85rem;word-break:break-word}
.scroll{overflow-x:auto}
"""


def class_page(summary: ClassSummary, title: str, similarity_page: bool = False) -> str:
    """The page; ``title``: what it is of (the course's title, else the class folder's name);
    ``similarity_page``: similarity.html lies beside it, to link to."""
    graded = len(summary.graded)
    average = sum(summary.finals) / len(summary.finals) if summary.finals else 0
    in_class = set(summary.students)

    def link(student: str) -> str:  # their id and name, a link to the feedback they read
        return _student(student, summary.names)

    def student(name: str) -> str:  # a link where the batch wrote that student feedback, else the name alone
        return link(name) if name in in_class else _text(name)

    parts = [
        f"<h1>{_text(title)}: the class at a glance</h1>",
        f"<p>{len(summary.students)} students in grades.csv, {graded} graded; final grades: mean "
        f"{average:.1f}. Each student links to the feedback they read.</p>",
        "<h2>Final grades and scores per stage</h2><div class='plots'>",
        _final_histogram(summary) if summary.finals else "",
        *(_histogram(stage, summary) for stage in sorted(summary.stage_scores, key=_stage_number)),
        "</div>",
        _most("Checks failed most", "check", summary.failed_checks, summary.failed_by, _text, link),
        _most("Hints shown most", "hint", summary.hints, summary.hinted, _hint, link),
        _table(
            "Late, slip days and extensions",
            ["student", "penalty, slip days, extension"],
            [(link(s), _text(w)) for s, w in summary.late],
        ),
        _table("Missing or not graded", ["student", "why"], [(link(s), _text(w)) for s, w in summary.missing]),
        _table(
            "Overrides",
            ["student", "override", "reason", "to review"],
            [(link(s), _text(o), _text(r), _text(review or "no")) for s, o, r, review in summary.overrides],
        ),
    ]
    if summary.similar:
        rows = [
            (student(r["student_a"]), student(r["student_b"]), _text(r["file"]), _text(_share(r)), r["tokens_overlap"])
            for r in summary.similar
        ]
        parts.append(
            _table("Similar pairs (similarity.csv)", ["student a", "student b", "file", "share", "tokens"], rows)
        )
    if similarity_page:
        parts.append(f"<p><a href='{SIMILARITY_PAGE}'>The shared code, highlighted ({SIMILARITY_PAGE})</a></p>")
    body = "".join(parts)
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{_text(title)}: class report</title><style>{STYLE}</style></head><body>{body}</body></html>\n"
    )


def _final_histogram(summary: ClassSummary) -> str:
    """The final grades (grades.csv's final: the grade of record), with their median and quartiles."""
    finals = sorted(summary.finals)
    q1, median, q3 = (_quantile(finals, q) for q in (0.25, 0.5, 0.75))
    # extra credit (bonus stages on top of the core's maximum) can take a final past it: the bars reach the highest
    top = max(summary.final_max, finals[-1]) or 1
    beyond = f", extra credit up to {finals[-1]:.1f}" if finals[-1] > summary.final_max else ""
    caption = (
        f"final grade: median {median:.1f} of {summary.final_max:g}{beyond} (quartiles {q1:.1f} to {q3:.1f}), "
        f"mean {sum(finals) / len(finals):.1f}"
    )
    return _bars(finals, top, caption)


def _quantile(ordered: list[float], q: float) -> float:
    """The ``q`` quantile of ``ordered`` (sorted), interpolated between its two nearest values."""
    at = q * (len(ordered) - 1)
    below = int(at)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (at - below)


def _histogram(stage: str, summary: ClassSummary) -> str:
    """A stage's scores in BINS bars from 0 to its points possible, as an inline SVG with its counts."""
    scores, top = summary.stage_scores[stage], summary.stage_max.get(stage) or 1
    mean = sum(scores) / len(scores) if scores else 0
    return _bars(scores, top, f"{stage} · {summary.stage_titles.get(stage, '')}: mean {mean:.1f} of {top:g}")


def _bars(scores: list[float], top: float, caption_words: str) -> str:
    """``scores`` in BINS bars from 0 to ``top``, as an inline SVG with its counts; each bar is labelled with
    where it starts (a short number: labels never run into one another)."""
    counts = Counter(min(BINS - 1, int(score / top * BINS)) for score in scores)
    tallest = max(counts.values(), default=1)
    width, height, bar = 200, 120, 200 / BINS
    bars = "".join(
        f"<rect x='{i * bar + 2:.0f}' y='{height - 20 - 80 * counts[i] / tallest:.0f}' width='{bar - 4:.0f}' "
        f"height='{80 * counts[i] / tallest:.0f}' fill='#4a6fa5'><title>{counts[i]} students</title></rect>"
        f"<text x='{i * bar + bar / 2:.0f}' y='{height - 5}' font-size='10' text-anchor='middle'>"
        f"{'≥' if i else ''}{top * i / BINS:.3g}</text>"
        f"<text x='{i * bar + bar / 2:.0f}' y='{height - 24 - 80 * counts[i] / tallest:.0f}' font-size='10' "
        f"text-anchor='middle'>{counts[i] or ''}</text>"
        for i in range(BINS)
    )
    caption = _text(caption_words)
    return (
        f"<figure><svg viewBox='0 0 {width} {height}' role='img' aria-label='{caption}'>{bars}</svg>"
        f"<figcaption>{caption}</figcaption></figure>"
    )


def _most(title: str, what: str, counts: Counter, who: dict[str, list[str]], shown, link) -> str:
    rows = [(shown(key), str(count), ", ".join(map(link, who[key]))) for key, count in counts.most_common(SHOWN)]
    return _table(title, [what, "students", "who"], rows, classes=("", "count", "who"))


def _table(title: str, header: list[str], rows: list[tuple], classes: tuple = ()) -> str:
    if not rows:
        return f"<h2>{_text(title)}</h2><p>None.</p>"
    head = "".join(f"<th>{_text(cell)}</th>" for cell in header)
    lines = "".join(
        "<tr>"
        + "".join(f"<td class='{classes[i] if i < len(classes) else ''}'>{cell}</td>" for i, cell in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return f"<h2>{_text(title)}</h2><div class='scroll'><table><tr>{head}</tr>{lines}</table></div>"


def _student(student: str, names: dict[str, str]) -> str:
    """A link to the feedback ``student`` reads, OUT/students/<id>.txt, from this page, with their name where known."""
    shown = with_name(student, names.get(file_id(student)))
    return f"<a href='{html.escape(STUDENTS + '/' + quote(file_id(student) + '.txt'))}'>{_text(shown)}</a>"


def _hint(hint: str) -> str:
    said = sentence(hint, 0) if hint in catalog() else ""
    return f"<b>{_text(hint)}</b>: {_text(said)}"


def _share(row: dict[str, str]) -> str:
    return f"{max(float(row['similarity_a']), float(row['similarity_b'])):.2f}"


def _stage_number(stage: str) -> int:
    return int(stage.removeprefix("stage"))


def _text(value: object) -> str:
    return html.escape(str(value), quote=True)
