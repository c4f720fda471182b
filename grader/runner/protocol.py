"""The wire format between judge and worker: length-prefixed JSON, tensors as raw bytes.

No pickle: decoding what a worker sends can never run code. Decoding bounds the frame's bytes,
the objects it may hold and their nesting, checks every tensor's dtype, shape and byte count, and
a frame must arrive whole before its deadline, so a hostile worker can at worst send wrong data,
late, and be cut off.
"""

import base64
import json
import math
import socket
import time
from dataclasses import dataclass

import numpy as np
import torch

from grader.runner.escaping import printable

# The largest answer a check asks for is a few hundred kilobytes; a frame is bounded far above
# that, and so is what decoding it may build: each JSON value costs a Python object.
MAX_FRAME_BYTES = 32 * 1024 * 1024
MAX_FRAME_VALUES = 200_000
MAX_NESTING = 32
MAX_TENSOR_ELEMENTS = 4 * 1024 * 1024
MAX_DIMS = 8
# A learner's text (a message, a repr, a name) is cut here before anything else looks at it.
MAX_TEXT = 2000
WIRE_DTYPES = {
    "float16": torch.float16,
    "float32": torch.float32,
    "float64": torch.float64,
    "int8": torch.int8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "uint8": torch.uint8,
    "bool": torch.bool,
}


class ProtocolError(Exception):
    """A frame that is not a well-formed message: the worker is treated as crashed."""


@dataclass(frozen=True)
class Foreign:
    """A learner value that is not a tensor: only its type name and a short repr cross over."""

    type: str
    repr: str


def encode(value: object) -> object:
    """A JSON-ready form of tensors, Foreign values and plain containers."""
    if isinstance(value, torch.Tensor):
        return {"__tensor__": _encode_tensor(value)}
    if isinstance(value, Foreign):
        return {"__foreign__": [value.type, value.repr]}
    if isinstance(value, dict):
        return {"__dict__": [[str(k), encode(v)] for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return {"__foreign__": [type(value).__qualname__, _short_repr(value)]}


def decode(value: object, depth: int = 0) -> object:
    """The inverse of encode, for data from an untrusted worker."""
    if depth > MAX_NESTING:
        raise ProtocolError(f"values nested deeper than {MAX_NESTING}")
    if isinstance(value, list):
        return [decode(v, depth + 1) for v in value]
    if isinstance(value, str):
        return _text(value)
    if not isinstance(value, dict):
        return value
    if len(value) != 1:
        raise ProtocolError("a tagged value has exactly one key")
    ((tag, body),) = value.items()
    if tag == "__tensor__":
        return _decode_tensor(body)
    if tag == "__foreign__" and isinstance(body, list) and len(body) == 2 and all(isinstance(s, str) for s in body):
        return Foreign(_text(body[0][:200]), _text(body[1][:500]))
    if tag == "__dict__" and isinstance(body, list):
        if not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in body):
            raise ProtocolError("malformed dict")
        return {_text(key): decode(item, depth + 1) for key, item in body}
    raise ProtocolError(f"unknown tag {tag!r}")


def send(sock: socket.socket, message: object) -> None:
    data = json.dumps(encode(message), allow_nan=True).encode("utf-8")
    if len(data) > MAX_FRAME_BYTES:
        data = json.dumps(
            encode(
                {
                    "error": {
                        "kind": "exception",
                        "type": "ResultTooLarge",
                        "message": f"the result is {len(data)} bytes",
                        "where": None,
                    }
                }
            )
        ).encode()
    sock.sendall(len(data).to_bytes(4, "big") + data)


def receive(sock: socket.socket, seconds: float | None = None) -> object:
    """One message, whole within ``seconds`` (None: no limit); TimeoutError past it, ConnectionError
    at end of stream, ProtocolError for a frame too large, too rich or malformed."""
    deadline = None if seconds is None else time.monotonic() + seconds
    length = int.from_bytes(_read_exactly(sock, 4, deadline), "big")
    if length > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {length} bytes")
    data = _read_exactly(sock, length, deadline)
    # Every JSON value but the first is preceded by a comma, a colon or an opening bracket.
    values = data.count(b",") + data.count(b":") + data.count(b"[") + data.count(b"{")
    if values > MAX_FRAME_VALUES:
        raise ProtocolError(f"frame of about {values} values")
    try:
        message = json.loads(data)
    except (ValueError, RecursionError) as error:  # malformed text, an integer past Python's 4300 digits, ...
        raise ProtocolError(f"not JSON: {type(error).__name__}") from None
    try:
        return decode(message)
    except ProtocolError:
        raise
    except (ValueError, TypeError, KeyError, OverflowError) as error:  # a malformed body (base64, shape)
        raise ProtocolError(f"malformed value: {type(error).__name__}") from None


def _read_exactly(sock: socket.socket, count: int, deadline: float | None) -> bytes:
    """``count`` bytes; the deadline bounds the whole read, however slowly they drip in."""
    chunks, remaining = [], count
    while remaining:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the answer did not arrive in time")
            sock.settimeout(left)
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            raise ConnectionError("the worker closed the connection")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _encode_tensor(tensor: torch.Tensor) -> dict:
    tensor = tensor.detach()
    dtype = str(tensor.dtype).removeprefix("torch.")
    wire = tensor.to("cpu")
    if dtype not in WIRE_DTYPES:  # e.g. bfloat16 or complex: send float64, keep the true name
        wire = wire.real.to(torch.float64) if wire.is_complex() else wire.to(torch.float64)
    wire_dtype = str(wire.dtype).removeprefix("torch.")
    return {
        "dtype": dtype,
        "wire_dtype": wire_dtype,
        "device": str(tensor.device),
        "shape": list(wire.shape),
        "data": base64.b64encode(wire.contiguous().numpy().tobytes()).decode("ascii"),
    }


def _decode_tensor(body: object) -> torch.Tensor:
    if not isinstance(body, dict) or set(body) != {"dtype", "wire_dtype", "device", "shape", "data"}:
        raise ProtocolError("malformed tensor")
    shape, wire_dtype = body["shape"], body["wire_dtype"]
    if wire_dtype not in WIRE_DTYPES or not isinstance(shape, list) or len(shape) > MAX_DIMS:
        raise ProtocolError("tensor dtype or rank not allowed")
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise ProtocolError("tensor shape must be non-negative integers")
    count = math.prod(shape)
    if count > MAX_TENSOR_ELEMENTS:
        raise ProtocolError(f"tensor of {count} elements")
    raw = base64.b64decode(body["data"], validate=True)
    itemsize = torch.empty(0, dtype=WIRE_DTYPES[wire_dtype]).element_size()
    if len(raw) != count * itemsize:
        raise ProtocolError("tensor byte count does not match its shape")
    array = np.frombuffer(raw, dtype=np.dtype(wire_dtype)).reshape(shape)
    tensor = torch.from_numpy(array.copy())
    # Where the learner's tensor lived and its dtype matter for feedback; the values are on the CPU.
    tensor.learner_device = _text(str(body["device"])[:32])
    tensor.learner_dtype = _text(str(body["dtype"])[:32])
    return tensor


def _text(value: str) -> str:
    """A learner's string as the judge keeps it: cut to MAX_TEXT, then escaped."""
    if len(value) > MAX_TEXT:
        value = value[:MAX_TEXT] + f"… ({len(value) - MAX_TEXT} more characters)"
    return printable(value, keep_newlines=False)


def _short_repr(value: object) -> str:
    try:
        return repr(value)[:500]
    except Exception:  # a learner object whose __repr__ fails
        return "<unprintable>"
