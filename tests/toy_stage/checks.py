"""Stage @N@, a toy: one visible check and one hidden."""

import torch

from grader.judge.checks.support import call, check, expect_close, generator

STAGE = @N@


@check("document.double", visible=True, target="double")
def test_document_double(learner):
    expect_close(call(learner, STAGE, "double", torch.tensor([1.0, 2.5])), torch.tensor([2.0, 5.0]), "double([1, 2.5])")


@check("random.double", target="double")
def test_random_double(learner):
    x = torch.rand(3, 4, generator=generator("random.double"))
    expect_close(call(learner, STAGE, "double", x), x * 2, "double on a (3, 4) tensor")
