"""What the judge knows of a learner module's parameters by name: the weights it injects (drawn by the
documented classes), which of the learner's projections stands for which documented one (role_pairing, by what
it computes), and what names and missing weights prove."""

import functools
import itertools
import zlib
from typing import cast

import torch

from grader.judge.checks import documented
from grader.judge.checks.documented import DOCUMENTED
from grader.judge.checks.student_facts import student_facts
from grader.judge.verdict import CheckFailed, agrees
from grader.runner.book_calls import by_owner, renamed
from grader.runner.seeding import manual_seed
from grader.sandbox.workers import LearnerFailure, LearnerWorkers


def reference_state(module_class, args: list, seed: int) -> dict[str, torch.Tensor]:
    """The weights a reference module gets under ``seed``: what gets injected into the learner's.

    The same for every student: a batch builds each module once. Callers get their own dict of
    tensors that no one changes.
    """
    return dict(_reference_state(module_class, tuple(args), seed))


@functools.cache
def _reference_state(module_class, args: tuple, seed: int) -> dict[str, torch.Tensor]:
    manual_seed(seed)
    return {k: v.clone() for k, v in module_class(*args).state_dict().items()}


def parameters_only(state: dict) -> dict:
    """The learnable weights of a reference state; the mask is the learner's own to build."""
    return {k: v for k, v in state.items() if k.split(".")[-1] != "mask"}


# A class's case for pairing renamed projections: d_in != d_out, so that out_proj's shape tells it apart, and
# the documented output to compute (MultiHeadAttentionKV without its cache is stage 5's MultiHeadAttention).
PAIRING_CASES: dict[str, tuple[str, list, tuple[int, ...]]] = {
    "SelfAttention_v1": ("SelfAttention_v1", [3, 4], (5, 3)),
    "SelfAttention_v2": ("SelfAttention_v2", [3, 4], (5, 3)),
    "CausalAttention": ("CausalAttention", [3, 4, 6, 0.0], (2, 5, 3)),
    "MultiHeadAttention": ("MultiHeadAttention", [3, 4, 6, 0.0, 2], (2, 5, 3)),
    "MultiHeadAttentionKV": ("MultiHeadAttention", [3, 4, 6, 0.0, 2], (2, 5, 3)),
}
PAIRING_SEED = 9200
PROJECTION_NAMES = ("W_query", "W_key", "W_value")


def role_pairing(learner: LearnerWorkers, stage: int, cls: str) -> dict[str, str] | None:
    """Documented projection -> the learner's (W_query -> W_q), for a module whose projections go by other names:
    the one assignment, among those of projections of the same shapes, under which the module computes the
    documented output on the judge's own weights and input. Creation order decides nothing: weights created
    as W_k, W_v, W_q keep their roles, and the worked examples alone judge the order (param-init-order).
    None where the names are the documented ones, or no assignment (or more than one) computes it."""
    facts, key = student_facts(learner), ("role pairing", stage, cls)
    if key not in facts:
        facts[key] = _role_pairing(learner, stage, cls) if cls in PAIRING_CASES else None
    return facts[key]


def _role_pairing(learner: LearnerWorkers, stage: int, cls: str) -> dict[str, str] | None:
    computes, args, shape = PAIRING_CASES[cls]
    state = parameters_only(reference_state(DOCUMENTED[cls], args, PAIRING_SEED))
    x = torch.rand(*shape, generator=torch.Generator().manual_seed(zlib.crc32(b"role pairing")))
    expected = documented.output(computes, args, state, x)

    def computes_it(pairing: dict | None) -> bool:
        try:
            reply = cast(
                dict,
                learner.request(stage, "module", cls=cls, args=list(args), state=state, inputs=[x], pairing=pairing),
            )
        except LearnerFailure:
            return False
        return not reply.get("rejected") and bool(reply["outputs"]) and agrees(reply["outputs"][0], expected)

    try:
        first = cast(dict, learner.request(stage, "module", cls=cls, args=list(args), state=state, inputs=[]))
    except LearnerFailure:
        return None
    keys = first.get("renamed")
    if not keys:
        return None
    by_creation = {documented_owner(k): documented_owner(v) for k, v in keys.items() if k != v}
    shape_of = {owner: _owner_shapes(state, owner) for owner in by_creation}
    # the learner's projections, each with the shapes of the documented one creation order paired it with
    held = {mine: shape_of[owner] for owner, mine in by_creation.items()}
    candidates = [
        dict(zip(by_creation, order))
        for order in itertools.permutations(held)
        if all(shape_of[owner] == held[mine] for owner, mine in zip(by_creation, order))
    ]
    found = [pairing for pairing in candidates if computes_it(pairing)]
    return found[0] if len(found) == 1 else None


def documented_owner(key: str) -> str:
    """The owner of a parameter name: "W_query.weight" -> "W_query", a bare "W_query" -> itself."""
    owner, _, _ = key.rpartition(".")
    return owner or key


