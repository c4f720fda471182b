"""make similarity: copydetect over a class's stage files, with the book's code as boilerplate."""

import csv
import re
import shutil
import zipfile
from pathlib import Path

import pytest

from grader.authoring.stubs import learner_imports
from grader.classroom import similarity
from grader.cli import similarity as similarity_command
from tests.grading import ALTERNATIVES, MUTANTS, REPO, learner_copy
from tests.grading import make as run_make

pytest.importorskip("copydetect")
# copydetect 0.5.0 reads its report template with importlib.resources.open_text
pytestmark = pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning")

STUB = re.compile(
    r"^(?P<indent>[ \t]*)# YOUR CODE HERE\n[ \t]*raise NotImplementedError\('(?P<name>[\w.]+) "
    r"is not implemented yet[^\n]*$",
    re.MULTILINE,
)
# Ada's own code, nothing like the reference: loops, her own helpers, matmul and a scale factor.
ADA = {
    "stage1_softmax.py": {
        "attention_scores": """
scores = torch.empty(inputs.shape[0])
for i, row in enumerate(inputs):
    scores[i] = torch.dot(row, query)
return scores""",
        "softmax_naive": """
shifted = x - torch.max(x)
numerators = torch.exp(shifted)
denominator = torch.sum(numerators)
return numerators / denominator""",
        "context_vector": """
result = torch.zeros(inputs.shape[1])
for i in range(inputs.shape[0]):
    result += attn_weights[i] * inputs[i]
return result""",
        "simple_self_attention": """
rows = []
for query in inputs:
    weights = softmax_naive(attention_scores(inputs, query))
    rows.append(context_vector(inputs, weights))
return torch.stack(rows)""",
    },
    "stage2_self_attention.py": {
        "SelfAttention_v1.__init__": """
shapes = (d_in, d_out)
self.W_query = nn.Parameter(torch.rand(*shapes))
self.W_key = nn.Parameter(torch.rand(*shapes))
self.W_value = nn.Parameter(torch.rand(*shapes))""",
        "SelfAttention_v1.forward": """
q = torch.matmul(x, self.W_query)
k = torch.matmul(x, self.W_key)
v = torch.matmul(x, self.W_value)
scale = 1.0 / (k.shape[1] ** 0.5)
probs = torch.softmax(torch.matmul(q, k.transpose(0, 1)) * scale, dim=1)
return torch.matmul(probs, v)""",
        "SelfAttention_v2.forward": """
q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
scale = 1.0 / (k.shape[1] ** 0.5)
probs = torch.softmax(torch.matmul(q, k.transpose(0, 1)) * scale, dim=1)
return torch.matmul(probs, v)""",
    },
}
# Bob's copy of it: every variable renamed, a comment of his own on top of each function.
RENAMED = {
    "scores": "sims",
    "row": "vec",
    "shifted": "centred",
    "numerators": "tops",
    "denominator": "bottom",
    "result": "acc",
    "rows": "outs",
    "weights": "w",
    "shapes": "dims",
    "q": "qq",
    "k": "kk",
    "v": "vv",
    "scale": "factor",
    "probs": "p",
}
BOB = {
    file: {
        name: "# worked this out myself\n" + re.sub(r"\b(" + "|".join(RENAMED) + r")\b", lambda m: RENAMED[m[1]], code)
        for name, code in bodies.items()
    }
    for file, bodies in ADA.items()
}


def stubs_filled_in(folder: Path, bodies: dict[str, dict[str, str]]) -> Path:
    """The five stubs, with each function named in ``bodies`` written as given (the others left as stubs)."""
    folder.mkdir(parents=True)
    for stub in sorted((REPO / "exercises").glob("stage*.py")):

        def body(match, written=bodies.get(stub.name, {})):
            code = written.get(match["name"])
            if code is None:
                return match[0]
            return re.sub(r"^(?=.)", match["indent"], code.strip("\n"), flags=re.MULTILINE)

        (folder / stub.name).write_text(STUB.sub(body, stub.read_text()))
    return folder


def reference_rewritten(folder: Path, pick: int) -> Path:
    """The reference with, in each file, one of the right answers written otherwise (alternatives.toml)."""
    learner_copy(folder)
    rewrites = [a for a in ALTERNATIVES if "find" in a]  # a find/replace each (whole files are written apart)
    for file in sorted({a["file"] for a in rewrites}):
        alternative = [a for a in rewrites if a["file"] == file][pick]
        text = (folder / file).read_text()
        find, replace = learner_imports(alternative["find"]), learner_imports(alternative["replace"])  # as copied
        assert text.count(find) == 1, alternative["what"]
        (folder / file).write_text(text.replace(find, replace))
    return folder


