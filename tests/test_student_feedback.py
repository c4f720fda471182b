"""What a student reads never holds a hidden check's data: not its message (which quotes its inputs, shapes
and expected values), its heat maps or what the learner's code printed during it. The seeds are fixed, so
that data would be the same every term. The JSON report keeps all of it, for instructors."""

import json
import re
import subprocess
import sys

import pytest

from grader.core import report as report_model
from grader.views.feedback import WITHHELD, student_view
from grader.views.html import render_html
from grader.views.terminal import render_text
from tests.conftest import REPO
from tests.grading import MUTANTS, batch, grade, learner_copy

# Wrong in one stage each, with hidden checks that fail with numbers, heat maps, or no hint at all.
WRONG = ["softmax-wrong-dim", "missing-scaling", "mask-not-causal", "heads-split-wrong"]
# Prints the hidden check's random inputs while it is wrong.
PRINTER = {
    "hint": "printer",
    "stage": 1,
    "file": "stage1_softmax.py",
    "find": "    attn_weights = torch.softmax(attn_scores, dim=-1)  # each row sums to 1",
    "replace": "    print('inputs seen:', inputs.tolist())\n    attn_weights = torch.softmax(attn_scores, dim=0)",
}
# Its one failure is a hidden random check that names no mistake (context_vector divides by the weights' sum,
# right wherever they sum to 1, as in the worked example): a student reads a neutral line for it.
WEIGHTED_MEAN = {
    "stage": 1,
    "file": "stage1_softmax.py",
    "find": "    return attn_weights @ inputs  # (num_tokens,) @ (num_tokens, d_in) -> (d_in,)",
    "replace": "    return attn_weights @ inputs / attn_weights.sum()",
}
DECIMAL = re.compile(r"-?\d+\.\d{3,}")


def mutant(hint: str) -> dict:
    return next(m for m in MUTANTS if m.get("hint") == hint)


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> list[tuple[str, dict, dict[str, str]]]:
    """(student, JSON report, what a student reads of it by where it is shown) for each wrong student: as the
    batch grades them (.txt), and alone with every student-facing output (their report differs: a batch
    grades every stage, and a stage's random inputs follow the stages before it)."""
    folder = tmp_path_factory.mktemp("feedback")
    students = {hint: (mutant(hint) if hint != "printer" else PRINTER) for hint in [*WRONG, "printer"]}
    students["weighted-mean"] = WEIGHTED_MEAN
    for hint, wrong in students.items():
        learner_copy(folder / "class" / hint, wrong)
    batch(folder / "class", folder / "out")
    graded = []
    for hint, wrong in students.items():
        graded.append(
            (
                hint,
                report_model.read(folder / "out" / "students" / f"{hint}.json"),
                {"batch .txt": (folder / "out" / "students" / f"{hint}.txt").read_text()},
            )
        )
        outputs = {name: folder / f"{hint}.{name}" for name in ("json", "results.json", "classroom.json", "html")}
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "grader",
                str(folder / "class" / hint),
                "--stage",
                str(wrong["stage"]),
                "--for-students",
                "--json",
                str(outputs["json"]),
                "--gradescope",
                str(outputs["results.json"]),
                "--classroom",
                str(outputs["classroom.json"]),
                "--html",
                str(outputs["html"]),
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr
        gradescope, classroom = (json.loads(outputs[name].read_text()) for name in ("results.json", "classroom.json"))
        graded.append(
            (
                hint,
                json.loads(outputs["json"].read_text()),
                {
                    "terminal --for-students": result.stdout,
                    "html --for-students": outputs["html"].read_text(),
                    "gradescope": "\n".join([gradescope["output"], *(t["output"] for t in gradescope["tests"])]),
                    "classroom": "\n".join(t["message"] for t in classroom["tests"]),
                },
            )
        )
    return graded


def hidden_secrets(report: dict) -> set[str]:
    """Pieces of the hidden checks' data that no visible check of the report shows."""
    checks = [c for stage in report["stages"] for c in stage["checks"] if c["status"] != "passed"]
    shown = set().union(*(_pieces(c) for c in checks if c["visibility"] == "visible"))
    shown_text = "\n".join(shown)
    hidden = set().union(*(_pieces(c) for c in checks if c["visibility"] == "hidden"))
    return {piece for piece in hidden - shown if piece not in shown_text}


