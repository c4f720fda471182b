"""The mutation suite: learner-style mistakes graded as a class, and what the grader said of each.

    python -m tests.mutation [--visible-only]      # prints caught / named / misnamed

A mutant is *caught* when its own stage loses points, *named* when a failed check of that stage
carries a hint from its truthful set, and *misnamed* when any failed check carries a hint outside
that set: a hint that would send the learner to fix what they did right.
"""

import argparse
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader.core.inputs_key import KEY_FILE
from grader.judge.plugin import grader_faults
from tests.grading import ALTERNATIVES, BONUS_ON, MUTANTS, batch, learner_copy  # noqa: F401 - for test_mutants

# Hints that name no mistake but say what the report itself shows (results-first: every result check of the
# function failed, so how it computes earns nothing yet): true wherever they appear, and naming nothing.
ABOUT_THE_REPORT = {"results-first"}


def also_true(mutant: dict) -> set[str]:
    """Hints true of ``mutant`` that name no mistake of its own (a note on a learner's whole file, written in the
    book's style): never misnamed, never naming it."""
    return set(mutant.get("also_true", []))


def truthful(mutant: dict) -> set[str]:
    """The hint ids true of ``mutant``: listed, or (older entries) the one hint it must carry."""
    return set(mutant.get("truthful", [mutant["hint"]] if "hint" in mutant else []))


def nameable(mutant: dict) -> bool:
    return mutant.get("nameable", bool(truthful(mutant)))


@dataclass
class Verdict:
    """What the grader said of one mutant."""

    mutant: dict
    report: dict

    def _stage(self, number: int) -> dict:
        return next(s for s in self.report["stages"] if s["id"] == f"stage{number}")

    @property
    def hints(self) -> set[str]:
        """The hints of the failed checks of the mutant's own stage."""
        return {c["hint"] for c in self._stage(self.mutant["stage"])["checks"] if c["status"] != "passed" and c["hint"]}

    @property
    def caught(self) -> bool:
        """Its stage lost points; for a mutant whose difference is a note (advice beyond the book, 0 points
        unless a course prices it), a note of its stage spoke instead."""
        stage = self._stage(self.mutant["stage"])
        if self.mutant.get("note"):
            return any(c["id"].startswith("note.") and c["status"] != "passed" for c in stage["checks"])
        return stage["score"] < stage["max_score"]

    @property
    def leaked(self) -> list[int]:
        """Other stages that lost points: the mistake must cost points where it is made only."""
        return [
            int(s["id"].removeprefix("stage"))
            for s in self.report["stages"]
            if s["id"] != f"stage{self.mutant['stage']}" and s["score"] < s["max_score"]
        ]

    @property
    def wrong_hints(self) -> set[str]:
        others = {
            c["hint"]
            for s in self.report["stages"]
            if s["id"] != f"stage{self.mutant['stage']}"
            for c in s["checks"]
            if c["status"] != "passed" and c["hint"]
        }
        true = truthful(self.mutant) | also_true(self.mutant) | ABOUT_THE_REPORT
        return (self.hints - true) | (others - ABOUT_THE_REPORT)

    @property
    def named(self) -> bool:
        return bool(self.hints & truthful(self.mutant))

    @property
    def faults(self) -> list[str]:
        """The checks that erred, or lost their evidence, through the grader's own fault."""
        return grader_faults(self.report)


SUITE_KEY = "5e" * 32 + "\n"  # the mutation suite's key for hidden inputs (grader/judge/drawn_inputs.py)


def grade_mutants(folder: Path, *options: str, mutants: list[dict] = MUTANTS) -> list[Verdict]:
    """Every mutant as one student of a class, graded in one batch (the bonus stages too when a mutant is in
    one of them)."""
    for index, mutant in enumerate(mutants):
        learner_copy(folder / "class" / f"mutant-{index:03d}", mutant)
    # Keyed as an instructor's class is, by a fixed key: the suite's figures are the same on every run (a fresh
    # key each run measures more inputs, and flakes where a mistake shows on some of them only)
    key = folder / "out" / ".grader" / KEY_FILE
    key.parent.mkdir(parents=True, exist_ok=True)
    key.write_text(SUITE_KEY)
    batch(folder / "class", folder / "out", "--timeout", "2", "--course", str(BONUS_ON), *options)
    return [
        Verdict(m, json.loads((folder / "out" / "students" / f"mutant-{i:03d}.json").read_text()))
        for i, m in enumerate(mutants)
    ]


@dataclass
class Figures:
    mutants: int
    nameable: int
    caught: int
    named: int
    misnamed: int
    faults: int

    def line(self, view: str) -> str:
        def share(n: int, of: int) -> str:
            return f"{n}/{of} ({100 * n / of:.0f} %)" if of else "0/0"

        return (
            f"{view}: caught {share(self.caught, self.mutants)}, named {share(self.named, self.nameable)} of "
            f"nameable, misnamed {share(self.misnamed, self.mutants)}, grader faults {self.faults}"
        )


def figures(verdicts: list[Verdict]) -> Figures:
    return Figures(
        mutants=len(verdicts),
        nameable=sum(nameable(v.mutant) for v in verdicts),
        caught=sum(v.caught for v in verdicts),
        named=sum(v.named for v in verdicts if nameable(v.mutant)),
        misnamed=sum(bool(v.wrong_hints) for v in verdicts),
        faults=sum(bool(v.faults) for v in verdicts),
    )


def describe(verdict: Verdict) -> str:
    m = verdict.mutant
    what = m.get("what") or m.get("hint")
    return (
        f"stage {m['stage']} {what!r}: caught={verdict.caught} hints={sorted(verdict.hints)} "
        f"truthful={sorted(truthful(m))} wrong={sorted(verdict.wrong_hints)} leaked={verdict.leaked}"
        + (f" GRADER FAULTS={verdict.faults}" if verdict.faults else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--visible-only", action="store_true", help="the release's view: visible checks only")
    parser.add_argument("--verbose", action="store_true", help="one line per mutant")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        verdicts = grade_mutants(Path(folder), *(["--visible-only"] if args.visible_only else []))
    if args.verbose:
        print("\n".join(describe(v) for v in verdicts))
    print(figures(verdicts).line("release view" if args.visible_only else "full grader"))


if __name__ == "__main__":
    main()