@pytest.fixture(scope="module")
def class_folder(tmp_path_factory) -> Path:
    """ada wrote her own code and bob copied it, renamed (as a zip); cy and dee each rewrote a part of the
    reference, differently; eve and fay handed in the stubs untouched; two submissions cannot be compared."""
    root = tmp_path_factory.mktemp("class")
    stubs_filled_in(root / "ada", ADA)
    bob = stubs_filled_in(root / "bob-unzipped", BOB)
    with zipfile.ZipFile(root / "bob.zip", "w") as archive:
        for file in sorted(bob.iterdir()):
            archive.write(file, f"attention/{file.name}")
    shutil.rmtree(bob)
    reference_rewritten(root / "cy", pick=0)
    reference_rewritten(root / "dee", pick=-1)
    for name in ("eve", "fay"):
        shutil.copytree(REPO / "exercises", root / name)
    (root / "gil.zip").write_bytes(b"PK\x03\x04 cut short")
    (root / "hal").mkdir()
    (root / "hal" / "notes.txt").write_text("I ran out of time")
    (root / "ivy\x1b[2J.txt").write_text("not a submission")
    return root


def run(submissions: Path, out: Path, *options: str, capsys) -> tuple[int, list[dict[str, str]], str]:
    status = similarity_command.main([str(submissions), "--out", str(out), *options])
    stderr = capsys.readouterr().err
    csv_path = out / "similarity.csv"
    rows = list(csv.DictReader(csv_path.open(encoding="utf-8"))) if csv_path.exists() else []
    return status, rows, stderr


def student_pairs(rows: list[dict[str, str]]) -> set[tuple[str, str]]:
    return {(row["student_a"], row["student_b"]) for row in rows}


def test_the_copied_pair_is_listed_and_code_shared_only_with_the_book_is_not(class_folder, tmp_path, capsys):
    status, rows, stderr = run(class_folder, tmp_path / "out", capsys=capsys)
    assert status == 0, stderr
    assert student_pairs(rows) == {("ada", "bob")}
    assert {row["file"] for row in rows} == {"stage1_softmax.py", "stage2_self_attention.py"}
    assert all(float(row["similarity_a"]) > 0.9 and float(row["similarity_b"]) > 0.9 for row in rows), rows
    assert all(int(row["tokens_overlap"]) > 100 for row in rows), rows
    assert "similarity: skipped gil (unreadable: truncated or damaged zip" in stderr
    assert "similarity: skipped hal (no stage files)" in stderr
    assert "similarity: skipped ivy\\x1b[2J.txt (" in stderr and "\x1b" not in stderr  # escaped: one plain line
    assert "6 students compared; 1 pair(s) above 0.5" in stderr
    report = (tmp_path / "out" / "similarity.html").read_text(encoding="utf-8")
    assert "ada/stage1_softmax.py" in report and "bob/stage1_softmax.py" in report
    assert "highlight-red" in report  # the shared code, marked
    assert "similarity-" not in report  # no temporary folder named in the report
    # the page needs nothing but itself: no stylesheet or script from a CDN, its lists' toggle its own
    assert "https://" not in re.sub(r'href="https://[^"]*github[^"]*"', "", report), "a file fetched from elsewhere"
    assert "cdn.jsdelivr" not in report and 'data-bs-toggle="collapse"' in report and "classList.toggle" in report


def test_without_the_book_as_boilerplate_the_stubs_alone_make_pairs(class_folder, tmp_path, monkeypatch, capsys):
    """What keeps eve and fay (the stubs, untouched) and cy and dee apart above is the boilerplate."""
    bare = tmp_path / "no-book"
    for folder in ("exercises", "solutions", "docs"):
        (bare / folder).mkdir(parents=True)
    monkeypatch.setattr(similarity, "REPO", bare)
    status, rows, stderr = run(class_folder, tmp_path / "out", capsys=capsys)
    assert status == 0, stderr
    assert {("eve", "fay"), ("cy", "dee"), ("ada", "bob")} <= student_pairs(rows)


def test_more_boilerplate_takes_its_code_out_of_every_pair(class_folder, tmp_path, capsys):
    """ada's files given as boilerplate (as if the course had handed them out): nothing is left to share."""
    handed_out = stubs_filled_in(tmp_path / "handed-out", ADA)
    status, rows, stderr = run(class_folder, tmp_path / "out", "--boilerplate", str(handed_out), capsys=capsys)
    assert status == 0, stderr
    assert rows == []
    assert "0 pair(s) above 0.5" in stderr


def test_a_lower_threshold_lists_more_pairs(class_folder, tmp_path, capsys):
    _, rows, _ = run(class_folder, tmp_path / "out", "--threshold", "0", "--min-tokens", "0", capsys=capsys)
    assert student_pairs(rows) > {("ada", "bob")}
    shares = [max(float(row["similarity_a"]), float(row["similarity_b"])) for row in rows]
    assert shares == sorted(shares, reverse=True)  # the most similar first


