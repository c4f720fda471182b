"""A worker: one process per graded stage, forked by a student's first process, serving the judge's requests."""

import inspect
import os
import socket
import sys
import traceback
from pathlib import Path

import torch

from grader.runner import confine, seccomp
from grader.runner.capture import PrintCapture, last_learner_line
from grader.runner.code_guard import guard_torch_code
from grader.runner.commands import ISOLATION_PROBE, receive_command, send_command
from grader.runner.function_probes import call_strided, input_gradients  # noqa: F401 - registers the requests
from grader.runner.implementation import load_stage
from grader.runner.operators import recorded, refuse_new
from grader.runner.probes import PROBES
from grader.runner.protocol import receive, send
from grader.runner.route_names import SwitchedOff
from grader.runner.routes import THREADS_REFUSED_BY, refusing_code_maker, switch_off, switch_off_on_import
from grader.runner.standins import install_stand_ins

REACHABLE_SHOWN = 20  # of the files the isolation probe could open, those it names (its answer is one datagram)


def run(
    stage: int,
    channel: int,
    parent: int,
    submission: Path,
    scratch: Path,
    device: str,
    uid: int | None,
    landlock: dict | None,
    stages: dict[int, dict],
    switched_off: dict | None = None,
    inherited: dict | None = None,
    record_operators: bool = False,
) -> None:
    """Confine this process (grader.runner.confine), say "ready", import the stage, then serve; for the
    stage ISOLATION_PROBE, confine it just the same, then answer which of the paths the judge names it can
    open (grader.sandbox.zygote.Sandbox._prove_isolation).

    ``channel``: the socket the judge made for this worker; ``parent``: the student's first process;
    ``uid``: the one to become (from root), or None; ``landlock``: without bubblewrap, the paths this
    worker keeps ({"readable": [...], "devices": [...]}), or None; ``stages``: every stage's module, public
    names and stand-ins, as the judge sent them (the registry itself stays out of reach); ``switched_off``:
    torch's routes this worker runs without (grader.runner.routes), for a shortcut check; ``inherited``: those
    of them the zygote switched off already, for every worker; ``record_operators``: the zygote refused no
    operator, and the judge is told which each request reached (grader.runner.operators).
    """
    confine.die_with_parent(parent)
    confine.close_descriptors(keep=[channel])  # fd 1 and 2 are /dev/null: print at the C level goes nowhere
    sys.stdout = sys.stderr = open(1, "w", closefd=False)  # until the learner's code runs (PrintCapture)
    confine.volunteer_for_oom()
    confine.drop_privileges(uid)
    confine.make_undumpable()
    os.chdir(scratch)
    torch.set_num_threads(1)
    # TF32 rounds matmul inputs to 10 bits, far coarser than the documents' 4 decimals.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    os.nice(10)  # learner code yields the CPU to the judges of other students
    if device != "cpu":  # before the per-call time limits start: CUDA and cuBLAS set up lazily, in seconds
        warm = torch.ones(2, 2, device=device)
        torch.softmax(warm @ warm, dim=-1).cpu()
    sock = socket.socket(fileno=channel)
    confine.limit_resources(device)
    if landlock is not None:
        confine.restrict_files(
            [*map(Path, landlock["readable"]), submission], [scratch], [*map(Path, landlock["devices"])]
        )
    off, inherited_off = SwitchedOff.from_wire(switched_off), SwitchedOff.from_wire(inherited)
    every = SwitchedOff(tuple({*off.routes, *inherited_off.routes}), off.kept)
    threads = not every.covers(THREADS_REFUSED_BY)  # a new thread would start with autograd on (routes)
    seccomp.forbid_new_processes(os.getpid(), channel, sockets=device != "cpu", threads=threads)
    if stage == ISOLATION_PROBE:  # confined as every worker is, and no learner code will run here
        request, _ = receive_command(sock)
        opened = confine.reachable(request["paths"]) if request else []
        send_command(sock, {"reachable": opened[:REACHABLE_SHOWN], "count": len(opened)})
        return
    # Sent before any learner code runs in this process: the judge times the import from here.
    send(sock, {"ready": True})
    install_stand_ins(stage, stages, attention_off="attention" in off.routes)
    switch_off(off, done=inherited_off)
    # torch modules imported from here on (by learner code, or by torch on its behalf) lose their routes too
    switch_off_on_import(every, after=refuse_new)
    guard_torch_code(own_code=refusing_code_maker())  # what routes switched off stays off, whoever rebuilds it
    guard = confine.guard_imports()
    capture = PrintCapture(sock, submission)
    capture.start()
    with recorded(record_operators) as reached:
        implementation, import_error = _load(submission, stage, {number: s["module"] for number, s in stages.items()})
    if record_operators:  # never on what the learner's code could leave in a set: on the zygote's word alone
        _tell_operators(sock, reached)
    send(sock, {"loaded": import_error is None, "printed_more": capture.finish()})
    if implementation is not None:
        implementation.announce = lambda public_name: send(sock, {"calling": public_name})
    serve(sock, submission, device, guard, capture, implementation, import_error, record_operators)


