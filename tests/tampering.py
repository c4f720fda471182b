"""Submissions that hide what they run from the grader, or rewrite what it recorded: the solutions, one change each.

Learner code runs in the same worker as the grader's probes and its recorder of torch
operations, so it can reach them: through the caller's frame, or by switching PyTorch's
function and dispatch modes off. Each case has the shape of a mutant (tests/mutants.toml), so
`learner_copy` applies it; `voided` is the suffix of the check ids of the function it targets,
all of which must earn nothing.
"""

from tests.grading import MUTANTS

SOFTMAX_NAIVE_BODY = "    exp_x = torch.exp(x)\n    return exp_x / exp_x.sum(dim=0)"

# torch.softmax, then every set in the callers' frames emptied: the recorder's among them.
CLEARED_RECORD = {
    "what": "softmax_naive empties the recorder's set through its callers' frames",
    "stage": 1,
    "voided": ".softmax_naive",
    "file": "stage1_softmax.py",
    "find": SOFTMAX_NAIVE_BODY,
    "replace": """    import sys
    weights = torch.softmax(x, dim=0)
    frame = sys._getframe(1)
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if isinstance(value, set):
                value.clear()
        frame = frame.f_back
    return weights""",
}

# F.scaled_dot_product_attention with PyTorch's function and dispatch modes off (tests/mutants.toml).
MODES_SWITCHED_OFF = {
    "what": "MultiHeadAttention switches the modes off around F.scaled_dot_product_attention",
    "voided": ".MultiHeadAttention",
    **next(m for m in MUTANTS if m.get("hint") == "recorder-tampered"),
}

# Copies nothing, then makes the probe's record of v2's weights agree with v1's.
FORGED_V2_RECORD = {
    "what": "transfer_weights_v2_to_v1 copies nothing and rewrites the probe's record of v2",
    "stage": 3,
    "voided": "",
    "file": "stage3_weight_transfer.py",
    "find": """    with torch.no_grad():
        for matrix, linear in pairs:
            matrix.copy_(linear.weight.T)  # (d_out, d_in) -> (d_in, d_out)
    return sa_v1""",
    "replace": """    import sys
    record = sys._getframe(1).f_locals.get("v2")
    if isinstance(record, dict):
        for name in list(record):
            record[name] = getattr(sa_v1, name).detach().T.clone()
    return sa_v1""",
}

# The recorder sees an honest exponential and sum; torch.softmax runs where it cannot see. Only
# the file, as the judge holds it, tells.
SOFTMAX_OUT_OF_SIGHT = {
    "what": "softmax_naive shows the recorder an exponential and calls torch.softmax out of its sight",
    "stage": 1,
    "voided": ".softmax_naive",
    "file": "stage1_softmax.py",
    "find": SOFTMAX_NAIVE_BODY,
    "replace": """    from torch.utils._python_dispatch import _disable_current_modes
    torch.exp(x).sum()
    with torch._C.DisableTorchFunction(), _disable_current_modes():
        return torch.softmax(x, dim=0)""",
}

# Every name built at run time, so the file spells none of them: only what the recorder did not
# see tells.
MODES_OFF_BY_BUILT_NAMES = {
    "what": "MultiHeadAttention switches the modes off by names it builds at run time",
    "stage": 5,
    # the modes off hide the call, but torch's attention is switched off where the shortcut check runs it
    "hint": "banned-api",
    "voided": ".MultiHeadAttention",
    "file": "stage5_multihead_attention.py",
    "find": MODES_SWITCHED_OFF["find"],
    "replace": """        import contextlib
        join = "".join
        modes = getattr(torch.utils, join(["_python_", "disp", "atch"]))
        off = [getattr(torch._C, join(["Disa", "bleTorc", "hFunc", "tion"])), getattr(modes, join(["_disable_cu", "rrent_mo", "des"]))]
        attend = getattr(torch.nn.functional, join(["scaled_dot", "_product_", "attention"]))
        with contextlib.ExitStack() as stack:
            for switch in off:
                stack.enter_context(switch())
            context = attend(queries, keys, values, is_causal=True)
        context = context.transpose(1, 2)""",
}

# A helper, appended after the function it serves, that rewrites every set in its callers' frames (the
# recorder's among them) to show ``shown``, by names built at run time: Python folds "a" + "b" into one
# constant, which the judge reads; a join it cannot.
FORGE_RECORD = """


def _forge_record(shown):
    import sys
    join = "".join
    frame = getattr(sys, join(["_get", "frame"]))(2)
    while frame is not None:
        for value in list(getattr(frame, join(["f_", "locals"])).values()):
            if isinstance(value, set):
                value.clear()
                value.update(shown)
        frame = getattr(frame, join(["f_", "back"]))"""

# What learner code in the worker can do to anything the worker reports, spelled so that the file names
# none of it: torch.softmax called, then the record rewritten to show the work by hand. Only the answer
# given where torch's softmax is switched off (grader.runner.routes) tells.
FORGED_RECORD_BY_BUILT_NAMES = {
    "what": "softmax_naive calls torch.softmax and forges the record, all by names built at run time",
    "stage": 1,
    "voided": ".softmax_naive",
    "hint": "banned-api",
    "file": "stage1_softmax.py",
    "find": SOFTMAX_NAIVE_BODY,
    "replace": """    weights = getattr(torch, "".join(["soft", "max"]))(x, dim=0)
    _forge_record({"exp", "sum", "div"})
    return weights"""
    + FORGE_RECORD,
}

# Fits v1 to v2's outputs with a least-squares solver named at run time, and forges the record too.
FITTED_BY_BUILT_NAMES = {
    "what": "transfer_weights_v2_to_v1 fits the weights with a solver named at run time",
    "stage": 3,
    "voided": "",
    "hint": "banned-api",
    "file": "stage3_weight_transfer.py",
    "find": """            matrix.copy_(linear.weight.T)  # (d_out, d_in) -> (d_in, d_out)
    return sa_v1""",
    "replace": """            inputs = torch.eye(matrix.shape[0])
            matrix.copy_(getattr(torch.linalg, "".join(["l", "st", "sq"]))(inputs, linear(inputs)).solution)
    _forge_record({"copy_", "t"})
    return sa_v1"""
    + FORGE_RECORD,
}

# Those whose file spells none of what they reach: the source scan cannot tell, the routes switched off do.
BUILT_NAMES = [MODES_OFF_BY_BUILT_NAMES, FORGED_RECORD_BY_BUILT_NAMES, FITTED_BY_BUILT_NAMES]
ATTACKS = [
    CLEARED_RECORD,
    MODES_SWITCHED_OFF,
    FORGED_V2_RECORD,
    SOFTMAX_OUT_OF_SIGHT,
    MODES_OFF_BY_BUILT_NAMES,
    FORGED_RECORD_BY_BUILT_NAMES,
    FITTED_BY_BUILT_NAMES,
]
