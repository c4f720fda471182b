"""Stage 6's cases: scaled_dot_product_attention's inputs (query, key, value, options), run in the learner's
workers and compared with torch's own, with the attention weights shown where an output differs."""

from dataclasses import dataclass, field
from typing import cast

import torch
import torch.nn.functional as F

from grader.judge.checks.attention_probe import describe_weights
from grader.judge.checks.support import QKV, CheckFailed, call, expect_all_close, generator
from grader.judge.exception_hints import hint_for_exception
from grader.judge.sdpa_variants import sdpa_variants
from grader.judge.verdict import agrees, attention_evidence
from grader.sandbox.workers import LearnerFailure, LearnerWorkers

STAGE = 6
# Mistakes in how key/value heads are shared under enable_gqa: no single (L, E) matrix shows them.
HEAD_SHARING = {"gqa-tiled"}
FUNCTION = "scaled_dot_product_attention"


@dataclass
class Case:
    """One call: query (..., L, E), key (..., S, E), value (..., S, Ev) and the keyword arguments set."""

    query: torch.Tensor
    key: torch.Tensor
    value: torch.Tensor
    options: dict = field(default_factory=dict)
    strided: bool = False  # the inputs as a module passes its heads: views of transposed tensors (call_strided)

    def run(self, learner: LearnerWorkers) -> object:
        try:
            if self.strided:
                args = [self.query, self.key, self.value]
                reply = learner.request(STAGE, "call_strided", function=FUNCTION, args=args, kwargs=self.options)
                return cast(dict, reply)["result"]
            return call(learner, STAGE, FUNCTION, self.query, self.key, self.value, **self.options)
        except LearnerFailure as failure:
            failure.during = str(self)  # the case in its own words: a mask's kind beside its shape
            raise

    def padded(self) -> "Case":
        """The same inputs with leading dimensions of size 1 put in front, up to (batch, heads, tokens, features)."""

        def pad(t: torch.Tensor) -> torch.Tensor:
            return t.reshape((1,) * (4 - t.dim()) + tuple(t.shape))

        return Case(pad(self.query), pad(self.key), pad(self.value), self.options, strided=self.strided)

    def full_mask(self) -> "Case | None":
        """The same call with attn_mask expanded to the scores' own shape (..., L, S), each copy held; None without
        a mask of fewer elements."""
        mask = self.options.get("attn_mask")
        if not isinstance(mask, torch.Tensor):
            return None
        scores = torch.broadcast_shapes(tuple(self.query.shape[:-1]) + (self.key.shape[-2],), tuple(mask.shape))
        if tuple(mask.shape) == scores:
            return None
        return Case(
            self.query,
            self.key,
            self.value,
            {**self.options, "attn_mask": mask.expand(scores).clone()},
            strided=self.strided,
        )

    def first_matrix(self) -> "Case | None":
        """The same call on the first (L, E) query matrix of the batch alone, with its keys, values and mask
        (query head 0 is served by key/value head 0 under enable_gqa too); None without leading dimensions."""
        if self.query.dim() <= 2:
            return None
        lead = self.query.shape[:-2]
        first = (0,) * len(lead)
        options = {name: value for name, value in self.options.items() if name != "enable_gqa"}
        mask = options.get("attn_mask")
        if isinstance(mask, torch.Tensor):
            options["attn_mask"] = mask.expand(*lead, *mask.shape[-2:])[first]
        return Case(self.query[first], self.key[first], self.value[first], options, strided=self.strided)

    def fewer_queries(self) -> "Case | None":
        """Where L == S > 1: the same call without the last query (and its mask row), L != S; else None."""
        length = self.query.shape[-2]
        if length != self.key.shape[-2] or length < 2:
            return None
        options = dict(self.options)
        mask = options.get("attn_mask")
        if isinstance(mask, torch.Tensor) and mask.shape[-2] == length:
            options["attn_mask"] = mask[..., :-1, :]
        return Case(self.query[..., :-1, :], self.key, self.value, options, strided=self.strided)

    def square(self) -> "Case | None":
        """Where L != S: the same call cut to min(L, S) queries and keys (values and mask cut alike); else None."""
        length, keys = self.query.shape[-2], self.key.shape[-2]
        if length == keys:
            return None
        n = min(length, keys)
        options = dict(self.options)
        mask = options.get("attn_mask")
        if isinstance(mask, torch.Tensor):
            options["attn_mask"] = mask[..., : min(n, mask.shape[-2]), : min(n, mask.shape[-1])]
        return Case(self.query[..., :n, :], self.key[..., :n, :], self.value[..., :n, :], options, strided=self.strided)

    def heads_shared(self) -> "Case | None":
        """The same call under enable_gqa with the keys and values already repeated to the queries' heads (each
        group repeat_interleave'd num_heads // num_kv_groups times): no group left to share; None where there are
        as many heads already."""
        heads, groups = self.query.shape[-3], self.key.shape[-3]
        if not self.options.get("enable_gqa") or self.query.dim() < 3 or heads == groups:
            return None
        key, value = (t.repeat_interleave(heads // groups, dim=-3) for t in (self.key, self.value))
        return Case(self.query, key, value, self.options, strided=self.strided)

    def expected(self) -> torch.Tensor:
        """torch's own answer, in float64."""
        return F.scaled_dot_product_attention(
            *cast(QKV, _wide(self.query, self.key, self.value)), **_wide_options(self.options)
        )

    def variants(self) -> dict[str, torch.Tensor]:
        return sdpa_variants(self.query, self.key, self.value, **self.options)

    def __str__(self) -> str:
        shapes = ", ".join(
            f"{name} {tuple(t.shape)}" for name, t in (("query", self.query), ("key", self.key), ("value", self.value))
        )
        options = ", ".join(f"{name}={_shown(value)}" for name, value in self.options.items())
        dtype = "" if self.query.dtype == torch.float32 else f" in {str(self.query.dtype).removeprefix('torch.')}"
        layout = ", each a view of a transposed tensor (not contiguous)" if self.strided else ""
        return f"{FUNCTION}({shapes}{', ' + options if options else ''}){dtype}{layout}"


def _wide(*tensors: torch.Tensor) -> list[torch.Tensor]:
    return [t.to(torch.float64) for t in tensors]


def _wide_options(options: dict) -> dict:
    mask = options.get("attn_mask")
    if mask is None or mask.dtype == torch.bool:
        return options
    return {**options, "attn_mask": mask.to(torch.float64)}


def _shown(value: object) -> str:
    if isinstance(value, torch.Tensor):
        kind = "bool" if value.dtype == torch.bool else "float"
        return f"a {kind} mask {tuple(value.shape)}"
    return repr(value)


def expect_cases(learner: LearnerWorkers, cases: list[Case]) -> None:
    """Each case must give torch's answer; a mistake is named only when every case that can show it does.

    A failure shows the learner's attention weights of the first case that fails beside torch's. A case with
    leading dimensions that fails while its first matrix alone gives torch's answer counts a dimension from the
    start (leading-dims), whatever else its numbers happen to look like.
    """
    outputs = [run_telling_leading_dims(learner, case) for case in cases]
    try:
        expect_all_close([(output, case.expected(), str(case), case.variants) for case, output in zip(cases, outputs)])
    except CheckFailed as failed:
        failing = next(((c, o) for c, o in zip(cases, outputs) if not agrees(o, c.expected())), None)
        # A first matrix that comes out right disproves a mistake of one matrix's maths; under enable_gqa, a mistake
        # in sharing the heads (which no single matrix shows) stands.
        told = failing and _told_by_first_matrix(learner, failing[0], "gives another answer than torch")
        if told and not (failing and failing[0].options.get("enable_gqa") and failed.hint in HEAD_SHARING):
            if told.hint is None and failing:  # no cause named: the weights show what the case got
                told.evidence = _weights_evidence(learner, *failing)
            raise told from None
        if failed.evidence is None and failing is not None:
            failed.evidence = _weights_evidence(learner, *failing)
        raise


def _told_by_first_matrix(learner: LearnerWorkers, case: Case, failed: str) -> CheckFailed | None:
    """Where ``case`` (which ``failed`` as said) has leading dimensions and its first matrix alone gives torch's
    answer: leading-dims, or under enable_gqa a failure naming no cause (the shared heads, or a dimension counted
    from the start); else None."""
    alone = case.first_matrix()
    mask = case.options.get("attn_mask")
    if alone is None or (isinstance(mask, torch.Tensor) and mask.dim() > 2):  # a mask's own dims: mask-leading-dims
        return None
    try:
        output = alone.run(learner)
    except LearnerFailure:
        return None
    if not agrees(output, alone.expected()) or _runs_only_square(learner, alone):
        return None
    shared = case.heads_shared()
    if shared is not None and _gives_torchs_answer(learner, shared):  # right once no group is shared: the repeat
        return CheckFailed(
            f"{case} {failed}; the same keys and values repeated to the queries' {case.query.shape[-3]} heads "
            f"beforehand, {shared}, give torch's answer: the {case.key.shape[-3]} key/value heads are shared among "
            "the query heads otherwise than enable_gqa does",
            "kv-repeat-count",
        )
    if case.options.get("enable_gqa"):  # shared heads mishandled, or a dimension counted from the start: either
        return CheckFailed(
            f"{case} {failed}; its first matrix alone, {alone}, gives torch's answer: the key/value heads shared "
            "by enable_gqa, or the leading dimensions, are handled otherwise than torch does"
        )
    return CheckFailed(
        f"{case} {failed}; its first matrix alone, {alone}, gives torch's answer: a dimension is "
        "counted from the start where it should be counted from the end",
        "leading-dims",
    )


def run_telling_leading_dims(learner: LearnerWorkers, case: Case) -> object:
    """``case`` run; where it raises and the same inputs padded to four dimensions with leading 1s give torch's
    answer (every head kept), or else its first matrix alone does, the failure is told as _told_by_first_matrix
    says: a dimension counted from the start (dim 1 for the heads)."""
    try:
        return case.run(learner)
    except LearnerFailure as failure:
        if failure.kind != "exception" or hint_for_exception(failure.message):
            raise  # the error's own words say why (plugin tells it), whatever another layout or size would do
        halved = Case(case.query, case.key, case.value, {**case.options, "scale": 0.5}, strided=case.strided)
        if (
            failure.type == "ZeroDivisionError"
            and case.options.get("scale") == 0
            and _gives_torchs_answer(learner, halved)
        ):
            raise CheckFailed(
                f"{case} raised {failure}, and with scale=0.5 it gives torch's answer: its scale is inverted (a "
                "temperature 1 / scale), which 0.0 cannot be; 0.0 multiplies the scores, and every weight is equal",
                "scale-zero-dropped",
            ) from None
        if (full := case.full_mask()) is not None and _gives_torchs_answer(learner, full):
            raise CheckFailed(
                f"{case} raised {failure}; the same call with the mask expanded to the scores' own shape, "
                f"{full}, gives torch's answer: the mask is indexed or reshaped where it should broadcast",
                "mask-leading-dims",
            ) from None
        learner.start_afresh(STAGE)  # the same call in a new process: what raises only after others, kept state
        if _gives_torchs_answer(learner, case):
            raise CheckFailed(
                f"{case} raised {failure} after the calls before it, and alone in a fresh process gives torch's "
                "answer: something made for an earlier call is kept for the next (a mask cached in a module-level "
                "dict or by functools.lru_cache, keyed by less than every size it depends on)",
                "forward-keeps-state",
            ) from None
        if (square := case.square()) is not None and _gives_torchs_answer(learner, square):
            raise CheckFailed(
                f"{case} raised {failure}; the same call cut to as many queries as keys, {square}, gives torch's "
                "answer: something pairs the queries' length L with the keys' length S (a mask built L x L, a "
                "per-row flag without keepdim=True)",
                "queries-for-keys",
            ) from None
        if case.query.dim() < 4:
            padded = case.padded()
            # a square case that runs padded proves the count however L and S pair (another mistake, told elsewhere)
            square_case = case.query.shape[-2] == case.key.shape[-2]
            if _gives_torchs_answer(learner, padded) and (square_case or not _runs_only_square(learner, padded)):
                raise CheckFailed(
                    f"{case} raised {failure}; the same inputs with leading dimensions of size 1 put in front, "
                    f"{padded}, give torch's answer: a dimension is counted from the start where it should be "
                    "counted from the end",
                    "leading-dims",
                ) from None
        if told := _told_by_first_matrix(learner, case, f"raised {failure}"):
            raise told from None
        raise


def _runs_only_square(learner: LearnerWorkers, case: Case) -> bool:
    """Whether ``case``, L == S, fails with one query fewer: what broke is L paired with S (queries-for-keys,
    which the shape probe names), not the count of its leading dimensions."""
    fewer = case.fewer_queries()
    return fewer is not None and not _gives_torchs_answer(learner, fewer)


def _gives_torchs_answer(learner: LearnerWorkers, case: Case) -> bool:
    try:
        return agrees(case.run(learner), case.expected())
    except LearnerFailure:
        return False


def float32_evidence(learner: LearnerWorkers, case: Case) -> dict | None:
    """The attention weights of ``case`` widened to float32 (a float mask too), where that case fails as
    well: what a bfloat16 case gets wrong that float32 gets right is its dtype, which no map shows."""
    options = {
        name: value.to(torch.float32) if isinstance(value, torch.Tensor) and value.is_floating_point() else value
        for name, value in case.options.items()
    }
    widened = Case(case.query.float(), case.key.float(), case.value.float(), options)
    try:
        output = widened.run(learner)
    except LearnerFailure:
        return None
    evidence = None if agrees(output, widened.expected()) else _weights_evidence(learner, widened, output)
    return evidence and {**evidence, "title": f"{evidence['title']}, of the same case in float32"}


def _weights_evidence(learner: LearnerWorkers, case: Case, output: object) -> dict | None:
    """The learner's attention weights for ``case``, read as its outputs for values that pick one key each
    (the value's own shape kept, since a function may read its size), beside torch's.

    Read only when its output for the case's own values is those weights times the values: else
    the reading would show something the function does not compute, and nothing is shown.
    """
    S, L, Ev = case.key.shape[-2], case.query.shape[-2], case.value.shape[-1]
    eye = torch.eye(S, dtype=torch.float64)
    columns = []
    first: int | str  # a key in this loop; the title's words on the leading dimensions below
    for first in range(0, S, Ev):  # value column i carries key first + i: the output's column i is its weight
        picks = torch.zeros(S, Ev, dtype=case.value.dtype)
        picks[first : first + Ev, : S - first] = eye[first : first + Ev, first : first + Ev].to(case.value.dtype)
        picks = picks.expand(case.value.shape).contiguous()
        try:
            out = call(learner, STAGE, FUNCTION, case.query, case.key, picks, **case.options)
        except LearnerFailure:
            return None
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != (*case.query.shape[:-1], Ev):
            return None
        columns.append(out.to(torch.float64)[..., : min(Ev, S - first)])
    read = torch.cat(columns, dim=-1)  # (..., L, S)
    values = [case.value.to(torch.float64)]
    if case.options.get("enable_gqa"):  # each key/value head serves its group of consecutive query heads, or
        group = case.query.shape[-3] // case.value.shape[-3]  # in a tiling (the mistake), every group-th one
        tiling = [1] * (values[0].dim() - 3) + [group, 1, 1]
        values = [values[0].repeat_interleave(group, dim=-3), values[0].repeat(*tiling)]
    if not any(agrees(output, read.to(torch.float64) @ v) for v in values):
        return None
    identity = eye.to(case.value.dtype).expand(*case.value.shape[:-2], S, S)
    expected = Case(case.query, case.key, identity, case.options).expected().reshape(-1, L, S)[0]
    read = read.to(torch.float64).reshape(-1, L, S)[0]
    scores = None  # the raw scores, for the divisor that fits the weights: of square maps without masks
    if L == S and not {"attn_mask", "is_causal", "enable_gqa"} & case.options.keys():
        scores = (case.query.to(torch.float64) @ case.key.to(torch.float64).transpose(-2, -1)).reshape(-1, L, S)[0]
    causal = case.options.get("is_causal", False)
    note = f"yours: {describe_weights(read, scores, causal)}. Expected: {describe_weights(expected, scores, causal)}"
    first = (
        f" at [{', '.join(['0'] * (case.query.dim() - 2))}] of the leading dimensions" if case.query.dim() > 2 else ""
    )
    return attention_evidence(
        f"{FUNCTION}: attention weights{first} (rows: queries, columns: keys), read as its output for values that "
        "pick one key each",
        expected,
        read,
        note,
    )


def qkv(rng: torch.Generator, lead: tuple, L: int, S: int, E: int, Ev: int, spread: float = 1.0) -> list[torch.Tensor]:
    """Random query, key and value of the given sizes; ``spread`` scales the queries and keys."""
    return [
        torch.randn(*lead, L, E, generator=rng) * spread,
        torch.randn(*lead, S, E, generator=rng) * spread,
        torch.randn(*lead, S, Ev, generator=rng),
    ]


def mixed_mask(rng: torch.Generator, shape: tuple) -> torch.Tensor:
    """A bool mask whose every row keeps some keys and hides others: read either way round, it
    leaves every query a key, so its failures say how it was read, not what became of empty rows."""
    *rows, S = shape
    mask = torch.rand(*rows, S, generator=rng) > 0.4
    first, second = torch.randint(0, S, (2,), generator=rng).tolist()
    second = (first + 1 + second % (S - 1)) % S
    mask[..., first], mask[..., second] = True, False
    return mask


# How far the queries and keys of the example with large scores spread: its largest score is above 88.
LARGE_SCORES = 10.0


def example_cases() -> list[Case]:
    """Small cases, one per feature, that tell the common mistakes apart (shipped with the visible checks)."""
    rng = generator(f"example.{FUNCTION}")
    eye = torch.eye(2)
    q, k, v = qkv(rng, (), 3, 5, 4, 2)
    heads_q, heads_k, heads_v = qkv(rng, (1, 4), 3, 5, 4, 2)
    return [
        Case(eye, eye, eye),  # the docstring's example
        Case(eye, eye, eye, {"is_causal": True}),
        Case(eye, eye, eye, {"attn_mask": torch.tensor([[True, False], [False, False]])}),  # query 2 sees no key
        Case(eye, eye, eye, {"attn_mask": torch.tensor([[0.0, -torch.inf], [-torch.inf, -torch.inf]])}),  # as a float
        Case(q, k, v),
        Case(q, k, v, {"scale": 0.3}),
        Case(q, k, v, {"is_causal": True}),  # fewer queries than keys
        Case(*cast(QKV, qkv(rng, (), 5, 3, 4, 2)), {"is_causal": True}),  # more queries than keys
        Case(q, k, v, {"attn_mask": mixed_mask(rng, (3, 5))}),
        Case(q, k, v, {"attn_mask": torch.randn(3, 5, generator=rng) * 2}),
        Case(heads_q, heads_k[:, :2], heads_v[:, :2], {"enable_gqa": True}),  # 4 query heads, 2 key/value heads
        Case(heads_q, heads_k, heads_v, {"attn_mask": mixed_mask(rng, (4, 3, 5))}),  # one mask a head, broadcast
        # the heads as the only leading dimension: they are dim -3, not dim 1
        Case(heads_q[0], heads_k[0, :2], heads_v[0, :2], {"enable_gqa": True}),
        Case(q, k, v, {"scale": 0.0}),  # a scale like any other: every weight equal
        # scores past 88, whose exp() overflows float32: a softmax must shift them first, as torch's does
        Case(*cast(QKV, qkv(rng, (), 3, 5, 4, 2, spread=LARGE_SCORES))),
        # heads as a module passes them, x.view(b, n, h, d).transpose(1, 2): a view(-1, L, E) of them fails
        Case(*cast(QKV, qkv(rng, (2, 3), 3, 5, 4, 2)), strided=True),
        Case(*cast(QKV, qkv(rng, (2, 1, 2), 3, 4, 4, 2))),  # three leading dimensions: (..., L, E) takes any number
    ]
