"""Submissions that rewrite what the grader records beside them: the solutions with one change each.

Learner code runs in the same worker as the grader's probes and its recorder of torch
operations, so it can reach them: through the caller's frame, or by switching PyTorch's
function and dispatch modes off. Each case has the shape of a mutant (tests/mutants.toml), so
`learner_copy` applies it.
"""

# Copies nothing, then makes the probe's record of v2's weights agree with v1's.
FORGED_V2_RECORD = {
    "stage": 3,
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
