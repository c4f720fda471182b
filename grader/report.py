"""Turn check verdicts into the report: the JSON contract, the terminal view, Gradescope's results."""

import os
import sys
from collections.abc import Iterable

from grader.hints import explain
from grader.plugin import CheckResult
from grader.runner.implementation import STAGE_MODULES

TITLES = {
    1: "simple attention and a naive softmax",
    2: "SelfAttention_v1 / SelfAttention_v2",
    3: "weight transfer v2 -> v1",
    4: "CausalAttention: mask and dropout",
    5: "multi-head attention",
}


def build(results: Iterable[CheckResult], stages: list[int], device: str, torch_version: str,
          flags: list[str], sandbox: str) -> dict:
    """The report as the JSON contract defines it (grader/schemas/report.schema.json)."""
    by_stage = {stage: [r for r in results if r.stage == stage] for stage in stages}
    report_stages = []
    for stage, checks in by_stage.items():
        _void_shortcut_targets(checks)
        report_stages.append({
            "id": f"stage{stage}",
            "title": TITLES[stage],
            "score": _round(sum(c.score for c in checks)),
            "max_score": _round(sum(c.max_score for c in checks)),
            "checks": [
                {"id": c.id, "visibility": c.visibility, "status": c.status, "score": _round(c.score),
                 "max_score": _round(c.max_score), "message": c.message, "hint": c.hint}
                for c in checks
            ],
        })
    return {
        "score": _round(sum(s["score"] for s in report_stages)),
        "max_score": _round(sum(s["max_score"] for s in report_stages)),
        "device": device,
        "torch": torch_version,
        "sandbox": sandbox,
        "stages": report_stages,
        "flags": flags,
    }


# Why a shortcut check's verdict voids every check of its target, by the hint it carries.
VOIDED_BECAUSE = {
    "banned-api": "no credit: {target} uses the PyTorch function it is meant to replace",
    "recorder-tampered": "no credit: the grader could not see the operations {target} runs; switching off "
                         "PyTorch's function or dispatch modes, or reaching into the grader, is not allowed",
}


def _void_shortcut_targets(checks: list[CheckResult]) -> None:
    """A function that calls what it should build, or hides what it runs, earns nothing for it, in any check."""
    voided = {c.target: c.hint for c in checks if c.id.startswith("shortcut.") and c.hint in VOIDED_BECAUSE}
    for c in checks:
        if c.target in voided and c.score:
            c.score, c.status, c.hint = 0, "failed", voided[c.target]
            c.message = VOIDED_BECAUSE[c.hint].format(target=c.target)


def _number(stage: dict) -> int:
    return int(stage["id"].removeprefix("stage"))


def _round(value: float) -> float | int:
    return int(value) if float(value).is_integer() else round(value, 2)


# Terminal ---------------------------------------------------------------------------------

MARKS = {"passed": "✓", "failed": "✗", "error": "✗", "timeout": "⧗", "not_implemented": "·"}


def render_text(report: dict, submission: str, color: bool | None = None) -> str:
    paint = _painter(sys.stdout.isatty() and "NO_COLOR" not in os.environ if color is None else color)
    provisional = "provisional" in report["flags"]
    lines = [f"Grading {submission} on {report['device']} (torch {report['torch']})"]
    if report["flags"]:
        lines.append("flags: " + ", ".join(report["flags"]))
    if "unsandboxed" in report["flags"]:
        lines.append(f"    unsandboxed: learner code ran without a sandbox, because {report['sandbox']}")
    lines.append("")
    for stage in report["stages"]:
        number = _number(stage)
        marks = "".join(paint(MARKS[c["status"]], _tone(c["status"])) for c in stage["checks"])
        score = f"{_fmt(stage['score']):>5}/{_fmt(stage['max_score'])}"
        lines.append(f"stage {number}  {TITLES[number]:<38} {score}  {_bar(stage['score'], stage['max_score'])}  {marks}")
    lines.extend(_feedback(report, paint, submission))
    label = "Provisional total (visible checks only)" if provisional else "Total"
    lines.append("")
    lines.append(paint(f"{label}: {_fmt(report['score'])}/{_fmt(report['max_score'])}", "bold"))
    return "\n".join(lines)


