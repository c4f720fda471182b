"""Known-wrong versions of the exercises' maths: a learner's output that matches one names the mistake.

These are deliberately wrong; the correct results always come from solutions/. A check names a
variant only when the learner's output equals it and the input tells it apart from the right
answer and from every other variant (grader.judge.verdict.proven_mistake).
"""

import math

import torch

# What a causal mask hides, by the triangle and diagonal of torch.triu or torch.tril that marks it: (n, n) -> bool.
HIDDEN = {
    "the future": lambda ones: torch.triu(ones, diagonal=1),  # the right one
    "the future and the diagonal": lambda ones: torch.triu(ones),
    "the future, the diagonal and the token before": lambda ones: torch.triu(ones, diagonal=-1),
    "the past": lambda ones: torch.tril(ones, diagonal=-1),
    "the past and the diagonal": lambda ones: torch.tril(ones),
    "the past, the diagonal and the next token": lambda ones: torch.tril(ones, diagonal=1),
}
# torch.triu(..., diagonal=-1): the mask reaches below the diagonal, so the first two rows hide every key
DIAGONAL_AND_BEFORE = (
    "mask-includes-diagonal:the mask hides the diagonal and the token just before it too (torch.triu(..., "
    "diagonal=-1)); torch.triu(..., diagonal=1) hides the future alone"
)
# The key size of the book's single-head worked examples (d_out 2): the number a learner writes in place of
# the key size they should read (``/ 2 ** 0.5``).
WORKED_EXAMPLE_D_OUT = 2


def slipped_divisors(d_k: int) -> dict[str, float]:
    """The divisors a slip of Python's precedence or of a sign gives in place of sqrt(d_k), each named by what the
    code reads as (wrong-scaling's details)."""
    return {
        f"the scores are divided by 2 * d_k = {2 * d_k}: `scores / d_k ** 1/2` reads as (scores / d_k) / 2": 2.0 * d_k,
        f"the scores are divided by d_k / 2 = {d_k / 2:g}: `d_k ** 1/2` is (d_k ** 1) / 2, not sqrt(d_k)": d_k / 2,
        f"the scores are multiplied by sqrt(d_k) = sqrt({d_k}), not divided: `/ d_k ** -0.5` is `* d_k ** 0.5`": (
            d_k**-0.5
        ),
    }


def attention_weights(
    queries: torch.Tensor,
    keys: torch.Tensor,
    *,
    divisor: float | None,
    causal: bool = False,
    softmax_dim: int = -1,
    exponentiate: bool = True,
    fill: float = float("-inf"),
    hidden: str = "the future",
    divide_after_softmax: bool = False,
) -> torch.Tensor:
    """Attention weights with each ingredient switchable, for (..., n, d) queries and keys.

    ``hidden``: what a causal mask hides (a key of HIDDEN); a row that hides every key is NaN, as in
    torch. ``divide_after_softmax`` divides the weights instead of the scores.
    """
    scores = queries @ keys.transpose(-2, -1)
    if divisor is not None and not divide_after_softmax:
        scores = scores / divisor
    if causal:
        n = scores.shape[-1]
        scores = scores.masked_fill(HIDDEN[hidden](torch.ones(n, n, dtype=torch.bool)), fill)
    if exponentiate:
        weights = torch.softmax(scores, dim=softmax_dim)
    else:
        weights = scores / scores.sum(dim=softmax_dim, keepdim=True)
    return weights / divisor if divisor is not None and divide_after_softmax else weights


def attend(queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, **options) -> torch.Tensor:
    return attention_weights(queries, keys, **options) @ values


