"""Judge one result: pass, or fail with what was expected, what came back, and the mistake's name."""

from collections.abc import Callable, Mapping, Sequence

import torch

from grader.core.hints import catalog
from grader.judge.tensor_diff import describe_difference, describe_value
from grader.runner.protocol import Foreign

# Randomised checks compare float32 learner results with float32 references.
ATOL = 1e-4
RTOL = 1e-4


class CheckFailed(AssertionError):
    """A check's verdict: ``message`` says what differs, ``hint`` names the mistake (a catalog id),
    ``evidence`` (see ``attention_evidence``) shows the learner's attention next to the expected one.
    ``from_source``: the verdict rests on the submitted source alone, on no input the code was given."""

    def __init__(self, message: str, hint: str | None = None, evidence: dict | None = None, from_source: bool = False):
        if hint is not None and hint not in catalog():
            raise ValueError(f"unknown hint id {hint!r}")
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.evidence = evidence
        self.from_source = from_source
        # (actual, expected) where the check compared a result of the expected shape: what an output map shows
        self.compared: tuple[torch.Tensor, torch.Tensor] | None = None
        # some of the check's cases came out right, if not every one: a right result on those inputs (voiding)
        self.some_right = False
        # the function or class whose result failed, where the check judges several (the shape probe's target)
        self.called: str | None = None


def attention_evidence(title: str, expected: torch.Tensor, actual: torch.Tensor, note: str = "") -> dict:
    """Two (queries, keys) attention maps as plain numbers, for the report's heat maps.

    ``expected`` and ``actual`` are 2-D, the same shape; row i is what query token i attends to.
    ``note`` says in plain words what the measurement shows (row sums, divisor, causality).
    """

    def rows(t: torch.Tensor) -> list[list[float]]:
        return [[round(float(v), 4) for v in row] for row in t.detach().to("cpu", torch.float64)]

    return {"title": title, "expected": rows(expected), "actual": rows(actual), "note": note}


OUTPUT_MAP_TITLE = "where your output differs from the expected one"


def output_difference_evidence(actual: torch.Tensor, expected: torch.Tensor) -> dict:
    """A map of |yours - expected| per token (rows) and feature (columns), for a named cause that lies after the
    attention weights (the values, the heads' merge, the output projection, the weights a seed gives), where a
    map of the weights would show nothing wrong. The first item of a batch; a 1-D result as one row."""
    difference = (actual - expected).abs()
    while difference.dim() > 2:
        difference = difference[0]
    if difference.dim() < 2:
        difference = difference.reshape(1, -1)
    worst = divmod(int(difference.nan_to_num(nan=float("inf")).argmax()), difference.shape[1])
    which = "; the first of the batch" if actual.dim() > 2 else ""
    return {
        **attention_evidence(
            f"{OUTPUT_MAP_TITLE} (rows: tokens, columns: features{which})",
            torch.zeros_like(difference),
            difference,
            f"each cell is how far your output is from the expected one there; blank: equal. The largest "
            f"difference is at token {worst[0]}, feature {worst[1]}",
        ),
        "kind": "output",
    }


# Known mistakes' results by name (see proven_mistake), or a function computing them when needed.
Variants = Mapping[str, torch.Tensor] | Callable[[], Mapping[str, torch.Tensor] | None] | None


def tolerance_for(expected: torch.Tensor) -> torch.Tensor:
    return ATOL + RTOL * expected.abs().nan_to_num(posinf=0.0, neginf=0.0)


def expect_close(
    actual: object, expected: torch.Tensor, what: str, variants: Variants = None, tolerance: torch.Tensor | None = None
) -> None:
    """Fail unless ``actual`` matches ``expected``; name the first known-wrong variant it matches.

    ``variants`` may be a function that computes them: most results match, and need none.
    """
    expected = expected.detach().to("cpu", torch.float64)
    tolerance = tolerance_for(expected) if tolerance is None else tolerance
    if isinstance(actual, Foreign):
        raise CheckFailed(
            f"{what}: expected a tensor of shape {tuple(expected.shape)}, got {describe_value(actual)}",
            "returns-tuple" if actual.type == "tuple" else None,
        )
    problem = describe_difference(actual, expected, tolerance)
    if problem is None:
        return
    variant = proven_mistake(actual, expected, _resolve(variants))
    shape_wrong = isinstance(actual, torch.Tensor) and tuple(actual.shape) != tuple(expected.shape)
    if variant is not None:
        hint, _, detail = variant.partition(":")
        measured = f": here, {detail}" if detail else ""
        failed = CheckFailed(f"{what}: {problem}. That is exactly what the mistake named below gives{measured}", hint)
    else:
        failed = CheckFailed(f"{what}: {problem}", "wrong-shape" if shape_wrong else None)
    if isinstance(actual, torch.Tensor) and not shape_wrong:
        failed.compared = (actual.detach().to("cpu", torch.float64), expected)
    raise failed