def test_the_same_class_gives_the_same_files_where_a_relative_out_says(class_folder, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    run(class_folder, Path("out"), "--threshold", "0", capsys=capsys)
    first = {name: (tmp_path / "out" / name).read_bytes() for name in ("similarity.csv", "similarity.html")}
    run(class_folder, Path("out"), "--threshold", "0", capsys=capsys)
    assert first == {name: (tmp_path / "out" / name).read_bytes() for name in first}


def test_rows_name_each_pair_once_in_order_and_quote_what_a_spreadsheet_would_run():
    pairs = [
        [0.4, 0.9, "zed/stage1_softmax.py", "=cmd/stage1_softmax.py", "", "", 30],
        [0.95, 0.7, "ada/stage2_self_attention.py", "bob/stage2_self_attention.py", "", "", 80],
    ]
    student_of = {"zed": "zed", "=cmd": "=cmd", "ada": "ada", "bob": "bob"}
    assert similarity.pairs_csv(similarity.pair_rows(pairs, student_of)).splitlines() == [
        "student_a,student_b,file,similarity_a,similarity_b,tokens_overlap",
        "ada,bob,stage2_self_attention.py,0.95,0.7,80",
        "'=cmd,zed,stage1_softmax.py,0.9,0.4,30",
    ]


def test_a_name_with_html_in_it_stays_text_in_the_report(tmp_path, capsys):
    hostile = '<img src=x onerror="alert(1)">'
    for name in ("ada", hostile):
        stubs_filled_in(tmp_path / "class" / name, ADA)
    status, rows, stderr = run(tmp_path / "class", tmp_path / "out", capsys=capsys)
    assert status == 0, stderr
    assert student_pairs(rows) == {(hostile, "ada")}  # the CSV names the student as the batch does
    report = (tmp_path / "out" / "similarity.html").read_text(encoding="utf-8")
    assert "<img src=x" not in report and "&lt;img src=x" in report


def test_the_guides_code_blocks_are_boilerplate(tmp_path):
    similarity.write_book_code(REPO / "docs", tmp_path / "book")
    code = {path.name: path.read_text() for path in (tmp_path / "book").iterdir()}
    assert "torch.manual_seed(123)" in code["stage3_block1.py"]
    assert "inputs = torch.tensor(" in code["stage1_block1.py"]
    assert not any("```" in text for text in code.values())


def test_a_class_of_one_compares_nothing_and_a_missing_folder_is_one_line(tmp_path, capsys):
    stubs_filled_in(tmp_path / "class" / "ada", ADA)
    status, rows, stderr = run(tmp_path / "class", tmp_path / "out", capsys=capsys)
    assert status == 0 and rows == [] and "1 student(s) with stage files: nothing to compare" in stderr
    assert (tmp_path / "out" / "similarity.csv").read_text().startswith("student_a,student_b,")
    status, _, stderr = run(tmp_path / "nowhere", tmp_path / "out", capsys=capsys)
    assert status == 2 and stderr.count("\n") == 1 and "is not a folder" in stderr


def test_make_similarity_runs_this_module():
    dry_run = run_make(REPO, "-n", "similarity", "SUBMISSIONS=class/", "OUT=grades/")
    assert dry_run.returncode == 0 and "-m grader.cli.similarity class/ --out grades/" in dry_run.stdout


def test_the_same_small_slip_on_the_books_code_is_no_pair_unless_the_minimum_allows_it(tmp_path, capsys):
    """Two students who copy the book's code and make the same one-line change share that line: short
    files make it a large share, so a pair needs --min-tokens shared tokens (80 unless told)."""
    slip = next(m for m in MUTANTS if m.get("hint") == "softmax-wrong-dim")
    for name in ("kim", "lee"):
        learner_copy(tmp_path / "class" / name, slip)
    status, rows, stderr = run(tmp_path / "class", tmp_path / "out", "--threshold", "0", capsys=capsys)
    assert status == 0 and rows == [], rows
    _, rows, _ = run(tmp_path / "class", tmp_path / "out", "--threshold", "0", "--min-tokens", "0", capsys=capsys)
    assert student_pairs(rows) == {("kim", "lee")} and all(int(row["tokens_overlap"]) < 80 for row in rows)


def test_an_earlier_terms_class_is_compared_with_this_one_and_not_with_itself(class_folder, tmp_path, capsys):
    prior = tmp_path / "last-term"
    for name in ("yan", "zoe"):  # last term, yan and zoe handed in what ada wrote this term
        stubs_filled_in(prior / name, ADA)
    status, rows, stderr = run(class_folder, tmp_path / "out", "--prior", str(prior), capsys=capsys)
    assert status == 0, stderr
    assert student_pairs(rows) == {
        ("ada", "bob"),
        ("ada", "prior 1: yan"),
        ("ada", "prior 1: zoe"),
        ("bob", "prior 1: yan"),
        ("bob", "prior 1: zoe"),
    }  # never ("prior 1: yan", "prior 1: zoe"): an earlier term is not graded again
    assert "6 students compared (and 1 earlier term(s))" in stderr
