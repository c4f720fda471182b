"""Say how a tensor differs from the one expected, in words a learner can act on."""

import torch

from grader.runner.protocol import Foreign


def describe_difference(actual: object, expected: torch.Tensor, tolerance: torch.Tensor) -> str | None:
    """None when ``actual`` matches ``expected`` within ``tolerance`` element-wise, else why not.

    ``tolerance`` holds one absolute tolerance per element of ``expected``; where ``expected``
    is infinite, ``actual`` must be the same infinity.
    """
    if not isinstance(actual, torch.Tensor):
        return f"expected a tensor of shape {tuple(expected.shape)}, got {describe_value(actual)}"
    if tuple(actual.shape) != tuple(expected.shape):
        return f"expected shape {tuple(expected.shape)}, got {tuple(actual.shape)}"
    if not (actual.is_floating_point() or actual.dtype in (torch.int32, torch.int64)):
        return f"expected floating-point values, got dtype {actual.dtype}"

    actual64 = actual.detach().to("cpu", torch.float64)
    if bool(((actual64 - expected).abs() <= tolerance).all()):
        return None  # every value finite and close: the common case, in four operations
    if torch.isnan(actual64).any():
        index = _first(torch.isnan(actual64))
        return f"NaN at index {index} ({int(torch.isnan(actual64).sum())} NaN values in all)"

    infinite = torch.isinf(expected)
    wrong_infinity = (infinite & (actual64 != expected)) | (~infinite & torch.isinf(actual64))
    if wrong_infinity.any():
        index = _first(wrong_infinity)
        return f"at index {index} expected {_fmt(expected[index])}, got {_fmt(actual64[index])}"

    difference = torch.where(infinite, torch.zeros_like(actual64), (actual64 - expected).abs())
    outside = difference > tolerance
    if not outside.any():
        return None
    if expected.numel() == 1:
        return f"expected {_fmt(expected.flatten()[0])}, got {_fmt(actual64.flatten()[0])}"
    index = _first(outside)
    largest = _first(difference == difference.max())
    return (
        f"{int(outside.sum())} of {expected.numel()} values differ; first at index {index}: "
        f"expected {_fmt(expected[index])}, got {_fmt(actual64[index])}; "
        f"largest difference {difference.max().item():.4g} at index {largest}"
    )


def describe_value(value: object) -> str:
    """A learner's non-tensor result in plain words: ``None``, ``a float: 0.5``."""
    if isinstance(value, Foreign):
        return value.repr if value.type == "NoneType" else f"a {value.type}: {value.repr[:80]}"
    return f"a {type(value).__name__}"


def described_call(function: str, args: list, kwargs: dict | None = None) -> str:
    """A call the judge made, in words: tensors by their shapes, ``f((6, 3), dim=0)``."""

    def shown(value: object) -> str:
        return str(tuple(value.shape)) if isinstance(value, torch.Tensor) else repr(value)

    words = [shown(a) for a in args] + [f"{name}={shown(value)}" for name, value in (kwargs or {}).items()]
    return f"{function}({', '.join(words)})"


def _first(where: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(i) for i in torch.nonzero(where)[0])


def _fmt(value: torch.Tensor) -> str:
    return f"{value.item():.6g}"
