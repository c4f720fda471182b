"""A held-out set: whole stage files written by learners (or a helper playing them) that the checks never saw,
graded as a class, with the mutation suite's figures.

    python -m tests.heldout FOLDER [--visible-only] [--verbose]

FOLDER holds manifest.json (a list of {"id", "stage", "file", "kind": "mistake" | "correct", "what"}), a folder per
id holding that stage's file, and labels.json ({id: [hint ids that name that mistake]}, or {id: {"names": [...],
"also_true": [...], "note": true}} for hints true of the file that name no mistake, such as a note on the book's style,
and for a difference the grader prices as a note (0 points: caught where a note speaks); written before the set is
graded; a mistake without a label counts as not nameable). Each student's other stages are the solutions.
Mistakes are measured as mutants are (tests.mutation: caught, named, misnamed); a correct one must score full marks
in every stage.
"""

import argparse
import json
import tempfile
from pathlib import Path

from tests.mutation import describe, figures, grade_mutants


def read_set(folder: Path) -> tuple[list[dict], list[dict]]:
    """The set's mistakes and correct files, as mutants (a whole file each: ``source``)."""
    manifest = json.loads((folder / "manifest.json").read_text())
    labels_file = folder / "labels.json"
    labels = json.loads(labels_file.read_text()) if labels_file.exists() else {}
    entries = [
        {
            "id": entry["id"],
            "stage": int(entry["stage"]),
            "file": entry["file"],
            "source": str((folder / entry["id"] / entry["file"]).resolve()),
            "what": f"{entry['id']}: {entry['what']}",
            "truthful": _label(labels, entry["id"]).get("names", []),
            "also_true": _label(labels, entry["id"]).get("also_true", []),
            "note": _label(labels, entry["id"]).get("note", False),
            "kind": entry["kind"],
        }
        for entry in manifest
    ]
    return [e for e in entries if e["kind"] == "mistake"], [e for e in entries if e["kind"] == "correct"]


def _label(labels: dict, identifier: str) -> dict:
    """{"names": hints that name the mistake, "also_true": hints true of the file that name no mistake of its own}:
    a label is a list (its names) or that dict."""
    label = labels.get(identifier, [])
    return label if isinstance(label, dict) else {"names": label}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--visible-only", action="store_true", help="the release's view: visible checks only")
    parser.add_argument("--verbose", action="store_true", help="one line per submission")
    args = parser.parse_args()
    mistakes, correct = read_set(args.folder)
    with tempfile.TemporaryDirectory() as scratch:
        options = ["--visible-only"] if args.visible_only else []
        verdicts = grade_mutants(Path(scratch), *options, mutants=mistakes + correct)
    for verdict in verdicts[: len(mistakes)]:
        if args.verbose or not (verdict.caught and verdict.named) or verdict.wrong_hints or verdict.faults:
            print(describe(verdict))
    short = [v for v in verdicts[len(mistakes) :] if any(s["score"] < s["max_score"] for s in v.report["stages"])]
    for verdict in short:
        print(f"NOT FULL {verdict.mutant['what']!r}: {[(s['id'], s['score']) for s in verdict.report['stages']]}")
    print(figures(verdicts[: len(mistakes)]).line("release view" if args.visible_only else "full grader"))
    print(f"correct: {len(correct) - len(short)}/{len(correct)} full marks")


if __name__ == "__main__":
    main()
