"""make class-report: the class at a glance, from what a batch wrote, opened in a real browser (Debian's
chromium, driven by selenium): it logs no error, fits a laptop and a phone, every link resolves to a
student's feedback, and what it counts is what the class's reports hold."""

import os
import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from grader.classroom.class_summary import summarise
from grader.cli import class_report
from tests.grading import MUTANTS, REPO, batch, learner_copy
from tests.test_html_in_browser import CHROMEDRIVER, CHROMIUM, WIDTHS, browser, opened  # noqa: F401 - a fixture

HTML_NAME = "x<i>y"  # an LMS name a student chose: text on the page, never markup
COURSE_TITLE = "Attention, spring 2026"  # course.toml's [course] title heads the page


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("class-report")
    submissions, out = root / "class", root / "out"
    for name in ("ada", "bo", "ed"):
        learner_copy(submissions / name)
    for name in ("cy", "di"):  # the same mistake
        learner_copy(submissions / name, next(m for m in MUTANTS if m.get("hint") == "missing-scaling"))
    learner_copy(submissions / HTML_NAME, stages=[1])  # stages 2-5 missing
    stub = learner_copy(submissions / "fay")  # stage 3 handed in as the stub: missing too
    shutil.copy(REPO / "exercises" / "stage3_weight_transfer.py", stub / "stage3_weight_transfer.py")
    course = root / "course.toml"
    course.write_text(
        f'[course]\ntitle = "{COURSE_TITLE}"\n\n[due]\nassignment = 2025-03-14T23:59:00Z\n\n[late_penalty]\npenalty = 10\n'
    )
    times = root / "times.csv"
    times.write_text("student_id,submitted\nbo,2025-03-16T10:00:00Z\n")  # two days late
    batch(submissions, out, "--course", str(course), "--times", str(times), "--workers", "2")
    (out / "overrides.csv").write_text("student_id,stage,points,reason\nada,total,99,a mark for the write-up\n")
    batch(submissions, out, "--course", str(course), "--times", str(times))
    (out / "similarity.csv").write_text(
        "student_a,student_b,file,similarity_a,similarity_b,tokens_overlap\n"
        "cy,di,stage2_self_attention.py,0.97,0.95,212\n"
        "bo,prior 1: p_amy,stage4_causal_attention.py,0.91,0.90,150\n"  # last term's: no feedback file here
    )
    (out / "similarity.html").write_text("<!doctype html><title>similarity</title>")  # what make similarity writes
    assert class_report.main([str(out), "--course", str(course)]) == 0
    return out


def test_the_summary_counts_what_the_reports_hold(graded_class):
    summary = summarise(graded_class)
    assert sorted(summary.students) == sorted(["ada", "bo", "cy", "di", "ed", "fay", HTML_NAME])
    assert summary.hints["missing-scaling"] == 2 and sorted(summary.hinted["missing-scaling"]) == ["cy", "di"]
    assert [student for student, _ in summary.late] == ["bo"]
    assert sorted(student for student, _ in summary.missing) == sorted(["fay", HTML_NAME])
    assert dict(summary.missing)["fay"] == "left as the stub: stage3" and HTML_NAME in dict(summary.missing)
    assert "stub" not in dict(summary.missing)[HTML_NAME]  # never handed in: missing, not left as the stub
    assert summary.overrides == [("ada", "total 99 (automatic 100)", "total: a mark for the write-up", "")]
    assert summary.final_max == 100 and sorted(summary.finals)[-1] == 100
    assert len(summary.stage_scores["stage1"]) == 7 and summary.stage_max["stage1"] == 20
    most, count = summary.failed_checks.most_common(1)[0]
    assert count >= 2 and most.startswith("stage2")


def test_the_page_is_one_file_that_fetches_nothing_and_escapes_names(graded_class):
    page = (graded_class / "class-report.html").read_text()
    assert "<script" not in page and "http://" not in page and "https://" not in page
    assert "x&lt;i&gt;y" in page and "<i>y" not in page
    assert page.count("<svg") == 6  # the final grades, and a histogram per graded stage
    assert "final grade: median" in page and "quartiles" in page
    assert "prior 1: p_amy" in page and "p_amy.txt" not in page  # a name with no feedback here links nowhere
    assert f"<h1>{COURSE_TITLE}: the class at a glance</h1>" in page
    assert "href='similarity.html'" in page


@pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason="Debian's chromium and chromium-driver are not installed")
@pytest.mark.parametrize("device", sorted(WIDTHS))
def test_the_page_opens_without_errors_fits_and_every_link_resolves(graded_class, browser, device, tmp_path):  # noqa: F811
    page = graded_class / "class-report.html"
    view = opened(browser, page, *WIDTHS[device])
    assert view.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
    assert [entry for entry in view.get_log("browser") if entry["level"] == "SEVERE"] == []
    links = view.execute_script("return [...document.querySelectorAll('a')].map(a => a.href)")
    assert links and all(Path(unquote(urlparse(link).path)).is_file() for link in links), links
    assert "x<i>y" in view.execute_script("return document.body.innerText")  # shown as the text it is
    shots = Path(os.environ.get("SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    assert view.save_screenshot(str(shots / f"class-report-{device}.png"))


def test_the_final_histogram_reaches_the_extra_credit_it_holds():
    from grader.classroom.class_page import _final_histogram
    from grader.classroom.class_summary import ClassSummary

    summary = ClassSummary([], final_max=100, finals=[40.0, 100.0, 130.0, 160.0])
    page = _final_histogram(summary)
    assert "of 100, extra credit up to 160.0" in page
    assert "≥128" in page  # the bars run to the highest final, not to 100 with everything above piled in the last
    plain = _final_histogram(ClassSummary([], final_max=100, finals=[40.0, 100.0]))
    assert "extra credit" not in plain and "median 70.0 of 100 (quartiles 55.0 to 85.0)" in plain