def weight_variants(
    queries: torch.Tensor, keys: torch.Tensor, causal: bool, d_in: int | None = None, head_dim: int | None = None
) -> dict[str, torch.Tensor]:
    """Attention weights of the usual mistakes in one head of (causal) scaled dot-product attention.

    ``d_in`` and ``head_dim`` add the divisors learners take by mistake: sqrt(d_in), and in
    multi-head attention sqrt(d_out) where sqrt(head_dim) belongs.
    """
    d_k = keys.shape[-1]
    n = keys.shape[-2]
    right = {"divisor": d_k**0.5, "causal": causal}
    variants = {
        "missing-scaling": attention_weights(queries, keys, **{**right, "divisor": None}),
        "softmax-wrong-dim": attention_weights(queries, keys, **right, softmax_dim=-2),
        "softmax-not-exponentiated": attention_weights(queries, keys, **right, exponentiate=False),
        "weights-swapped": attention_weights(keys, queries, **right),
        "scaling-after-softmax": attention_weights(queries, keys, **right, divide_after_softmax=True),
    }
    variants |= _two_at_once(queries, keys, right)
    # Each wrong divisor under its own name; the name says which number it is.
    divisors = {
        f"the scores are divided by d_k = {d_k} itself": float(d_k),
        f"the scores are divided by sqrt({n}), the square root of the number of tokens": float(n) ** 0.5,
    }
    if d_in:
        divisors[f"the scores are divided by sqrt({d_in}), the square root of d_in"] = float(d_in) ** 0.5
    divisors[
        f"the scores are divided by sqrt({WORKED_EXAMPLE_D_OUT}), the worked example's key size written as a number, "
        f"not by sqrt(d_k) = sqrt({d_k})"
    ] = float(WORKED_EXAMPLE_D_OUT) ** 0.5
    divisors |= slipped_divisors(d_k)
    # Kept where a divisor is the right one too: a learner whose number happens to be right on one input and
    # wrong on another has made that mistake on both (proven_mistake ignores a variant that is the right answer).
    # Two labels with one divisor name neither detail (proven_mistake).
    for label, divisor in divisors.items():
        variants[f"wrong-scaling:{label}"] = attention_weights(queries, keys, **{**right, "divisor": divisor})
    if causal:
        variants["mask-not-causal"] = attention_weights(queries, keys, divisor=d_k**0.5)
        variants["mask-zero-instead-of-inf"] = attention_weights(queries, keys, **right, fill=0.0)
        # the future zeroed after the softmax: each row then sums to less than 1
        variants[
            "mask-not-renormalized:the future weights are zeroed after the softmax and the rows not renormalised"
        ] = attention_weights(queries, keys, divisor=d_k**0.5) * torch.tril(torch.ones(n, n))
        variants |= softmax_twice(
            attention_weights(queries, keys, divisor=d_k**0.5),
            HIDDEN["the future"](torch.ones(n, n, dtype=torch.bool)),
            d_k,
        )
        variants["mask-includes-diagonal"] = attention_weights(
            queries, keys, **right, hidden="the future and the diagonal"
        )
        variants[DIAGONAL_AND_BEFORE] = attention_weights(
            queries, keys, **right, hidden="the future, the diagonal and the token before"
        )
        # torch.tril's triangles: each hides the last token's every key, so its row is NaN (a softmax of -inf only)
        for hidden in ("the past", "the past and the diagonal", "the past, the diagonal and the next token"):
            variants[f"mask-wrong-triangle:the mask hides {hidden}"] = attention_weights(
                queries, keys, **right, hidden=hidden
            )
        # the mask buffer (True above the diagonal, what to hide) given to an attention function as a boolean
        # attn_mask, where True keeps a key: each query sees the later keys only, and the last one none, which
        # such a function (stage 6's, torch's) returns as zeros
        variants[
            "bool-mask-inverted:the mask buffer, True above the diagonal, is passed as a boolean attn_mask, which "
            "keeps the keys marked True"
        ] = attention_weights(queries, keys, **right, hidden="the past and the diagonal").nan_to_num(nan=0.0)
    return variants


# Two of these at once in one head (real code makes several mistakes): each named by the first, its detail saying
# both; the order puts first what breaks more (the mask lets the future in, a column softmax does too), so that a
# check of that property names its cause. (hint, what it does in words, what it changes.)
INGREDIENTS = (
    ("mask-not-causal", "the future is not masked", {"causal": False}),
    ("mask-zero-instead-of-inf", "the future's scores become 0, not -inf", {"fill": 0.0}),
    (
        "softmax-wrong-dim",
        "the softmax runs over the queries' axis (dim=-2), so each column sums to 1",
        {"softmax_dim": -2},
    ),
    ("softmax-not-exponentiated", "the weights are the scores over their sum, without exp()", {"exponentiate": False}),
    ("missing-scaling", "the scores are not divided by sqrt(d_k)", {"divisor": None}),
)


def _two_at_once(queries: torch.Tensor, keys: torch.Tensor, right: dict) -> dict[str, torch.Tensor]:
    """The weights of two mistakes of INGREDIENTS made together (those about the mask only where there is one)."""
    used = [i for i in INGREDIENTS if right["causal"] or not i[0].startswith("mask-")]
    return {
        f"{first}:two mistakes at once: {first_words}, and {second_words}": attention_weights(
            queries, keys, **{**right, **first_change, **second_change}
        )
        for index, (first, first_words, first_change) in enumerate(used)
        for second, second_words, second_change in used[index + 1 :]
        if not (first_change.keys() & {"causal"} and second_change.keys() & {"fill"})  # no mask, so nothing filled
    }


