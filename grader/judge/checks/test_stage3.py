"""Stage 3: transfer_weights_v2_to_v1, judged on stand-ins so that stage 2 cannot cost points here.

The worker hands the learner's function two stand-ins built under a seed (v1 with three
nn.Parameter, v2 with three nn.Linear, as documented) and returns the weights v1 ends up with.
What v2 held is worked out here, from the same seed (learner code can rewrite anything the worker
records beside it), and so is what v1's weights compute, with torch's own attention.
"""

import torch

from grader.judge.checks import documented
from grader.judge.checks.shortcut import TRANSFER_BY_COPY, expect_not_spelled, expect_work_recorded, switched_off_reply
from grader.judge.checks.support import CheckFailed, check, expect_close
from grader.judge.diagnosis import WORKED_EXAMPLE_D_OUT
from grader.judge.document_values import document_values
from grader.judge.exception_hints import hint_for_exception
from grader.judge.tensor_diff import describe_value
from grader.judge.verdict import agrees
from grader.runner.seeding import manual_seed
from grader.runner.standins import seeded_transfer_pair
from grader.sandbox.workers import LearnerFailure

STAGE = 3
NAMES = ("W_query", "W_key", "W_value")
SHAPES = [(3, 2), (4, 4), (2, 5), (6, 3)]  # (d_in, d_out): the book's, square, d_out > d_in, d_in > d_out
WORKED_D_IN = 3  # the worked example's embedding size


def transfer(learner, d_in: int, d_out: int, seed: int, **options) -> dict:
    reply = learner.request(STAGE, "transfer", d_in=d_in, d_out=d_out, seed=seed, **options)
    return reply if options.get("qkv_bias") else transferred(learner, reply, d_in, d_out, seed)


def transferred(learner, reply: dict, d_in: int, d_out: int, seed: int) -> dict:
    """The reply of a transfer without bias, once it has transferred tensors (else CheckFailed)."""
    if reply["raised"]:
        kind, message = reply["raised"]
        raise CheckFailed(
            f"transfer_weights_v2_to_v1 raised {kind} for a v2 without bias, saying: \u201c{message}\u201d",
            _hint_for_raise(learner, message, d_in, d_out, seed),
        )
    for name in NAMES:
        if not isinstance(reply["v1"][name], torch.Tensor):
            got = reply["v1"][name]
            raise CheckFailed(f"after the transfer, sa_v1.{name} is {describe_value(got)}, not a tensor")
    return reply


def _hint_for_raise(learner, message: str, d_in: int, d_out: int, seed: int) -> str | None:
    """What an error the transfer raised proves: torch's own words, or the square case that runs."""
    if told := hint_for_exception(message):
        return told
    if "leaf Variable that requires grad" in message:
        return "copy-without-no-grad"
    if "as parameter" in message and "Parameter or None expected" in message:
        return "not-parameters"
    shapes = "must match" in message or "size mismatch" in message or "shape" in message
    if not shapes:
        return None
    right = lambda held, weight: held.shape == weight.T.shape and torch.allclose(held, weight.T)  # noqa: E731
    if d_in != WORKED_D_IN and _transfer_holds(learner, WORKED_D_IN, d_out, seed, right):
        return "sizes-hard-coded"  # the worked example's d_in runs, and right: a 3 is written in the code
    if d_in == d_out:
        return None
    # d_in == d_out: the same copy runs; holding v2's weights as they are proves the missing .T
    untransposed = _transfer_holds(learner, d_out, d_out, seed, torch.equal)
    return "weights-not-transposed" if untransposed else None


def _transfer_holds(learner, d_in: int, d_out: int, seed: int, holds) -> bool:
    """The transfer between a pair of these sizes runs, and each of sa_v1's weights ``holds(weight, sa_v2's
    nn.Linear weight)``."""
    reply = learner.request(STAGE, "transfer", d_in=d_in, d_out=d_out, seed=seed)
    v2 = v2_weights(d_in, d_out, seed)
    return not reply["raised"] and all(
        isinstance(reply["v1"][n], torch.Tensor) and holds(reply["v1"][n], v2[n]) for n in NAMES
    )


def v2_weights(d_in: int, d_out: int, seed: int) -> dict[str, torch.Tensor]:
    """The weights of the v2 the worker handed over under ``seed``: what a right transfer copies."""
    _, sa_v2 = seeded_transfer_pair(d_in, d_out, seed)
    return {name: getattr(sa_v2, name).weight.detach() for name in NAMES}


