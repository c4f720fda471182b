"""The HTML report as a learner opens it: Debian's chromium, driven by selenium (no downloaded browser).

One submission with a mistake in four stages and the book's stage 3 (its notes), graded with --html, is
opened at a laptop's width and a phone's. Screenshots are kept (in $SCREENSHOTS when set, else in pytest's
temporary folder); the page must log no error, overflow neither width, carry every cause's evidence, fold
what passed, and keep colour for verdicts.
"""

import copy
import os
import re
import shutil
from pathlib import Path

import pytest

from grader.core.report import from_json
from grader.core.stages import STAGE_MODULES
from grader.views.feedback import causes_to_fix
from tests.conftest import REPO
from tests.grading import MUTANTS, grade, learner_copy

webdriver = pytest.importorskip("selenium.webdriver")
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER), reason="Debian's chromium and chromium-driver are not installed"
)
WIDTHS = {"laptop": (1200, 900), "phone": (390, 844)}
MISTAKES = {  # stage -> the mutant written into it
    1: lambda m: m.get("hint") == "softmax-wrong-dim",
    2: lambda m: m.get("hint") == "missing-scaling" and m["stage"] == 2,
    4: lambda m: "tril(..., diagonal=1)" in m.get("what", ""),  # NaN rows: every key of the last queries hidden
    5: lambda m: m.get("hint") == "heads-split-wrong",
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("browser")
    folder = learner_copy(root / "work")
    for stage, chosen in MISTAKES.items():
        one = learner_copy(root / f"stage{stage}", next(m for m in MUTANTS if chosen(m)), stages=[stage])
        shutil.copy(one / f"{STAGE_MODULES[stage]}.py", folder / f"{STAGE_MODULES[stage]}.py")
    shutil.copy(REPO / "tests" / "book" / f"{STAGE_MODULES[3]}.py", folder)
    page = root / "report.html"
    _, report = grade(folder, "--html", str(page))
    return page, report


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"):  # fmt: skip
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=webdriver.ChromeService(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def opened(browser, page: Path, width: int, height: int):
    browser.set_window_size(width, height)
    browser.get(page.as_uri())
    return browser


@pytest.mark.parametrize("device", sorted(WIDTHS))
def test_the_page_fits_the_width_logs_no_error_and_is_photographed(graded, browser, device, tmp_path):
    page, _ = graded
    view = opened(browser, page, *WIDTHS[device])
    assert view.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
    # nothing sticks out of the page but what scrolls in its own box (a wide heat map on a phone)
    sticking_out = view.execute_script(
        "return [...document.body.querySelectorAll('*')].filter(e => e.getBoundingClientRect().right > "
        "window.innerWidth + 1 && !e.closest('.scroll, figure')).map(e => e.tagName + '.' + e.className)"
    )
    assert sticking_out == []
    # nor any text clipped in its own box (a long check id in a narrow column), with every fold open
    view.execute_script("document.querySelectorAll('details').forEach(fold => fold.open = true)")
    clipped = view.execute_script(
        "return [...document.body.querySelectorAll('*')].filter(e => e.clientWidth > 0 && e.scrollWidth > "
        "e.clientWidth + 1 && !e.closest('.scroll, figure')).map(e => e.tagName + ': ' + e.textContent.slice(0, 60))"
    )
    assert clipped == []
    shots = Path(os.environ.get("SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    view.set_window_size(WIDTHS[device][0], view.execute_script("return document.body.scrollHeight") + 100)
    assert view.save_screenshot(str(shots / f"report-{device}.png"))
    assert (shots / f"report-{device}.png").stat().st_size > 10_000
    assert [entry for entry in view.get_log("browser") if entry["level"] == "SEVERE"] == []


def test_each_cause_is_one_card_with_its_hint_once_and_all_its_heat_maps(graded, browser):
    page, report = graded
    view = opened(browser, page, *WIDTHS["laptop"])
    causes = causes_to_fix(from_json(copy.deepcopy(report)))
    cards = view.find_elements("css selector", "section.cause:not(.note)")
    assert len(cards) == len(causes) >= 5
    for card, cause in zip(cards, causes):
        assert len(card.find_elements("css selector", "table.heat")) == 3 * len(cause.evidences)
        assert len(re.findall(r"hint \[", card.text)) == (1 if cause.hint else 0)
    assert any(len(cause.checks) > 1 for cause in causes)
    # the NaN rows of the tril mask are marked, not left out
    assert view.find_elements("css selector", "table.heat th.nan-row")


def test_what_passed_and_a_causes_further_checks_are_folded(graded, browser):
    page, _ = graded
    view = opened(browser, page, *WIDTHS["laptop"])
    passed = view.find_elements("css selector", "ul.passed-checks li")
    assert passed and not any(item.is_displayed() for item in passed)
    folds = view.find_elements("css selector", "section.cause details")
    assert folds and folds[0].get_attribute("open") is not None
    folded = [fold for fold in folds if fold.get_attribute("open") is None]
    assert folded and not folded[0].find_element("css selector", "pre").is_displayed()
    folded[0].find_element("tag name", "summary").click()
    assert folded[0].find_element("css selector", "pre").is_displayed()


def test_text_is_neutral_and_colour_marks_verdicts_only(graded, browser):
    page, _ = graded
    view = opened(browser, page, *WIDTHS["laptop"])

    def rgb(element) -> tuple[int, ...]:
        return tuple(int(v) for v in re.findall(r"\d+", element.value_of_css_property("color"))[:3])

    for selector in ("section.cause pre", "section.cause h3", "section.cause p", "section.cause summary", "h2"):
        for element in view.find_elements("css selector", selector)[:5]:
            red, green, blue = rgb(element)
            assert max(red, green, blue) < 0x70 and max(red, green, blue) - min(red, green, blue) < 0x20, selector
    failed = view.find_elements("css selector", ".verdict.failed")
    assert failed and all(rgb(v)[0] > 0xA0 > rgb(v)[1] for v in failed)


def test_the_notes_stand_apart_after_what_to_fix(graded, browser):
    page, _ = graded
    view = opened(browser, page, *WIDTHS["laptop"])
    headings = [h.text for h in view.find_elements("tag name", "h2")]
    assert headings.index("What to fix") < next(i for i, h in enumerate(headings) if h.startswith("Notes"))
    notes = view.find_elements("css selector", "section.cause.note")
    assert notes and all("note." in note.text for note in notes)
    assert not any(
        "note." in card.text.split("\n")[0] for card in view.find_elements("css selector", "section.cause:not(.note)")
    )


def test_the_page_works_offline_and_its_links_resolve(graded, browser):
    page, _ = graded
    text = page.read_text()
    assert not re.search(r"""(src|href)=['"]?(https?:)?//""", text)
    view = opened(browser, page, *WIDTHS["laptop"])
    links = [a.get_attribute("href") for a in view.find_elements("tag name", "a")]
    assert links
    for link in links:
        assert link.startswith("file://"), link
        assert Path(link.removeprefix("file://").partition("#")[0]).is_file(), link
