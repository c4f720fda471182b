"""The relay of the security review: learner code that re-plumbs its worker's channel to the judge.

At import it finds the channel (the one socket it holds), keeps a copy of it, and puts one end of a
socket pair in its place; two threads then carry every frame between the judge and the serving loop,
rewriting the answers on the way: the operations recorded become a softmax written by hand. The
stage functions call torch's own softmax and attention by names built at run time, so the file
spells nothing the source scan looks for. ``relayed`` writes the same code with the relay on or off.
"""

from pathlib import Path

from tests.grading import BONUS_ON, learner_copy

RELAY = """
import json as _json, os as _os, socket as _socket, stat as _stat, threading as _threading
RELAY_ON = {on}


def _frames(sock):
    while True:
        head = b""
        while len(head) < 4:
            part = sock.recv(4 - len(head))
            if not part:
                return
            head += part
        body, size = b"", int.from_bytes(head, "big")
        while len(body) < size:
            part = sock.recv(size - len(body))
            if not part:
                return
            body += part
        yield body


FORGED = {{"ops": ["div", "exp", "matmul", "sum"], "same_parameters": True, "fixed_device_use": None}}


def _rewrite(value):  # the wire's dicts are {{"__dict__": [[key, value], ...]}}
    if isinstance(value, dict) and isinstance(value.get("__dict__"), list):
        for pair in value["__dict__"]:
            if pair[0] in FORGED:
                pair[1] = FORGED[pair[0]]
            else:
                _rewrite(pair[1])
    elif isinstance(value, list):
        for item in value:
            _rewrite(item)


def _forged(body):
    try:
        message = _json.loads(body)
    except ValueError:
        return body
    _rewrite(message)
    return _json.dumps(message).encode()


def _pump(source, sink, change):
    for body in _frames(source):
        body = change(body)
        sink.sendall(len(body).to_bytes(4, "big") + body)


def _relay():
    for fd in range(3, 64):
        try:
            if not _stat.S_ISSOCK(_os.fstat(fd).st_mode):
                continue
        except OSError:
            continue
        judge = _socket.socket(fileno=_os.dup(fd))
        ours, theirs = _socket.socketpair()
        _os.dup2(theirs.fileno(), fd)
        _threading.Thread(target=_pump, args=(judge, ours, lambda body: body), daemon=True).start()
        _threading.Thread(target=_pump, args=(ours, judge, _forged), daemon=True).start()
        return


if RELAY_ON:
    try:
        _relay()
    except OSError:
        pass  # the channel cannot be re-plumbed: the same code, without the relay
"""

# Each stage function takes torch's own route, by a name built at run time.
SHORTCUTS = {
    "stage1_softmax.py": (
        "    exp_x = torch.exp(x)\n    return exp_x / exp_x.sum(dim=0)",
        '    return getattr(torch, "".join(["soft", "max"]))(x, dim=0)',
    ),
    "stage6_sdpa.py": (
        "    weights = torch.softmax(scores, dim=-1)  # (..., L, S)",
        '    return getattr(torch.nn.functional, "".join(["scaled_dot", "_product_", "attention"]))(\n'
        "        query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,\n"
        "        enable_gqa=enable_gqa,\n"
        "    )\n"
        "    weights = torch.softmax(scores, dim=-1)",
    ),
}
COURSE = BONUS_ON  # stage 6 is a bonus stage


def relayed(folder: Path, on: bool) -> Path:
    """The solutions as learner files, taking torch's routes in stages 1 and 6, with the relay ``on`` or off."""
    learner_copy(folder)
    for name, (find, replace) in SHORTCUTS.items():
        path = folder / name
        text = path.read_text()
        assert find in text, name
        header, _, rest = text.partition("\nimport torch\n")
        path.write_text(header + "\nimport torch\n" + RELAY.format(on=on) + rest.replace(find, replace, 1))
    return folder