def expect_transferred(v1: dict, d_in: int, d_out: int, seed: int, what: str, returned: dict | None = None) -> None:
    """sa_v1's weights after the transfer between the pair built under ``seed`` must be v2's, transposed; a
    weight that still holds what v1 was built with was not copied (into sa_v1: ``returned``, the weights of
    another module returned in its place, may hold them)."""
    before, _ = seeded_transfer_pair(d_in, d_out, seed)
    v2 = v2_weights(d_in, d_out, seed)
    held = returned or {}
    filled_elsewhere = bool(held) and all(
        isinstance(held.get(n), torch.Tensor) and held[n].shape == v2[n].T.shape and torch.allclose(held[n], v2[n].T)
        for n in NAMES
    )
    for name in NAMES:
        built = getattr(before, name).detach()
        if torch.equal(v1[name], built) and filled_elsewhere:
            raise CheckFailed(
                f"{what}: the transfer filled another module (a copy) with sa_v2's weights and returned it, and left "
                "the sa_v1 it was given as it was built: the caller's sa_v1, which the book goes on using, never "
                "gets the weights",
                "transfer-returns-copy",
            )
        if torch.equal(v1[name], built):
            raise CheckFailed(
                f"{what}: sa_v1.{name} still holds the values sa_v1 was built with: nothing was copied into it",
                "weight-not-copied",
            )
        if v1[name].shape == built.shape and torch.allclose(v1[name], built + v2[name].T):
            raise CheckFailed(
                f"{what}: sa_v1.{name} holds the values sa_v1 was built with plus sa_v2.{name}.weight.T: the "
                "weight was added to them (+=), not copied over them",
                "weight-not-copied",
            )
        expect_whole_copied(v1[name], built, v2[name].T, f"{what}: sa_v1.{name}")
    expect_transposed(v1, v2, what)


def expect_v1_shapes(reply: dict, d_in: int, d_out: int, seed: int, what: str) -> None:
    """sa_v1's weights after the transfer must keep v1's (d_in, d_out): else the book's x @ W cannot run, and the
    weights say what went where (expect_transferred), or the shape is told as it is."""
    for name in NAMES:
        held = reply["v1"].get(name)
        if not isinstance(held, torch.Tensor) or tuple(held.shape) != (d_in, d_out):
            expect_transferred(reply["v1"], d_in, d_out, seed, what, reply.get("returned_weights"))
            shape = tuple(held.shape) if isinstance(held, torch.Tensor) else type(held).__name__
            raise CheckFailed(
                f"{what}: sa_v1.{name} has shape {shape} after the transfer, not ({d_in}, {d_out})", "wrong-shape"
            )