def _owner_shapes(state: dict, owner: str) -> dict[str, tuple]:
    """What ``owner`` holds: leaf name ("weight", "bias", "" for a bare parameter) -> shape."""
    return {k.removeprefix(owner).lstrip("."): tuple(v.shape) for k, v in state.items() if documented_owner(k) == owner}


def in_documented_names(state: dict, pairing: dict[str, str] | None) -> dict:
    """The learner's ``state`` under the documented names of ``pairing`` (role_pairing), else as it is."""
    if not pairing:
        return state
    back = {mine: theirs for theirs, mine in pairing.items()}
    return {by_owner(key, back): value for key, value in state.items()}


def missing_weights_hint(rejected: list[str], held: list | None = None, state: dict | None = None) -> str | None:
    """The hint a module's missing documented weights prove: out_proj's bias alone, out_proj whole, or the
    projections' biases alone (qkv_bias=True asked for them). ``held``: the module's [name, shape] parameters,
    ``state`` the documented weights: an output projection of out_proj's shape under another name, without a
    bias, is out_proj without its bias, not a missing one."""
    if rejected == ["out_proj.bias"]:
        return "out-proj-bias"
    if sorted(rejected) == ["out_proj.bias", "out_proj.weight"]:
        if held is not None and state is not None and _unbiased_owner_of(held, tuple(state["out_proj.weight"].shape)):
            return "out-proj-bias"
        return "missing-out-proj"
    biases = [name for name in rejected if name.endswith(".bias") and name.split(".")[0] in PROJECTION_NAMES]
    return "qkv-bias-ignored" if rejected and biases == rejected else None


def out_proj_hint(linears: list, d_in: int, d_out: int) -> str | None:
    """What a module's weights (``linears``: [name, shape] in creation order) prove of its output projection, built
    with ``d_in`` != ``d_out``: None where one of (d_out x d_out) is there; d-in-for-d-out where it is made from d_in
    (d_out x d_in, copied from the projections', or d_in x d_in: d_out read as d_in throughout); missing-out-proj
    only where no weight but the projections' is there at all (one named otherwise is still one). The projections
    are the documented names, or else the first three weights made; fewer (a fused one) tell nothing."""
    names = [name for name, _ in linears]
    if set(PROJECTION_NAMES) <= set(names):
        others = [list(shape) for name, shape in linears if name not in PROJECTION_NAMES]
    elif len(linears) >= len(PROJECTION_NAMES):
        others = [list(shape) for _, shape in linears[len(PROJECTION_NAMES) :]]
    else:
        return None
    if [d_out, d_out] in others:
        return None
    if [d_out, d_in] in others or [d_in, d_in] in others:
        return "d-in-for-d-out"
    return None if others else "missing-out-proj"


def _unbiased_owner_of(held: list, shape: tuple) -> bool:
    """Whether ``held`` ([name, shape] parameters) has a layer other than the projections with a weight of
    ``shape`` and no bias."""
    names = {name for name, _ in held}
    return any(
        name.endswith(".weight")
        and tuple(size) == shape
        and documented_owner(name) not in PROJECTION_NAMES
        and f"{documented_owner(name)}.bias" not in names
        for name, size in held
    )


def expect_documented_names(cls: str, held: list, documented: list) -> None:
    """Projections held under other names than the book's: one message naming both. ``held`` and ``documented``
    are [name, kind or shape] pairs in creation order; the kinds or shapes must agree, pair by pair, and only the
    names differ. The other checks found them by creation order and graded their maths; this check alone prices
    the names."""
    held_names, documented_names = [name for name, _ in held], [name for name, _ in documented]
    # the same kinds or shapes, in whatever order (an out_proj named proj and made first is still one)
    same_kinds = sorted(map(repr, (what for _, what in held))) == sorted(map(repr, (what for _, what in documented)))
    if same_kinds and sorted(held_names) != sorted(documented_names):
        raise CheckFailed(
            f"your {cls} has {', '.join(held_names)}; the checks and the book call them "
            f"{', '.join(documented_names)}. The maths was graded with yours, each found by what it computes "
            "(or by the order you created them, where that cannot tell); only this check asks for the book's names",
            "other-names",
        )


def under_documented_names(held: dict, documented: dict[str, list]) -> dict:
    """``held`` (parameter name -> tensor or shape) under the documented names, where the learner's projections
    pair with the documented ones by creation order, kind and shape (grader.runner.book_calls.renamed); else
    as it is. What the maths checks read; the structure check alone prices the names."""

    def shape(value) -> tuple:
        return tuple(value.shape) if isinstance(value, torch.Tensor) else tuple(value)

    mapping = renamed(
        {name: shape(value) for name, value in held.items()}, {name: tuple(size) for name, size in documented.items()}
    )
    if mapping is None:
        return held
    back = {mine: theirs for theirs, mine in mapping.items()}
    return {back.get(name, name): value for name, value in held.items()}