def expect_all_close(cases: Sequence[tuple[object, torch.Tensor, str, Variants]]) -> None:
    """Each (actual, expected, what, variants) must match. The first case that does not fails the
    check; it names a mistake only if every other case that fails gives that mistake's result too, since
    one input, a single token say, may not tell that mistake from others no variant describes. A case
    that comes out right vetoes nothing: a mistake made under one condition (a float mask, a scale of 0)
    leaves the others right."""
    for actual, expected, what, variants in cases:
        try:
            expect_close(actual, expected, what, variants)
        except CheckFailed as failed:
            failed.some_right = some_right(cases)
            if failed.hint is None or failed.hint == "wrong-shape":
                raise
            for other_actual, other_expected, _, other_variants in cases:
                if agrees(other_actual, other_expected):
                    continue
                alike = [v for name, v in _resolve(other_variants).items() if hint_of(name) == failed.hint]
                if alike and not any(agrees(other_actual, v) for v in alike):
                    try:
                        expect_close(actual, expected, what)  # the same failure, naming nothing
                    except CheckFailed as plain:
                        plain.some_right = failed.some_right
                        raise
            raise


def some_right(cases: Sequence[tuple[object, torch.Tensor, str, Variants]]) -> bool:
    """Whether a case of ``cases`` that tells right from wrong came out right: a failed result check with one
    keeps the credit of the property checks resting on it (grader.judge.voiding). A case whose answer needs no
    attention computed tells nothing (a table or a stand-in gets it right by construction, and earns nothing by
    it): see _computed."""
    return any(agrees(actual, expected) and _computed(expected) for actual, expected, *_ in cases)


def _computed(expected: torch.Tensor) -> bool:
    """Whether ``expected`` shows something computed: not one number, nor a row of equal numbers (a softmax of
    one score is 1; of equal scores, uniform), nor (two or more dimensions) rows that are all alike, as where
    every query attends to one key (attention over one key, or one token's, is its value passed through)."""
    expected = expected.detach().to("cpu", torch.float64)
    if expected.numel() <= 1:
        return False
    if expected.dim() == 1:  # (n,): the numbers themselves must differ
        return not agrees(expected, expected[:1].expand_as(expected))
    rows = expected.reshape(-1, *expected.shape[-2:])  # (batches, tokens, features)
    return not agrees(rows, rows[:, :1].expand_as(rows))  # each token's row against the first's


def _resolve(variants: Variants) -> Mapping[str, torch.Tensor]:
    return (variants() if callable(variants) else variants) or {}


def hint_of(variant: str) -> str:
    """The catalog id of a variant's name (``wrong-scaling:<which number>`` is one wrong divisor)."""
    return variant.partition(":")[0]


def proven_mistake(actual: object, expected: torch.Tensor, variants: Mapping[str, torch.Tensor]) -> str | None:
    """The one mistake whose result ``actual`` equals, if this input tells that mistake apart.

    ``variants`` are named by catalog id, optionally ``id:detail`` (one wrong divisor of several).
    A variant that equals the right answer, or another mistake's variant, on this input proves
    nothing: a learner matching it may have made either mistake (or none), so none is named then.
    Returns the variant's name.
    """
    telling = {name: v for name, v in variants.items() if not agrees(v, expected)}
    matched = [name for name, v in telling.items() if agrees(actual, v)]
    if len({hint_of(name) for name in matched}) != 1:
        return None
    hint = hint_of(matched[0])
    name = matched[0] if len(matched) == 1 else hint  # two details that agree here: neither is proven
    alike = [other for other, v in telling.items() if hint_of(other) != hint and agrees(v, telling[matched[0]])]
    return None if alike else name


def agrees(actual: object, candidate: torch.Tensor) -> bool:
    """``actual`` equals ``candidate`` within tolerance, NaN where the candidate has NaN."""
    candidate = candidate.detach().to("cpu", torch.float64)
    if not isinstance(actual, torch.Tensor) or tuple(actual.shape) != tuple(candidate.shape):
        return False
    actual = actual.detach().to("cpu", torch.float64)
    nan = candidate.isnan()
    if not torch.equal(nan, actual.isnan()):
        return False
    keep = ~nan
    return describe_difference(actual[keep], candidate[keep], tolerance_for(candidate[keep])) is None
