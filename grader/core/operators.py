"""The operators learner code may reach (operators.toml and operators-derived.toml), as a worker is told them:
the allowlist grader.runner.operators puts in place in the zygote. Read by the judge, never inside the sandbox."""

import tomllib
from functools import cache
from pathlib import Path

POLICY_FILE = Path(__file__).with_name("operators.toml")
DERIVED_FILE = Path(__file__).with_name("operators-derived.toml")


@cache
def allowed_operators() -> dict:
    """{"names": sorted aten operator names, "tags": torch's tags whose operators are allowed, "views": bool}."""
    policy = tomllib.loads(POLICY_FILE.read_text(encoding="utf-8"))
    names = {name for group in policy.get("alternatives", {}).values() for name in group}
    if DERIVED_FILE.exists():
        derived = tomllib.loads(DERIVED_FILE.read_text(encoding="utf-8"))
        names |= set(derived.get("operators", ()))
    families = policy.get("families", {})
    return {"names": sorted(names), "tags": list(families.get("tags", ())), "views": bool(families.get("views"))}