def expect_whole_copied(held: torch.Tensor, built: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    """A weight that holds ``expected`` in a top-left block only and what it was ``built`` with elsewhere was copied
    in part: by loops over the worked example's d_in x d_out (sizes-hard-coded), or over other ranges."""
    if held.shape != expected.shape or held.shape != built.shape or held.dim() != 2:
        return
    kept = ~torch.isclose(built, expected)  # where a copy shows at all
    right = torch.isclose(held, expected) & kept
    if not right.any() or not bool((right | torch.isclose(held, built)).all()):
        return
    rows, cols = (int(index.max()) + 1 for index in right.nonzero(as_tuple=True))
    block = torch.zeros_like(right)
    block[:rows, :cols] = True
    if (rows, cols) == tuple(held.shape) or not torch.equal(right, block & kept):
        return
    worked = (min(WORKED_D_IN, held.shape[0]), min(WORKED_EXAMPLE_D_OUT, held.shape[1]))
    said = f"{what} holds sa_v2's weights in [:{rows}, :{cols}] only, and what sa_v1 was built with elsewhere"
    if (rows, cols) == worked:
        raise CheckFailed(
            f"{said}: {rows} x {cols} is the worked example's d_in x d_out, a loop over range({WORKED_D_IN}) and "
            f"range({WORKED_EXAMPLE_D_OUT}) where the weight's own sizes belong (or no loop: copy_ the whole of "
            "weight.T)",
            "sizes-hard-coded",
        )
    raise CheckFailed(f"{said}: the whole {tuple(held.shape)} weight must be copied", "weight-not-copied")


def expect_transposed(v1: dict, v2: dict, what: str) -> None:
    for name in NAMES:
        others = [v2[other].T for other in NAMES if other != name and not torch.equal(v2[other], v2[name])]
        if any(v1[name].shape == o.shape and torch.allclose(v1[name], o) for o in others):
            raise CheckFailed(
                f"{what}: sa_v1.{name} holds the transposed weight of another projection", "weights-swapped"
            )
        transposed = v2[name].T
        if not torch.equal(v2[name].flatten(), transposed.flatten()) and torch.equal(
            v1[name].flatten(), v2[name].flatten()
        ):
            raise CheckFailed(
                f"{what}: sa_v1.{name} holds the numbers of sa_v2.{name}.weight in their stored order "
                "(as it is, or reshaped) rather than transposed",
                "weights-not-transposed",
            )
        if v1[name].shape == v2[name].shape != v2[name].T.shape:
            raise CheckFailed(
                f"{what}: sa_v1.{name} has shape {tuple(v1[name].shape)}, nn.Linear's (d_out, d_in)",
                "weights-not-transposed",
            )
        expect_close(v1[name], v2[name].T, f"{what}: sa_v1.{name}")


@check("document.transfer", visible=True, target="transfer_weights_v2_to_v1")
def test_document_transfer(learner):
    reply = transfer(learner, 3, 2, seed=123)
    manual_seed(123)  # exercise 3.1: v1, then v2, then x
    documented.SelfAttention_v1(3, 2), documented.SelfAttention_v2(3, 2)
    x = torch.rand(2, 3)
    value = next(v for v in document_values(STAGE) if v.id == "stage3.v1_after_transfer")
    expect_v1_shapes(reply, 3, 2, 123, "exercise 3.1")
    problem = value.check(documented.attention(x, reply["v1"]))
    if problem is not None:
        expect_transferred(
            reply["v1"], 3, 2, 123, "exercise 3.1", reply.get("returned_weights")
        )  # names a mistake we know
        raise CheckFailed(f"{value.citation}: {problem}")


@check("random.transfer", target="transfer_weights_v2_to_v1")
def test_random_transfer(learner):
    for index, (d_in, d_out) in enumerate(SHAPES):
        reply = transfer(learner, d_in, d_out, seed=2000 + index)
        expect_transferred(
            reply["v1"], d_in, d_out, 2000 + index, f"d_in={d_in}, d_out={d_out}", reply.get("returned_weights")
        )


@check("property.outputs_agree", visible=True, target="transfer_weights_v2_to_v1")
def test_outputs_agree_after_transfer(learner):
    """After the transfer, sa_v1 computes what sa_v2 computes, on every shape, and sa_v2 is left as it was."""
    for index, (d_in, d_out) in enumerate(SHAPES):
        reply = transfer(learner, d_in, d_out, seed=3000 + index)
        handed = v2_weights(d_in, d_out, seed=3000 + index)
        for name in NAMES:  # the source of the transfer is read, never written
            after = reply["v2_after"][name]
            if not isinstance(after, torch.Tensor) or not torch.equal(after, handed[name]):
                raise CheckFailed(
                    f"the transfer changed sa_v2.{name}.weight (d_in={d_in}, d_out={d_out}): it must leave sa_v2 as it "
                    "was; .t_() transposes sa_v2's own weight in place, where .T gives a transposed view to copy from",
                    "input-overwritten",
                )
        x = torch.rand(5, d_in, generator=torch.Generator().manual_seed(index))
        expect_v1_shapes(reply, d_in, d_out, 3000 + index, f"d_in={d_in}, d_out={d_out}")
        expected = documented.attention(x, {f"{name}.weight": w for name, w in handed.items()}, transposed=True)
        computed = documented.attention(x, reply["v1"])
        if not agrees(computed, expected):
            # the weights say which went where
            expect_transferred(
                reply["v1"], d_in, d_out, 3000 + index, f"d_in={d_in}, d_out={d_out}", reply.get("returned_weights")
            )
        expect_close(computed, expected, f"sa_v1(x) after the transfer against sa_v2(x), d_in={d_in}, d_out={d_out}")


@check("structure.returns_v1", visible=True, target="transfer_weights_v2_to_v1")
def test_transfer_returns_v1(learner):
    reply = transfer(learner, 4, 3, seed=4000)
    if not reply["returned_v1"]:
        raise CheckFailed(
            "transfer_weights_v2_to_v1 must return the same sa_v1 object it was given",
            "transfer-returns-copy" if reply.get("returned_weights") else None,
        )
    if reply["v1_parameters"] != list(NAMES):
        raise CheckFailed(
            "after the transfer, sa_v1's parameters should still be W_query, W_key, W_value "
            f"(nn.Parameter); they are {reply['v1_parameters']}",
            "not-parameters" if not set(NAMES) & set(reply["v1_parameters"]) else None,  # held as tensors or buffers
        )
    if reply.get("grad_enabled") is False:
        raise CheckFailed(
            "after the transfer, autograd is off for the whole program: torch.set_grad_enabled(False) (or "
            "torch.no_grad().__enter__()) is never undone, so nothing trains afterwards; copy inside a with "
            "torch.no_grad(): block, which switches it back on as it ends",
            "grad-mode-left-off",
        )
    if untrainable := reply.get("v1_untrainable"):
        raise CheckFailed(
            f"after the transfer, training cannot change sa_v1's {', '.join(map(str, untrainable))}: copied "
            "with requires_grad switched off, or outside torch.no_grad() where autograd records the copy, a "
            "weight no longer takes gradients; copy under torch.no_grad() and leave requires_grad as it was",
            "copy-without-no-grad",
        )


# Notes: what we know beyond the book's exercise 3.1, whose own answer assigns new nn.Parameter objects and
# says nothing of a bias. They cost nothing unless an instructor prices them (course.toml [notes]).


@check("note.in_place", visible=True, target="transfer_weights_v2_to_v1")
def test_transfer_is_in_place(learner):
    reply = transfer(learner, 4, 3, seed=4000)
    if reply["shares_memory"]:
        also = (
            ""
            if reply["same_parameters"]
            else ("; and they are new parameter objects, which an optimizer made before the transfer never sees")
        )
        raise CheckFailed(
            "after the transfer, sa_v1's weights share memory with sa_v2's (nn.Parameter(sa_v2.W_query."
            f"weight.T) is a view of v2's weight), so training one would change the other{also}",
            "shares-memory",
        )
    if not set(NAMES) & set(reply["v1_parameters"]):  # no longer parameters at all: not-parameters says so
        return
    if not reply["same_parameters"]:
        raise CheckFailed(
            "after the transfer, sa_v1 holds new parameter objects: an optimizer made before the "
            "transfer still holds the old ones; copying into the ones sa_v1 has (copy_ under "
            "torch.no_grad()) lets it see the change",
            "new-parameters",
        )


@check("note.bias_refused", visible=True, target="transfer_weights_v2_to_v1")
def test_bias_is_refused(learner):
    try:
        reply = transfer(learner, 3, 2, seed=5000, qkv_bias=True)
    except LearnerFailure as failure:
        if failure.kind != "not_implemented" or not _implemented(learner):
            raise
        # the learner's own NotImplementedError for the biased case, where an unbiased transfer runs
        reply = {"raised": ["NotImplementedError", failure.message.removeprefix("NotImplementedError: ")]}
    if not reply["raised"]:
        raise CheckFailed(
            "a SelfAttention_v2 with qkv_bias=True was transferred without an error, but "
            "SelfAttention_v1 has no bias to hold it, so the two no longer agree",
            "bias-dropped",
        )
    kind, message = reply["raised"]
    if kind != "ValueError" or "bias" not in message.lower():
        raise CheckFailed(
            f"for qkv_bias=True the transfer raised {kind}: {message}; a ValueError that mentions the "
            "bias says what went wrong",
            "undocumented-attribute" if hint_for_exception(message) == "undocumented-attribute" else "bias-dropped",
        )
    if changed := reply.get("v1_changed"):
        raise CheckFailed(
            f"for qkv_bias=True the transfer raised ValueError, but only after it had changed sa_v1's "
            f"{', '.join(changed)}: refuse before copying anything, so that a refused transfer leaves sa_v1 as it was",
            "bias-refused-late",
        )


@check("shortcut.transfer", target="transfer_weights_v2_to_v1")
def test_transfer_copies_rather_than_fits(learner, learner_source):
    expect_not_spelled(learner_source, STAGE, "transfer_weights_v2_to_v1", TRANSFER_BY_COPY)
    reply = switched_off_reply(
        TRANSFER_BY_COPY,
        "transfer_weights_v2_to_v1",
        lambda off: learner.request(STAGE, "transfer", d_in=3, d_out=2, seed=6000, record=True, switched_off=off),
    )
    reply = transferred(learner, reply, 3, 2, seed=6000)
    v2 = v2_weights(3, 2, seed=6000)
    right = all(agrees(reply["v1"][name], v2[name].T) for name in NAMES)
    expect_work_recorded(reply["ops"], TRANSFER_BY_COPY, right, "transfer_weights_v2_to_v1")


def _implemented(learner) -> bool:
    """The transfer runs on an unbiased pair: a NotImplementedError elsewhere is the learner's own answer."""
    try:
        return not learner.request(STAGE, "transfer", d_in=3, d_out=2, seed=5000)["raised"]
    except LearnerFailure:
        return False