def single_head_variants(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, causal: bool, d_in: int | None = None
) -> dict[str, torch.Tensor]:
    """Outputs of the usual mistakes in one head of (causal) scaled dot-product attention."""
    variants = {name: w @ values for name, w in weight_variants(queries, keys, causal, d_in).items()}
    # one projection used in another's place (a copy-paste slip)
    right = {"divisor": keys.shape[-1] ** 0.5, "causal": causal}
    variants["weights-swapped:values from keys"] = attend(queries, keys, keys, **right)
    variants["weights-swapped:keys from queries"] = attend(queries, queries, values, **right)
    variants["weights-swapped:queries from keys"] = attend(keys, keys, values, **right)
    variants["weights-swapped:values from queries"] = attend(queries, keys, queries, **right)
    variants["weights-swapped:keys and values from queries"] = attend(queries, queries, queries, **right)
    variants["values-returned"] = values  # the context vectors computed, and the values returned in their place
    return variants


def softmax_variants(x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Results of the usual mistakes in softmax_naive, for (n,) scores."""
    return {
        "softmax-not-exponentiated": x / x.sum(dim=0),
        "softmax-not-exponentiated:the numerator has exp() but the sum below it does not": x.exp() / x.sum(dim=0),
        # the log-space form, x - logsumexp(x), is the log of the softmax: exp() of it is the softmax
        "softmax-not-exponentiated:these are the logarithms of the softmax, x - logsumexp(x); exp() of them is "
        "the softmax": x - torch.logsumexp(x, dim=0),
        # torch.pow(x, math.e) for torch.pow(math.e, x): the base and the exponent swapped (NaN for x < 0)
        "softmax-not-exponentiated:x ** e, torch.pow(x, math.e), where e ** x belongs (the base and the exponent "
        "swapped)": x.pow(math.e) / x.pow(math.e).sum(dim=0),
    }


def simple_attention_variants(x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Results of the usual mistakes in simple_self_attention (no scaling at all), for (n, d_in) inputs."""
    n, d_in = x.shape
    return {
        "softmax-wrong-dim": attend(x, x, x, divisor=None, softmax_dim=-2),
        "softmax-not-exponentiated": attend(x, x, x, divisor=None, exponentiate=False),
        f"wrong-scaling:the scores are divided by sqrt({d_in}), the square root of d_in": attend(
            x, x, x, divisor=d_in**0.5
        ),
        f"wrong-scaling:the scores are divided by d_in = {d_in}": attend(x, x, x, divisor=float(d_in)),
        f"wrong-scaling:the scores are divided by sqrt({n}), the square root of the number of tokens": attend(
            x, x, x, divisor=n**0.5
        ),
    }


def _kept_renormalized(weights: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    return (weights * keep) / (weights * keep).sum(-1, keepdim=True)


def renormalize_variants(weights: torch.Tensor) -> dict[str, torch.Tensor]:
    """Results of the usual mistakes in mask_and_renormalize, for (..., n, n) attention weights."""
    n = weights.shape[-1]
    ones = torch.ones(n, n)
    past = weights * torch.tril(ones)  # the future zeroed, the rows not renormalized
    return {
        "mask-not-renormalized": past,
        "mask-includes-diagonal": _kept_renormalized(weights, torch.tril(ones, diagonal=-1)),
        "mask-not-causal": weights,
        # the -inf trick of the scores used on weights: the row sums are -inf, the weights -0 and NaN
        "mask-inf-in-weights": (filled := weights.masked_fill(torch.triu(ones, diagonal=1).bool(), -torch.inf))
        / filled.sum(-1, keepdim=True),
        "mask-wrong-triangle:torch.triu keeps the diagonal and the future": _kept_renormalized(
            weights, torch.triu(ones)
        ),
        "mask-wrong-triangle:torch.triu(..., diagonal=1) keeps the future only": _kept_renormalized(
            weights, torch.triu(ones, diagonal=1)
        ),
        "mask-wrong-triangle:torch.triu, without renormalizing": weights * torch.triu(ones),
        # masked.sum(dim=-1) without keepdim=True is (..., n): it lines up with the last dimension, the keys
        "mask-not-renormalized:the sums lack keepdim=True, so row j's sum divides column j, not row j": past
        / past.sum(-1).unsqueeze(-2),
        "mask-not-renormalized:the sums run down the columns (dim=-2 or 0), not along each row (dim=-1)": past
        / past.sum(-2, keepdim=True),
        "mask-not-renormalized:one sum of the whole matrix divides every row, not each row's own sum": past
        / past.sum(dim=(-2, -1), keepdim=True),
        # F.normalize(x, dim=-1) divides by the Euclidean length (its default p=2); p=1 divides by the sum
        "mask-not-renormalized:each row is divided by its Euclidean length (F.normalize's default p=2), not by "
        "its sum": past / past.norm(dim=-1, keepdim=True),
        "mask-not-renormalized:each row is divided by how many weights it keeps (mask.sum(dim=-1)), not by their "
        "sum": past / torch.tril(ones).sum(-1, keepdim=True),
        # a softmax of the masked weights gives every zeroed weight exp(0) = 1 share again
        "mask-not-renormalized:the rows go through a softmax again, which gives each zeroed weight a share "
        "(exp(0) = 1), instead of being divided by their sums": torch.softmax(past, dim=-1),
    }


def causal_softmax_variants(scores: torch.Tensor, d_k: int) -> dict[str, torch.Tensor]:
    """Results of the usual mistakes in causal_softmax, for (..., n, n) scores."""
    n = scores.shape[-1]
    hides = {what: mask(torch.ones(n, n, dtype=torch.bool)) for what, mask in HIDDEN.items()}
    future = hides["the future"]

    def softmax(hidden: torch.Tensor | None, divisor: float, dim: int = -1, fill: float = -torch.inf) -> torch.Tensor:
        masked = scores if hidden is None else scores.masked_fill(hidden, fill)
        return torch.softmax(masked / divisor, dim=dim)

    return {
        "missing-scaling": softmax(future, 1.0),
        "wrong-scaling:the scores are divided by d_k itself": softmax(future, float(d_k)),
        f"wrong-scaling:the scores are divided by sqrt({n}), the square root of the number of tokens": softmax(
            future, n**0.5
        ),
        "scaling-after-softmax": softmax(future, 1.0) / d_k**0.5,
        **{f"wrong-scaling:{label}": softmax(future, divisor) for label, divisor in slipped_divisors(d_k).items()},
        "mask-zero-instead-of-inf": softmax(future, d_k**0.5, fill=0.0),
        "mask-includes-diagonal": softmax(hides["the future and the diagonal"], d_k**0.5),
        DIAGONAL_AND_BEFORE: softmax(hides["the future, the diagonal and the token before"], d_k**0.5),
        "mask-wrong-triangle:torch.tril hides the past and the diagonal": softmax(
            hides["the past and the diagonal"], d_k**0.5
        ),
        "mask-wrong-triangle:torch.tril(..., diagonal=-1) hides the past": softmax(hides["the past"], d_k**0.5),
        "mask-wrong-triangle:torch.tril(..., diagonal=1) hides the past, the diagonal and the next token": softmax(
            hides["the past, the diagonal and the next token"], d_k**0.5
        ),
        "softmax-wrong-dim": softmax(future, d_k**0.5, dim=-2),
        "mask-not-causal": softmax(None, d_k**0.5),
        **softmax_twice(softmax(None, d_k**0.5), future, d_k),
    }


def softmax_twice(weights: torch.Tensor, future: torch.Tensor, d_k: int) -> dict[str, torch.Tensor]:
    """The future hidden in softmax ``weights`` with -inf, then a second softmax (mask-after-softmax)."""
    hidden = weights.masked_fill(future, -torch.inf)
    again = "the future weights are filled with -inf after the softmax, and a second softmax"
    return {
        f"mask-after-softmax:{again} runs over them": torch.softmax(hidden, dim=-1),
        f"mask-after-softmax:{again} runs over them divided by sqrt(d_k) once more": torch.softmax(
            hidden / d_k**0.5, dim=-1
        ),
    }


def linear(x: torch.Tensor, state: dict[str, torch.Tensor], name: str) -> torch.Tensor:
    bias = state.get(f"{name}.bias")
    out = x @ state[f"{name}.weight"].T
    return out if bias is None else out + bias


def multihead_variants(x: torch.Tensor, state: dict[str, torch.Tensor], num_heads: int) -> dict[str, torch.Tensor]:
    """Outputs of the usual mistakes in the weight-split MultiHeadAttention, for x (b, n, d_in)."""
    b, n, d_in = x.shape
    q, k, v = (linear(x, state, name) for name in ("W_query", "W_key", "W_value"))
    d_out = q.shape[-1]
    head_dim = d_out // num_heads

    def split(t: torch.Tensor) -> torch.Tensor:
        return t.view(b, n, num_heads, head_dim).transpose(1, 2)  # (b, heads, n, head_dim)

    def merge(t: torch.Tensor) -> torch.Tensor:
        return t.transpose(1, 2).contiguous().view(b, n, d_out)

    def project(t: torch.Tensor) -> torch.Tensor:
        return linear(t, state, "out_proj")

    right = {"divisor": head_dim**0.5, "causal": True}
    variants = {
        name: project(merge(weights @ split(v)))
        for name, weights in weight_variants(split(q), split(k), causal=True, d_in=d_in).items()
    }
    variants["missing-out-proj"] = merge(attend(split(q), split(k), split(v), **right))
    variants["values-returned"] = project(v)  # the values (projected) where the heads' context vectors belong
    # one projection used in another's place (a copy-paste slip: keys = self.W_query(x))
    slips = {
        "keys from queries": (q, q, v),
        "values from keys": (q, k, k),
        "queries from keys": (k, k, v),
        "values from queries": (q, k, q),
        "keys and values from queries": (q, q, q),
    }
    for label, (queries, keys, values) in slips.items():
        variants[f"weights-swapped:{label}"] = project(
            merge(attend(split(queries), split(keys), split(values), **right))
        )
    # Two mistakes real code makes together: masked_fill's result thrown away, and out_proj left out.
    variants["mask-not-causal:the scores are not masked, and out_proj is not applied either"] = merge(
        attend(split(q), split(k), split(v), divisor=head_dim**0.5, causal=False)
    )
    if num_heads > 1:  # the softmax over the heads (dim=1 of (b, heads, n, n)) instead of the keys
        scores = (split(q) @ split(k).transpose(-2, -1) / head_dim**0.5).masked_fill(
            torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1), -torch.inf
        )
        variants["softmax-wrong-dim:over the heads"] = project(merge(torch.softmax(scores, dim=1) @ split(v)))
    if num_heads > 1:
        variants[f"wrong-scaling:the scores are divided by sqrt(d_out) = sqrt({d_out}), not sqrt(head_dim)"] = project(
            merge(attend(split(q), split(k), split(v), divisor=d_out**0.5, causal=True))
        )
        slip = d_out / num_heads**0.5  # `d_out / num_heads ** 0.5`: ** binds before /
        variants[
            f"wrong-scaling:the scores are divided by d_out / sqrt(num_heads) = {slip:.4g}, not sqrt(head_dim)"
        ] = project(merge(attend(split(q), split(k), split(v), divisor=slip, causal=True)))

        def split_without_transpose(t: torch.Tensor) -> torch.Tensor:
            return t.reshape(b, num_heads, n, head_dim)

        # Heads split with view(b, num_heads, n, head_dim), merged back the book's way.
        flat = attend(split_without_transpose(q), split_without_transpose(k), split_without_transpose(v), **right)
        variants["heads-split-wrong"] = project(merge(flat))
        if head_dim > 1:  # view(b, n, head_dim, num_heads): head h takes features h, h + num_heads, ...

            def split_interleaved(t: torch.Tensor) -> torch.Tensor:
                return t.view(b, n, head_dim, num_heads).permute(0, 3, 1, 2)

            mixed = attend(split_interleaved(q), split_interleaved(k), split_interleaved(v), **right)
            variants[
                "heads-split-wrong:each head takes every num_heads-th feature (a view as (b, num_tokens, head_dim, "
                "num_heads)), not a block of head_dim features next to one another"
            ] = project(merge(mixed))
        if head_dim != num_heads:  # split(num_heads): a count taken as a width, head_dim heads of num_heads each

            def split_swapped(t: torch.Tensor) -> torch.Tensor:
                return t.view(b, n, head_dim, num_heads).transpose(1, 2)

            blocks = attend(split_swapped(q), split_swapped(k), split_swapped(v), **right)
            variants[
                "heads-split-wrong:the projections are cut into blocks of num_heads features (Tensor.split(num_heads) "
                "takes each block's size, not their count): head_dim heads of num_heads features each"
            ] = project(blocks.transpose(1, 2).reshape(b, n, d_out))
        # Heads split the book's way, merged back without transposing: tokens and heads mixed.
        variants["heads-merged-wrong"] = project(attend(split(q), split(k), split(v), **right).reshape(b, n, d_out))
    return variants
