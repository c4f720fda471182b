"""Record which torch operations learner code reaches, however it spells them.

A function mode sees torch.softmax, F.softmax, Tensor.softmax, aliases and getattr tricks alike;
a dispatch mode sees the aten kernels underneath, which catches torch.ops.aten.* and
nn.Softmax as well. Together they name every route to a banned operation.
"""

from contextlib import contextmanager

from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

# What each exercise builds by hand, and the torch operations that would do it for them.
SOFTMAX = {"softmax", "_softmax", "log_softmax", "_log_softmax", "special_softmax", "_safe_softmax"}
ATTENTION = {
    "scaled_dot_product_attention",
    "_scaled_dot_product_attention_math",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
    "multi_head_attention_forward",
    "_native_multi_head_attention",
    # the kernels beneath, callable as torch.ops.aten.* on the devices that have them
    "_scaled_dot_product_fused_attention_overrideable",
    "_scaled_dot_product_attention_math_for_mps",
    "_flash_attention_forward",
    "_flash_attention_forward_no_dropout_inplace",
    "_efficient_attention_forward",
    "_triton_scaled_dot_attention",
    "_triton_multi_head_attention",
}


class _FunctionRecorder(TorchFunctionMode):
    def __init__(self, seen: set[str]):
        super().__init__()
        self.seen = seen

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.seen.add(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


class _DispatchRecorder(TorchDispatchMode):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Recording never runs under torch.compile; without this, the first recorded op imports
        # all of torch._dynamo (about a second in every worker) only to mark this method.
        return False

    def __init__(self, seen: set[str]):
        super().__init__()
        self.seen = seen

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.add(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


@contextmanager
def recording(enabled: bool = True):
    """Yields a set that fills with the names of the torch operations run inside the block.

    When not ``enabled`` the set stays empty and nothing is intercepted (no overhead).
    """
    seen: set[str] = set()
    if not enabled:
        yield seen
        return
    with _FunctionRecorder(seen), _DispatchRecorder(seen):
        yield seen
