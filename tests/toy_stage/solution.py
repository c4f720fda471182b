"""Stage @N@, a toy: twice a tensor."""

import torch


def double(x: torch.Tensor) -> torch.Tensor:
    """``x`` times two, any shape."""
    ### BEGIN SOLUTION
    return x * 2
    ### END SOLUTION