def _pieces(check: dict) -> set[str]:
    """The numbers and the start of the message, the longer printed lines, the heat maps' title and cells (as
    the HTML page shows a cell)."""
    pieces = {*DECIMAL.findall(check["message"]), check["message"][:40]}
    pieces |= {line for line in check["printed"].split("\n") if len(line) > 12}
    if check["evidence"]:
        evidence = check["evidence"]
        pieces |= {
            f"row {i}, column {j}: {value:.4f}"
            for side in ("expected", "actual")
            for i, row in enumerate(evidence[side])
            for j, value in enumerate(row)
            if value is not None
        }
        pieces.add(evidence["title"])
    return pieces - {""}


def test_no_hidden_data_reaches_a_student_while_the_json_keeps_it(graded, tmp_path):
    all_secrets = 0
    for hint, report, shown in graded:
        secrets = hidden_secrets(report)
        all_secrets += len(secrets)
        # The instructor's full views show every piece: the pieces are real, and a view could leak them.
        full = render_text(report, hint, color=False) + render_html(report, hint, tmp_path / "page.html")
        assert not [s for s in secrets if s not in full], hint
        for name, text in shown.items():
            leaked = sorted(s for s in secrets if s in text)
            assert not leaked, f"{hint}: {name} shows hidden data: {leaked[:5]}"
    assert all_secrets >= 80  # numbers, messages, printed inputs and heat-map cells of many hidden checks


def test_each_wrong_student_has_failing_hidden_checks_with_data_in_the_json(graded):
    reports = {hint: report for hint, report, _ in graded}  # the batch's (the second of each is stage-only)
    for hint, report, _ in graded:
        hidden = [
            c
            for stage in report["stages"]
            for c in stage["checks"]
            if c["visibility"] == "hidden" and c["status"] == "failed"
        ]
        assert hidden and all(c["message"] for c in hidden), hint
    printed = [
        c["printed"]
        for stage in reports["printer"]["stages"]
        for c in stage["checks"]
        if c["visibility"] == "hidden" and c["printed"]
    ]
    assert printed and all("inputs seen:" in text for text in printed)
    assert any(
        c["evidence"]
        for stage in reports["mask-not-causal"]["stages"]
        for c in stage["checks"]
        if c["visibility"] == "hidden"
    )


def test_a_hidden_check_shows_its_verdict_and_hint_or_where_to_look(graded):
    shown = {}
    for hint, _, outputs in graded:
        shown.setdefault(hint, {}).update(outputs)
    text = shown["mask-not-causal"]["batch .txt"]
    assert "random.CausalAttention (hidden check): 0/" in text  # under its cause, with the checks it shares
    assert text.count("hint [mask-not-causal]") == 1
    assert "hint [mask-not-causal]" in shown["mask-not-causal"]["gradescope"]
    # A hidden check that fails and names no mistake of its own gets a neutral line, where it is shown alone.
    hintless = [
        (student, check["id"])
        for student, report, _ in graded
        for stage in report["stages"]
        for check in stage["checks"]
        if check["visibility"] == "hidden" and check["status"] == "failed" and not check["hint"]
    ]
    assert hintless, "the test needs a hidden check that fails without a hint"
    for student, check_id in hintless:
        assert f"{check_id} (hidden check): 0/" in shown[student]["batch .txt"]
        assert (
            f"failed: {WITHHELD}" in shown[student]["batch .txt"]
            and f"failed: {WITHHELD}" in shown[student]["gradescope"]
        )


# What a hidden check gives the learner's code, the code can keep: in a file of the student's scratch folder
# (shared by their stage workers), or in memory. This student replays every input softmax_naive was ever
# given into visible checks' messages: softmax_naive's own on the documented input, and stage 2's.
RELAY_STAGE1 = {
    "file": "stage1_softmax.py",
    "find": "    exp_x = torch.exp(x)\n",
    "replace": "    with open('seen.txt', 'a') as seen:\n"
    "        seen.write(repr([round(v, 4) for v in x.flatten().tolist()]) + '\\n')\n"
    "    if x.numel() == 6 and abs(float(x.flatten()[0]) - 0.9544) < 1e-3:  # the documented input\n"
    "        raise ValueError('seen ' + open('seen.txt').read()[-700:])\n"
    "    exp_x = torch.exp(x)\n",
}
RELAY_STAGE2 = (
    "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n",
    "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
    "        import os\n"
    "        if os.path.exists('seen.txt'):\n"
    "            raise ValueError('seen ' + open('seen.txt').read()[-700:])\n",
)


def visible_checks(report: dict) -> dict[str, tuple]:
    return {
        c["id"]: (c["status"], c["score"], c["message"], c["printed"])
        for stage in report["stages"]
        for c in stage["checks"]
        if c["visibility"] == "visible"
    }


