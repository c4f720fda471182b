"""What a learner reads: evidence as heat maps, what their code printed, one message per cause, plain words;
in the terminal, the HTML page, Gradescope and GitHub Classroom alike, every learner text escaped."""

import html.parser
import json
import math
import subprocess
import sys
import unicodedata

import jsonschema
import pytest
import torch

from grader.core.options import GradingOptions
from grader.core.points import points_in_use
from grader.core.report import Report, build, from_json
from grader.judge.evidence import MAX_SIDE, bounded_evidence
from grader.judge.plugin import GradingPlugin, run_checks
from grader.judge.verdict import attention_evidence
from grader.sandbox.printed import PrintedOutput
from grader.views.html import render_html
from grader.views.terminal import render_text
from tests.conftest import REPO
from tests.grading import MUTANTS, grade, learner_copy

SCHEMA = json.loads((REPO / "grader" / "core" / "schemas" / "report.schema.json").read_text())
HOSTILE = "\x1b[2J\u202e<script>alert(1)</script>"
HOSTILE_SHOWN = "\\x1b[2J\\u202e<script>alert(1)</script>"
# Checks that fail the way real ones do: the first prints, the second carries evidence, the third prints
# past what a worker sends and runs out of time.
FAKE_CHECKS = """
import torch
from grader.sandbox.workers import LearnerFailure
from grader.judge.plugin import learner  # noqa: F401 - the fixture
from grader.judge.verdict import CheckFailed, attention_evidence
from grader.judge.checks.support import check


@check("document.attention_scores", visible=True)
def test_fake_that_prints(learner):
    learner.printed.add(["printed during the check", ""])
    raise CheckFailed("the scores differ")


@check("document.softmax_naive", visible=True)
def test_fake_with_evidence(learner):
    expected = torch.tensor([[1.0, 0.0], [0.5, 0.5]])
    raise CheckFailed("the weights differ", "softmax-wrong-dim",
                      attention_evidence("weights of 2 tokens", expected, expected.flip(1), "row 0 attends to token 1"))


@check("document.context_vector", visible=True)
def test_fake_that_prints_a_lot_and_hangs(learner):
    learner.printed.add(["again", "again", ""], cut=True)
    raise LearnerFailure("timeout", "your code gave no answer within 1 s")
"""


class FakeLearner:
    """What the plugin asks of LearnerWorkers while a check runs that calls no learner code."""

    def __init__(self):
        self.printed = PrintedOutput()