def _feedback(report: dict, paint, submission: str) -> list[str]:
    lines: list[str] = []
    next_open = None
    for stage in report["stages"]:
        number = _number(stage)
        waiting = [c for c in stage["checks"] if c["status"] == "not_implemented"]
        if waiting and next_open is None:
            next_open = (number, waiting[0]["message"])
        for c in stage["checks"]:
            if c["status"] in ("passed", "not_implemented"):
                continue
            if not lines:
                lines += ["", paint("What to fix", "bold")]
            visibility = "" if c["visibility"] == "visible" else " (hidden check)"
            lines.append(paint(f"stage {number} · {c['id']}{visibility}: {_fmt(c['score'])}/{_fmt(c['max_score'])}",
                               _tone(c["status"])))
            lines += [f"    {line}" for line in c["message"].splitlines()]
            if c["hint"]:
                lines.append(paint(f"    hint [{c['hint']}]: {explain(c['hint'], number)}", "dim"))
    if next_open:
        number, message = next_open
        lines += ["", paint("Next step", "bold"), f"    open {submission.rstrip('/')}/{STAGE_MODULES[number]}.py",
                  f"    {message}"]
    return lines


def _bar(score: float, max_score: float, width: int = 10) -> str:
    filled = round(width * score / max_score) if max_score else 0
    return "█" * filled + "░" * (width - filled)


def _fmt(value: float) -> str:
    return f"{value:g}"


def _tone(status: str) -> str:
    return {"passed": "green", "failed": "red", "error": "red", "timeout": "yellow"}.get(status, "dim")


def _painter(enabled: bool):
    codes = {"green": "32", "red": "31", "yellow": "33", "dim": "2", "bold": "1"}

    def paint(text: str, tone: str) -> str:
        return f"\033[{codes[tone]}m{text}\033[0m" if enabled else text

    return paint


# Gradescope and GitHub Classroom ---------------------------------------------------------


def _checks_with_feedback(report: dict):
    """(stage number, check, the text a student reads for it) for every check of the report."""
    for stage in report["stages"]:
        number = _number(stage)
        for c in stage["checks"]:
            output = c["message"] or ""
            if c["hint"]:
                output += f"\nhint [{c['hint']}]: {explain(c['hint'], number)}"
            yield number, c, output.strip()


def to_gradescope(report: dict, execution_time: float) -> dict:
    """Gradescope's results.json: hidden checks show only after grades are published."""
    tests = [{"name": f"stage {number}: {c['id']}", "score": c["score"], "max_score": c["max_score"],
              "status": "passed" if c["status"] == "passed" else "failed", "output": output,
              "visibility": "visible" if c["visibility"] == "visible" else "after_published"}
             for number, c, output in _checks_with_feedback(report)]
    summary = f"{_fmt(report['score'])}/{_fmt(report['max_score'])} on {report['device']}"
    if report["flags"]:
        summary += f" ({', '.join(report['flags'])})"
    return {"score": report["score"], "execution_time": round(execution_time, 3), "output": summary,
            "visibility": "visible", "tests": tests}


def to_classroom(report: dict) -> dict:
    """The result a GitHub Classroom grading reporter reads (one runner): points per check."""
    tests = [{"name": f"stage {number}: {c['id']}", "status": "pass" if c["status"] == "passed" else "fail",
              "score": c["score"], "message": output} for number, c, output in _checks_with_feedback(report)]
    passed = all(t["status"] == "pass" for t in tests)
    return {"version": 1, "status": "pass" if passed else "fail", "max_score": report["max_score"], "tests": tests}
