"""The docs a learner is sent to: every hint lands on its own paragraph, every link resolves."""

import re

import pytest

from grader.core.hints import catalog, explain
from grader.core.stages import STAGES
from tests.grading import MUTANTS, REPO
from tests.mutation import truthful

DOCS = REPO / "docs"
ANCHOR = re.compile(r'<a id="([a-z0-9-]+)"></a>')


def hint_pages(hint: str) -> list[str]:
    """Every docs/… link the grader can print for ``hint``."""
    entry = catalog()[hint]
    return [entry["docs"].format(stage=stage) for stage in entry.get("stages", [None])]


def anchors(page: str) -> list[str]:
    return ANCHOR.findall((REPO / page).read_text(encoding="utf-8"))


@pytest.mark.parametrize("hint", sorted(catalog()))
def test_every_hint_links_to_its_own_paragraph(hint):
    for link in hint_pages(hint):
        page, _, anchor = link.partition("#")
        assert anchor == hint, f"{hint}: {link} should end in #{hint}"
        assert "{" not in link, f"{hint}: a link with {{stage}} needs `stages`"
        assert hint in anchors(page), f'{page} has no paragraph <a id="{hint}"></a>'


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")))
def test_each_page_explains_exactly_the_hints_that_link_to_it(page):
    linked = {hint for hint in catalog() for link in hint_pages(hint) if link.partition("#")[0] == f"docs/{page}"}
    found = anchors(f"docs/{page}")
    assert len(found) == len(set(found)), f"{page}: an anchor appears twice"
    assert set(found) == linked


def test_stage_pages_have_common_mistakes():
    for stage in STAGES:
        text = (DOCS / f"stage{stage}.md").read_text(encoding="utf-8")
        assert "\n## Common mistakes\n" in text
        assert anchors(f"docs/stage{stage}.md"), f"stage{stage}.md explains no mistake"


def test_a_mutants_hint_links_to_a_paragraph_for_its_stage():
    for mutant in MUTANTS:
        for hint in truthful(mutant):
            link = re.search(r"\(see (docs/[^)#]+)#([a-z0-9-]+)\)", explain(hint, mutant["stage"]))
            assert link and link.group(2) in anchors(link.group(1)), (hint, mutant)


def test_a_stage_without_its_own_paragraph_links_to_the_first_page():
    assert explain("hard-coded", 3).endswith("(see docs/stage1.md#hard-coded)")


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")))
def test_relative_links_resolve(page):
    text = (DOCS / page).read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if target.startswith(("http://", "https://")):
            continue
        path, _, anchor = target.partition("#")
        file = (DOCS / page).parent / path if path else DOCS / page
        assert file.exists(), f"{page}: {target} does not exist"
        if anchor and file.suffix == ".md":
            headings = {
                re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-")
                for h in re.findall(r"^#+ (.+)$", file.read_text(encoding="utf-8"), re.MULTILINE)
            }
            assert anchor in headings | set(anchors(str(file.relative_to(REPO)))), f"{page}: {target}"


def test_a_hint_reads_in_the_words_of_the_stage_it_is_shown_for():
    assert "stage 6 function" in explain("dropout-in-eval", 8) and "nn.Dropout" in explain("dropout-in-eval", 4)
    assert "stage 1" not in explain("wrong-scaling", 8) and "by nothing" in explain("wrong-scaling", 1)
    assert "v1 parameter" in explain("weights-swapped", 3) and "queries @ keys.T" in explain("weights-swapped", 2)
    for hint, entry in catalog().items():
        assert {int(stage) for stage in entry.get("by_stage", {})} <= set(STAGES), hint


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")))
def test_no_table_is_broken_by_a_blank_line(page):
    """A table row after a blank line is read as a paragraph of pipes, apart from its table."""
    lines = (DOCS / page).read_text(encoding="utf-8").split("\n")
    broken = [
        number + 1
        for number in range(2, len(lines))
        if lines[number].startswith("|") and not lines[number - 1].strip() and lines[number - 2].startswith("|")
    ]
    assert broken == [], f"{page}: table rows after a blank line at lines {broken}"