def raw_characters(text: str) -> list[str]:
    return [c for c in text if c != "\n" and unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")]


def a_report(checks: list[dict], flags: list[str] = ()) -> Report:
    return from_json(
        {
            "score": 0,
            "max_score": sum(c["max_score"] for c in checks),
            "device": "cpu",
            "torch": "2.13.0",
            "sandbox": "bubblewrap",
            "flags": list(flags),
            "complete": True,
            "stages": [
                {
                    "id": "stage4",
                    "title": "CausalAttention: mask and dropout",
                    "track": "core",
                    "score": 0,
                    "max_score": sum(c["max_score"] for c in checks),
                    "checks": checks,
                }
            ],
        }
    )


def a_check(
    id: str = "property.causal",
    evidence: dict | None = None,
    printed: str = "",
    message: str = "it differs",
    hint: str | None = None,
    status: str = "failed",
) -> dict:
    return {
        "id": id,
        "visibility": "hidden",
        "status": status,
        "score": 0,
        "max_score": 2,
        "message": message,
        "hint": hint,
        "evidence": evidence,
        "printed": printed,
    }


def causal_evidence(tokens: int = 4, note: str = "row 0 attends to later tokens") -> dict:
    expected = torch.softmax(
        torch.ones(tokens, tokens).masked_fill(torch.ones(tokens, tokens).triu(1).bool(), -math.inf), dim=-1
    )
    return bounded_evidence(
        attention_evidence(f"weights of {tokens} tokens", expected, torch.full((tokens, tokens), 1 / tokens), note)
    )


class Tags(html.parser.HTMLParser):
    """The start tags of a page and the attributes they carry."""

    def __init__(self, page: str):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


# Evidence ---------------------------------------------------------------------------------


def test_evidence_travels_from_a_failed_check_to_the_json_report(tmp_path):
    (tmp_path / "test_stage1.py").write_text(FAKE_CHECKS)
    plugin = GradingPlugin(FakeLearner(), "cpu", GradingOptions((1,), points_in_use()))
    exit_code, output = run_checks(plugin, str(tmp_path), "-k", "fake_")
    assert exit_code == pytest.ExitCode.TESTS_FAILED, output
    report = build(plugin.results, [1], "cpu", torch.__version__, [], "bubblewrap")
    jsonschema.validate(report, SCHEMA)
    printing, with_evidence, hanging = report["stages"][0]["checks"]
    assert printing["printed"] == "printed during the check" and printing["evidence"] is None
    assert with_evidence["printed"] == ""  # each check starts with nothing printed
    assert hanging["status"] == "timeout" and hanging["printed"] == "again\nagain\n… and more"
    assert hanging["message"].endswith(
        "your code printed a lot while it ran: printing takes time, so print less "
        "(not inside loops) and it may finish in time"
    )
    assert "printed a lot" not in printing["message"]
    assert with_evidence["evidence"] == {
        "title": "weights of 2 tokens",
        "expected": [[1.0, 0.0], [0.5, 0.5]],
        "actual": [[0.0, 1.0], [0.5, 0.5]],
        "shape": [2, 2],
        "note": "row 0 attends to token 1",
    }
    assert "weights of 2 tokens" in render_text(report, "work", color=False)
    assert render_html(report, "work", tmp_path / "report.html").count("<table class='heat'>") == 3


def test_evidence_is_cut_to_sixteen_by_sixteen_and_keeps_its_shape():
    big = torch.rand(40, 20)
    big[0, 0] = math.nan
    evidence = bounded_evidence(attention_evidence("big", big, big, ""))
    assert evidence["shape"] == [40, 20]
    assert len(evidence["expected"]) == len(evidence["actual"]) == MAX_SIDE
    assert {len(row) for row in evidence["expected"]} == {MAX_SIDE} and evidence["expected"][0][0] is None
    jsonschema.validate(a_report([a_check(evidence=evidence)]), SCHEMA)


def test_evidence_that_is_not_two_maps_of_one_shape_is_refused():
    for expected, actual in [([[1.0, 0.0]], [[1.0], [0.0]]), ([], []), ([[1.0, "x"]], [[1.0, 0.0]])]:
        with pytest.raises(ValueError):
            bounded_evidence({"title": "t", "expected": expected, "actual": actual, "note": ""})


# Terminal ---------------------------------------------------------------------------------


def test_the_terminal_shows_both_maps_side_by_side_in_shades_without_colour():
    text = render_text(a_report([a_check(evidence=causal_evidence())]), "work", color=False)
    lines = text.split("\n")
    top = lines.index("    weights of 4 tokens")
    assert lines[top + 1].split() == ["expected", "yours"]
    assert lines[top + 2].split() == ["0", "1", "2", "3"] * 2
    # Row 0: all of the weight on token 0 (█ then blanks), against a quarter on each (░ everywhere).
    assert lines[top + 3] == "    " + " 0 ██".ljust(3 + 2 * 4) + "    " + " 0 ░░░░░░░░"
    assert lines[top + 7].startswith("    shades: blank 0, ░ up to 0.25")
    assert lines[top + 8] == "    row 0 attends to later tokens"
    assert "\033[" not in text


def test_values_above_the_expected_ones_are_marked_so_the_expected_map_keeps_its_shades():
    # rows that were never renormalised: a learner's value of 8 must not flatten the expected map
    expected = torch.tensor([[1.0, 0.0], [0.5, 0.5]])
    evidence = bounded_evidence(attention_evidence("weights of 2 tokens", expected, expected * 16, ""))
    text = render_text(a_report([a_check(evidence=evidence)]), "work", color=False)
    lines = text.split("\n")
    top = lines.index("    weights of 2 tokens")
    assert lines[top + 3] == "    " + " 0 ██".ljust(3 + 2 * 2) + "    " + " 0 ++"
    assert "++ above 1" in lines[top + 5]


def test_a_map_larger_than_eight_by_eight_shows_its_top_left_and_says_so():
    evidence = causal_evidence(tokens=12)
    text = render_text(a_report([a_check(evidence=evidence)]), "work", color=False)
    assert "weights of 12 tokens (the top-left 8×8 of 12×12)" in text
    assert "     7 " in text and "     8 " not in text


def test_cells_that_are_not_numbers_or_below_zero_are_marked():
    evidence = causal_evidence()
    evidence["actual"][1][1], evidence["actual"][2][2] = None, -0.5
    text = render_text(a_report([a_check(evidence=evidence)]), "work", color=False)
    assert "??" in text and "--" in text and "-- below 0, ?? not a number" in text


def test_flags_read_as_plain_words():
    text = render_text(a_report([a_check()], flags=["provisional", "ignored: notes.md"]), "work", color=False)
    assert "flags:" not in text
    assert "When your instructor grades, hidden checks add the same functions on other inputs" in text
    assert "ignored: notes.md (only the five stage files are graded)" in text


# HTML -------------------------------------------------------------------------------------


def test_the_html_page_holds_three_maps_a_legend_and_needs_nothing_else(tmp_path):
    page = render_html(
        a_report([a_check(evidence=causal_evidence(), hint="mask-not-causal")]), "work", tmp_path / "report.html"
    )
    tags = Tags(page).tags
    assert [a["class"] for t, a in tags if t == "table" and a.get("class") == "heat"] == ["heat"] * 3
    titles = [a["title"] for t, a in tags if t == "td" and "title" in a]
    assert "row 0, column 0: 1.0000" in titles and "row 0, column 1: 0.2500" in titles
    assert "difference (yours − expected)" in page and "weights: 0" in page and "linear-gradient" in page
    assert not [t for t, a in tags if t in ("script", "link", "img", "iframe", "object")]
    assert not [a for t, a in tags if {"src", "onload", "onclick"} & a.keys()]
    assert "url(" not in page and "@import" not in page


def test_the_html_page_links_the_hint_to_its_paragraph_in_the_docs(tmp_path):
    page = render_html(a_report([a_check(hint="mask-not-causal")]), "work", REPO / "grade-report.html")
    links = [a["href"] for t, a in Tags(page).tags if t == "a"]
    assert links == ["docs/stage4.md#mask-not-causal"]
    assert (REPO / links[0].partition("#")[0]).is_file()


def test_learner_text_reaches_the_html_page_escaped(tmp_path):
    evidence = causal_evidence(note=HOSTILE)
    check = a_check(evidence=evidence, printed=HOSTILE, message=f"your code raised RuntimeError: {HOSTILE}")
    page = render_html(a_report([check]), HOSTILE, tmp_path / "report.html")
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert not raw_characters(page) and "\\x1b[2J\\u202e" in page


# The whole way: a stage file that prints and cannot be imported ------------------------------


@pytest.fixture(scope="module")
def broken_import(tmp_path_factory):
    """Stage 1 prints control characters and markup, then 10 MB, then raises at import."""
    folder = tmp_path_factory.mktemp("broken")
    submission = learner_copy(folder / "submission", stages=[1])
    stage1 = submission / "stage1_softmax.py"
    stage1.write_text(
        f"print({HOSTILE!r})\nfor i in range(100_000):\n    print(i, 'x' * 100)\n"
        f"raise RuntimeError('boom at import')\n{stage1.read_text()}"
    )
    outputs = {name: folder / name for name in ("report.json", "report.html", "results.json", "classroom.json")}
    options = [
        f"--{option}={outputs[name]}"
        for option, name in (
            ("json", "report.json"),
            ("html", "report.html"),
            ("gradescope", "results.json"),
            ("classroom", "classroom.json"),
        )
    ]
    result = subprocess.run(
        [sys.executable, "-m", "grader", str(submission), "--stage", "1", *options],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result, {name: path.read_text(encoding="utf-8") for name, path in outputs.items()}


def test_an_import_error_keeps_every_checks_status_and_score(broken_import):
    _, outputs = broken_import
    report = json.loads(outputs["report.json"])
    jsonschema.validate(report, SCHEMA)
    checks = report["stages"][0]["checks"]
    assert report["score"] == 0 and {c["hint"] for c in checks} == {"import-error"}
    assert all("boom at import" in c["message"] for c in checks)


def test_an_import_error_is_shown_once_per_stage(broken_import):
    """One cause: every check of the stage under it (its notes too, marked failed like the rest), the error once."""
    result, outputs = broken_import
    checks = [c["id"] for c in json.loads(outputs["report.json"])["stages"][0]["checks"]]
    for text in (result.stdout, outputs["report.html"]):
        assert text.count("boom at import") == 1
        assert f"stage 1 · {len(checks)} checks failed for one reason" in text
    assert "the same problem as" not in outputs["report.html"]
    assert all(f"<p class='same-cause'>{c}" in outputs["report.html"] for c in checks[1:] if c.startswith("document"))
    row = next(line for line in result.stdout.splitlines() if line.startswith("stage 1 "))
    assert row.rstrip().endswith("✗" * len(checks)) and "i" not in row.split()[-1]
    listed = result.stdout.split("What to fix", 1)[1].split("hint [import-error]")[0]
    assert [c for c in checks if f"· {c}" in listed] == checks
    for platform, field in (("results.json", "output"), ("classroom.json", "message")):
        messages = [test[field] for test in json.loads(outputs[platform])["tests"]]
        assert sum("boom at import" in m for m in messages) == 1, platform


def test_what_the_file_printed_shows_ten_lines_escaped_everywhere(broken_import):
    result, outputs = broken_import
    printed = json.loads(outputs["report.json"])["stages"][0]["checks"][0]["printed"].split("\n")
    assert printed[0] == HOSTILE_SHOWN and printed[1].startswith("0 xxx")
    assert len(printed) == 11 and printed[-1] == "… 99991 more lines"
    assert result.stdout.count("Your code printed:") == 1 and f"| {HOSTILE_SHOWN}" in result.stdout
    assert "&lt;script&gt;" in outputs["report.html"] and "<script" not in outputs["report.html"]
    assert "Your code printed:\\n" + json.dumps(HOSTILE_SHOWN)[1:-1] in outputs["results.json"]
    for text in (result.stdout, *outputs.values()):
        assert not raw_characters(text)


def test_the_html_page_is_named_last(broken_import):
    result, outputs = broken_import
    assert result.stdout.rstrip("\n").split("\n")[-1].startswith("Heat maps and details: ")
    assert outputs["report.html"].startswith("<!doctype html>")


# A student's view -------------------------------------------------------------------------


def test_a_students_view_shows_a_hidden_checks_verdict_and_hint_never_its_data():
    secret = "SelfAttention_v1(2, 7) on 5 token(s): expected 0.639988"
    with_hint = a_check(
        "random.SelfAttention_v1",
        evidence=causal_evidence(),
        printed="tokens 0.123456",
        message=secret,
        hint="missing-scaling",
    )
    without_hint = a_check("property.attention_rows", message=secret)
    report = a_report([with_hint, without_hint])
    text = render_text(report, "work", color=False, student_facing=True)
    assert secret not in text and "0.123456" not in text and "weights of 4 tokens" not in text
    assert "stage 4 · random.SelfAttention_v1 (hidden check): 0/2" in text and "hint [missing-scaling]" in text
    assert "failed: the hidden check's inputs are not shown; see the visible checks and the stage's guide" in text
    page = render_html(report, "work", REPO / "grade-report.html", student_facing=True)
    assert secret not in page and "<table class='heat'>" not in page and "hint [missing-scaling]" in page
    full = render_text(report, "work", color=False)  # the instructor's own view keeps everything
    assert secret in full and "0.123456" in full and "weights of 4 tokens" in full


def test_no_view_points_a_student_at_a_hidden_check_for_a_stage_wide_cause():
    cause = "your file could not be imported: RuntimeError: boom (stage4_causal_attention.py:3)"
    hidden = a_check("random.CausalAttention", message=cause, hint="import-error")
    visible = {**a_check("document.CausalAttention", message=cause, hint="import-error"), "visibility": "visible"}
    report = a_report([hidden, visible])
    for student_facing in (False, True):
        text = render_text(report, "work", color=False, student_facing=student_facing)
        assert text.count(cause) == 1 and "stage 4 · 2 checks failed for one reason" in text
        assert text.index("· document.CausalAttention") < text.index(cause) < text.index("· random.CausalAttention")


def test_full_marks_on_the_chapter_point_the_next_step_at_the_first_bonus_stage(tmp_path):
    from tests.grading import grade

    _, chapter = grade(learner_copy(tmp_path / "whole"))
    step = render_text(from_json(chapter), "whole", color=False).split("Next step\n", 1)[1]
    assert "open whole/stage6_sdpa.py" in step and "make grade STAGE=6" in step and "docs/stage6.md" in step
    _, one_stage = grade(learner_copy(tmp_path / "one", stages=[1]), "--stage", "1")
    assert "Next step" not in render_text(from_json(one_stage), "one", color=False)  # 2-5 come first


def test_a_bonus_stub_is_not_the_next_step_while_a_chapter_stage_loses_points():
    def stage(number: int, track: str, checks: list[dict]) -> dict:
        worth = sum(c["max_score"] for c in checks)
        return {
            "id": f"stage{number}",
            "title": "",
            "track": track,
            "score": sum(c["score"] for c in checks),
            "max_score": worth,
            "checks": checks,
        }

    stub = a_check("document.scaled_dot_product_attention", message="not implemented yet", status="not_implemented")
    losing = a_check("random.SelfAttention_v2")
    for core_score, expected in (
        (0, "stage 3 still loses points in 1 check(s), random.SelfAttention_v2 first"),
        (2, "not implemented yet"),
    ):
        report = a_report([])
        report["stages"] = [stage(3, "core", [{**losing, "score": core_score}]), stage(6, "bonus", [stub])]
        step = render_text(report, "work", color=False).split("Next step\n", 1)[1]
        assert expected in step and (f"stage{3 if core_score == 0 else 6}_" in step)


def test_the_gradescope_summary_counts_bonus_points_apart_from_the_chapters():
    from grader.views.platforms import to_gradescope

    def stage(number: int, track: str, visible: float, hidden: float) -> dict:
        checks = [{**a_check(f"document.f{number}"), "visibility": "visible", "score": visible, "max_score": visible}]
        checks.append({**a_check(f"random.f{number}"), "max_score": hidden})
        return {
            "id": f"stage{number}",
            "title": "",
            "track": track,
            "score": visible,
            "max_score": visible + hidden,
            "checks": checks,
        }

    report = a_report([])
    report["stages"] = [stage(1, "core", 8, 12), stage(2, "core", 9, 11), stage(6, "bonus", 4, 6)]
    summary = to_gradescope(report)["output"]
    assert summary.startswith("Visible checks: 17/17 on cpu. The hidden checks (23 of the 40 points) count once")
    assert "Bonus stages: visible checks 4/4; their hidden checks hold 6 points more." in summary


def test_checks_that_fail_for_one_proven_cause_are_said_once_with_their_checks_listed(tmp_path):
    """Missing scaling in stage 2: every result check of both classes fails with the one hint, which the
    terminal and the page each say once, with one heat map, and the failed checks listed under it."""
    unscaled = next(m for m in MUTANTS if m.get("hint") == "missing-scaling" and m["stage"] == 2)
    result, report = grade(
        learner_copy(tmp_path / "work", unscaled, stages=[2]), "--stage", "2", "--html", str(tmp_path / "r.html")
    )
    failed = [c["id"] for c in report["stages"][0]["checks"] if c["hint"] == "missing-scaling"]
    assert len(failed) >= 3
    text, page = result.stdout, (tmp_path / "r.html").read_text()
    assert f"stage 2 · {len(failed)} checks failed for one reason:" in text
    assert text.count("hint [missing-scaling]") == 1 and text.count("expected         yours") == 1
    assert all(f"  · {check}" in text for check in failed)
    assert page.count("<b>hint [missing-scaling]</b>") == 1
    assert page.count(f"{len(failed)} checks failed for one reason") == 1