def test_what_a_hidden_check_gave_the_code_never_reaches_a_visible_check(tmp_path):
    """Visible checks read the same whether hidden checks ran or not: every visible check of every stage runs
    before any hidden one, so nothing a hidden input gave the code can be replayed where students read it."""
    folder = learner_copy(tmp_path / "relay", RELAY_STAGE1, stages=[1, 2])
    stage2 = folder / "stage2_self_attention.py"
    stage2.write_text(stage2.read_text().replace(*RELAY_STAGE2, 1))  # SelfAttention_v1's forward
    _, full = grade(folder, report=tmp_path / "full.json")
    _, visible_only = grade(folder, "--visible-only", report=tmp_path / "visible.json")
    assert any(c["visibility"] == "hidden" for stage in full["stages"] for c in stage["checks"])
    replayed = [
        message
        for _, _, message, _ in visible_checks(full).values()
        if message.startswith("your code raised ValueError: seen [")
    ]
    assert len(replayed) >= 2  # softmax_naive's document check and stage 2's replay what the code kept
    assert visible_checks(full) == visible_checks(visible_only)


# softmax_naive takes torch's own softmax, by a name the source does not spell, on any input but the
# documented one: what it does with a hidden input must not move what a student sees before publishing.
SHORTCUT_ON_HIDDEN_INPUTS = {
    "file": "stage1_softmax.py",
    "find": "    exp_x = torch.exp(x)\n",
    # only random.softmax_naive, a hidden check, calls it on two scores (the visible ones: 1, 6 or 7)
    "replace": "    if x.numel() == 2:\n"
    "        return vars(torch.nn.functional)[''.join(['soft', 'max'])](x, dim=0)\n"
    "    exp_x = torch.exp(x)\n",
}


def test_a_shortcut_taken_on_a_hidden_input_moves_no_score_a_student_sees_before_publishing(tmp_path):
    def graded(name: str, mutant: dict | None) -> tuple[dict, dict, dict]:
        folder = learner_copy(tmp_path / name, mutant, stages=[1])
        _, report = grade(
            folder,
            "--stage",
            "1",
            "--gradescope",
            str(tmp_path / f"{name}-results.json"),
            "--student-json",
            str(tmp_path / f"{name}-student.json"),
            report=tmp_path / f"{name}.json",
        )
        return (
            report,
            json.loads((tmp_path / f"{name}-results.json").read_text()),
            json.loads((tmp_path / f"{name}-student.json").read_text()),
        )

    honest, honest_results, _ = graded("honest", None)
    cheat, cheat_results, cheat_student = graded("cheat", SHORTCUT_ON_HIDDEN_INPUTS)
    checks = {c["id"]: c for c in cheat["stages"][0]["checks"]}
    assert checks["random.softmax_naive"]["hint"] == "banned-api"  # its worker runs without torch's softmax
    # The published grade voids the function everywhere; the visible check keeps what its own input earned.
    assert checks["document.softmax_naive"]["score"] == 0
    assert checks["document.softmax_naive"]["visible_verdict"]["status"] == "passed"
    assert cheat["score"] < honest["score"]

    def before_publishing(results: dict) -> tuple:
        return results["output"], [t for t in results["tests"] if t["visibility"] == "visible"]

    assert before_publishing(cheat_results) == before_publishing(honest_results)
    assert cheat_results["score"] == cheat["score"]  # hidden from students until published
    assert "execution_time" not in cheat_results
    # --student-json, what the nbgrader notebooks read: no hidden check's message or evidence
    hidden = [c for c in cheat_student["stages"][0]["checks"] if c["visibility"] == "hidden"]
    assert hidden and all(c["message"] in ("", f"{c['status']}: {WITHHELD}") and c["evidence"] is None for c in hidden)


def test_a_hidden_check_keeps_its_message_even_when_a_visible_one_has_the_same():
    """The code picks its exceptions' words: showing a hidden check's message where it equals a visible one's
    would tell the student which way a hidden input fell."""
    checks = [
        {
            "id": "document.f",
            "visibility": "visible",
            "status": "error",
            "message": "your code raised same words",
            "hint": None,
            "evidence": None,
            "printed": "",
        },
        {
            "id": "random.f",
            "visibility": "hidden",
            "status": "error",
            "message": "your code raised same words",
            "hint": None,
            "evidence": None,
            "printed": "",
        },
    ]
    view = student_view({"stages": [{"id": "stage1", "checks": checks}]})
    assert view["stages"][0]["checks"][1]["message"] == f"error: {WITHHELD}"