def serve(
    sock: socket.socket,
    submission: Path,
    device: str,
    guard: confine.ImportGuard,
    capture: PrintCapture,
    implementation,
    import_error: dict | None,
    record_operators: bool = False,
) -> None:
    """Answer requests until the judge hangs up; an import error is the answer to every request.

    What the learner's code prints while it answers reaches the judge first (grader.runner.capture);
    the answer says how many more lines it printed (``printed_more``).
    """
    while True:
        try:
            request = receive(sock)
        except ConnectionError:
            return
        capture.start()
        with recorded(record_operators) as reached:
            answer = (
                {"error": import_error}
                if import_error is not None
                else _answer(implementation, device, request, submission)
            )
        if record_operators:
            _tell_operators(sock, reached)
        if guard.attempts:  # even when the learner's code caught the ImportError
            answer = {
                "error": {
                    "kind": "forbidden_import",
                    "type": None,
                    "where": None,
                    "message": f"your code tried `import {guard.attempts[0]}`: submissions may "
                    "not use the grader, the solutions or the tests",
                }
            }
        send(sock, {**answer, "printed_more": capture.finish()})


def _tell_operators(sock: socket.socket, reached: set[str] | frozenset[str]) -> None:
    """Where operators are recorded, which ones the last request (or the import) reached, before its answer."""
    send(sock, {"operators": sorted(reached)})


def _answer(implementation, device: str, request: dict, submission: Path) -> dict:
    """The probe's result, or the error the learner's code raised. Where it raises on a GPU only, the answer
    is the CPU's, with the GPU's error beside it (``device_fallback``): device portability is a note, advice
    beyond the book, so the book's code (tensors made with torch.ones, no device=) is graded on its maths
    and the stage's note.fixed_device says what failed on the GPU."""
    probe = PROBES[request["op"]]
    try:
        return {"ok": probe(implementation, device, **request["params"])}
    except BaseException as error:  # SystemExit and friends are learner behaviour to report
        failure = describe(error, submission)
    if device == "cpu":
        return {"error": failure}
    try:
        return {"ok": probe(implementation, "cpu", **request["params"]), "device_fallback": failure}
    except BaseException as error:  # a mistake of the maths: the CPU's words, as a CPU grading gives them
        return {"error": describe(error, submission)}


def _load(submission: Path, stage: int, modules: dict[int, str]):
    try:
        implementation = load_stage(submission, stage, modules)
    except BaseException as error:  # sys.exit() at import lands here
        return None, {**describe(error, submission), "kind": "import_error"}
    if stage in implementation.problems:
        missing = not (submission / f"{modules[stage]}.py").is_file()
        return None, {
            "kind": "not_implemented" if missing else "import_error",
            "type": None,
            "message": implementation.problems[stage],
            "where": implementation.where.get(stage),
        }
    return implementation, None


def describe(error: BaseException, submission: Path) -> dict:
    message = str(error)
    if isinstance(error, AttributeError) and (stand_in := _stand_in_base(getattr(error, "obj", None), error.name)):
        message += f" (its class derives from {stand_in}, which holds the documented attributes alone)"
    if isinstance(error, NotImplementedError):
        kind = "not_implemented"
    elif isinstance(error, confine.ForbiddenImport):
        kind = "forbidden_import"
    elif isinstance(error, MemoryError) or "can't allocate memory" in message or "out of memory" in message.lower():
        kind = "memory"
    else:
        kind = "exception"
    return {"kind": kind, "type": type(error).__name__, "message": message[:800], "where": _where(error, submission)}


def _stand_in_base(obj: object, name: str | None) -> str | None:
    """The grader's stand-in among the bases of ``obj``'s class (a learner's class deriving from another stage's),
    where the class's own code never sets ``name``: the attribute was expected from the learner's own base."""
    try:
        base = next((c.__name__ for c in type(obj).__mro__[1:] if c.__name__.startswith("StandIn")), None)
        own = inspect.getsource(type(obj)) if base else ""
    except Exception:  # a learner's object that refuses to be inspected names no base
        return None
    return None if base is None or f"self.{name} =" in own or f"self.{name}=" in own else base


def _where(error: BaseException, submission: Path) -> str | None:
    """file:line of the last frame in the learner's files (or of a syntax error)."""
    if isinstance(error, SyntaxError) and error.filename:  # a file Python cannot read as text has no line
        return f"{Path(error.filename).name}:{error.lineno}" if error.lineno else Path(error.filename).name
    return last_learner_line(traceback.extract_tb(error.__traceback__), str(submission.resolve()))
