"""The stage registry (stages.toml): a stage's number, title, file, public names, stand-ins, track and
points, read from one file by everything that needs a stage."""

import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REGISTRY_FILE = Path(__file__).with_name("stages.toml")
CORE, BONUS = "core", "bonus"
TRACKS = (CORE, BONUS)


@dataclass(frozen=True)
class Stage:
    number: int
    title: str
    file: str  # "stage1_softmax.py", in exercises/ and solutions/
    names: tuple[str, ...]  # public names the checks call
    stand_ins: dict[str, str]  # public name -> a class of grader/runner/standins.py
    track: str
    points: dict[str, float]  # check id -> the registry's points

    @property
    def id(self) -> str:
        return f"stage{self.number}"

    @property
    def module(self) -> str:
        return self.file.removesuffix(".py")


class RegistryError(ValueError):
    """stages.toml cannot be read as a registry; its message is one line."""


@cache
def registry() -> dict[int, Stage]:
    """Every stage of stages.toml, by number, in order."""
    table = tomllib.loads(REGISTRY_FILE.read_text(encoding="utf-8"))
    stages = {}
    for key, entry in table.items():
        number = int(key.removeprefix("stage")) if key.startswith("stage") and key[5:].isdigit() else None
        if number is None:
            raise RegistryError(f"{REGISTRY_FILE.name}: [{key}] is not a stage (write [stage<N>])")
        missing = {"title", "file", "names", "track", "points"} - set(entry)
        if missing:
            raise RegistryError(f"{REGISTRY_FILE.name}: [{key}] lacks {', '.join(sorted(missing))}")
        if entry["track"] not in TRACKS:
            raise RegistryError(f"{REGISTRY_FILE.name}: [{key}] track = {entry['track']!r}; write one of {TRACKS}")
        stand_ins = entry.get("stand_ins", {})
        if set(stand_ins) - set(entry["names"]):
            raise RegistryError(
                f"{REGISTRY_FILE.name}: [{key}] stand_ins for names it does not list: "
                f"{sorted(set(stand_ins) - set(entry['names']))}"
            )
        stages[number] = Stage(
            number,
            entry["title"],
            entry["file"],
            tuple(entry["names"]),
            dict(stand_ins),
            entry["track"],
            dict(entry["points"]),
        )
    return dict(sorted(stages.items()))


STAGE_MODULES = {number: entry.module for number, entry in registry().items()}
STAGES = sorted(
    STAGE_MODULES
)  # every stage of the registry; a course grades those of its tracks (grader/core/course.py)


def runner_stages() -> dict[int, dict]:
    """What a worker is told of the stages (it never reads the registry): module, public names, stand-ins."""
    return {
        number: {"module": entry.module, "names": list(entry.names), "stand_ins": entry.stand_ins}
        for number, entry in registry().items()
    }


# A check whose id has this kind is a note: advice beyond the book, shown apart from the checks to fix,
# worth the points course.toml's [notes] gives it (0 in the registry).
NOTE_KIND = "note"


def is_note(check_id: str) -> bool:
    return check_id.split(".", 1)[0] == NOTE_KIND


def stages_of(tracks) -> list[int]:
    """The stages of ``tracks`` (e.g. ("core",) or ("core", "bonus")), in order."""
    return [s.number for s in registry().values() if s.track in tracks]
