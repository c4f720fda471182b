"""Learner code runs in forked workers: whatever it does, the judge gets an answer or a named failure."""

import json
import socket
import threading
import time
from pathlib import Path

import pytest
import torch

from grader.intake.submission import read_submission
from grader.judge.routes_off import SOFTMAX_OFF, SWITCHED_OFF_BY_STAGE, SWITCHED_OFF_BY_TARGET, SWITCHED_OFF_EVERYWHERE
from grader.runner.protocol import Foreign, ProtocolError, decode, encode, receive
from grader.runner.route_names import SwitchedOff
from grader.sandbox import lane_bounds
from grader.sandbox.workers import REPEAT_HANG_SECONDS, LearnerFailure, LearnerWorkers
from grader.sandbox.zygote import Sandbox
from tests.conftest import REPO

STAGE1 = (REPO / "solutions" / "stage1_softmax.py").read_text()


def submission(tmp_path: Path, stage1_prefix: str = "", stage1_body: str = STAGE1) -> Path:
    (tmp_path / "stage1_softmax.py").write_text(stage1_prefix + stage1_body)
    return tmp_path


@pytest.fixture
def workers_for():
    opened = []

    def open_workers(folder: Path, timeout: float = 10.0, budget: float = 30.0) -> LearnerWorkers:
        sandbox = Sandbox()
        opened.append((sandbox, LearnerWorkers(sandbox, read_submission(folder).files, timeout, budget=budget)))
        return opened[-1][1]

    yield open_workers
    for sandbox, workers in opened:
        workers.close()
        sandbox.close()


def scores(workers: LearnerWorkers) -> torch.Tensor:
    return workers.request(1, "recipe", name="attn_scores_2")


def test_answers_come_back_as_tensors(tmp_path, workers_for):
    result = scores(workers_for(submission(tmp_path)))
    torch.testing.assert_close(
        result, torch.tensor([0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865]), atol=1e-4, rtol=0
    )
    assert result.learner_device == "cpu" and result.learner_dtype == "float32"


@pytest.mark.parametrize(
    "prefix, kind",
    [
        ("import os\nos._exit(3)\n", "crash"),
        ("import ctypes\nctypes.string_at(0)\n", "crash"),
        ("import sys\nsys.exit(0)\n", "import_error"),
        ("while True:\n    pass\n", "timeout"),
        ("raise RuntimeError('boom')\n", "import_error"),
    ],
    ids=["os_exit", "segfault", "sys_exit", "infinite_loop", "raises"],
)
def test_hostile_imports_fail_only_the_request(tmp_path, workers_for, prefix, kind):
    workers = workers_for(submission(tmp_path, prefix), timeout=3.0)
    with pytest.raises(LearnerFailure) as failure:
        scores(workers)
    assert failure.value.kind == kind
    # The judge goes on: the next request gets a fresh worker and the same named failure.
    with pytest.raises(LearnerFailure):
        scores(workers)


def test_syntax_error_names_the_line(tmp_path, workers_for):
    (tmp_path / "stage1_softmax.py").write_text("x = 1\ndef broken(:\n")
    with pytest.raises(LearnerFailure) as failure:
        scores(workers_for(tmp_path))
    assert failure.value.kind == "import_error" and failure.value.where == "stage1_softmax.py:2"


def test_missing_stage_file_is_an_import_error_naming_it(tmp_path, workers_for):
    with pytest.raises(LearnerFailure, match="stage2_self_attention.py is missing"):
        workers_for(tmp_path).request(2, "recipe", name="sa_v1_output")


def test_huge_allocation_is_a_memory_failure_and_the_worker_survives(tmp_path, workers_for):
    body = STAGE1.replace(
        "    return inputs @ query  #", "    torch.empty(40 * 1024**3, dtype=torch.uint8)\n    return inputs @ query  #"
    )
    workers = workers_for(submission(tmp_path, stage1_body=body))
    with pytest.raises(LearnerFailure) as failure:
        scores(workers)
    assert failure.value.kind == "memory" and "can't allocate memory" in failure.value.message
    assert workers.request(1, "call", function="softmax_naive", args=[torch.zeros(2)])["result"].tolist() == [0.5, 0.5]


def test_a_hang_costs_its_time_limit_not_more(tmp_path, workers_for):
    body = STAGE1.replace("    return inputs @ query  #", "    while True:\n        pass\n    return inputs @ query  #")
    workers = workers_for(submission(tmp_path, stage1_body=body), timeout=1.0)
    started = time.monotonic()
    with pytest.raises(LearnerFailure, match="no answer within 1 s"):
        scores(workers)
    assert time.monotonic() - started < 5
    # Other functions of the stage still answer from a fresh worker.
    assert workers.request(1, "call", function="softmax_naive", args=[torch.zeros(2)])["result"].tolist() == [0.5, 0.5]


def test_after_a_hang_only_the_function_that_hung_gets_the_short_limit(tmp_path, workers_for):
    slow = "    import time\n    time.sleep(0.5)\n    exp_x = torch.exp(x)"  # slower than REPEAT_HANG_SECONDS
    body = STAGE1.replace("    return inputs @ query  #", "    while True:\n        pass\n    return inputs @ query  #")
    workers = workers_for(submission(tmp_path, stage1_body=body.replace("    exp_x = torch.exp(x)", slow)), timeout=1.0)
    with pytest.raises(LearnerFailure, match="no answer within 1 s"):
        scores(workers)
    with pytest.raises(LearnerFailure, match=f"no answer within {REPEAT_HANG_SECONDS:g} s"):
        scores(workers)  # the function that hung, again: the short limit
    assert workers.request(1, "call", function="softmax_naive", args=[torch.zeros(2)])["result"].tolist() == [0.5, 0.5]
    started = time.monotonic()
    with pytest.raises(LearnerFailure, match="not run: stage 1's code gave no answer in 2 calls already"):
        scores(workers)  # two hangs: the function's way, whatever the inputs
    assert time.monotonic() - started < REPEAT_HANG_SECONDS
    assert workers.request(1, "call", function="softmax_naive", args=[torch.zeros(2)])["result"].tolist() == [0.5, 0.5]


SLOW_SCORES = "    import time\n    time.sleep(0.5)\n    return inputs @ query  #"  # slower than REPEAT_HANG_SECONDS
HANGING_SOFTMAX = "    while True:\n        pass\n    exp_x = torch.exp(x)"
BOOK_WEIGHTS = ("attention_scores", "softmax_naive")  # what recipe attn_weights_2_naive calls, in that order


def test_a_recipe_that_hangs_counts_against_the_function_it_was_in(tmp_path, workers_for):
    body = STAGE1.replace("    exp_x = torch.exp(x)", HANGING_SOFTMAX)
    workers = workers_for(submission(tmp_path, stage1_body=body), timeout=1.0)
    # softmax_naive is looked up before attention_scores runs, and called after it: the hang is softmax_naive's
    with pytest.raises(LearnerFailure, match="softmax_naive, called by the book's code, gave no answer within 1 s"):
        workers.request(1, "recipe", calls=BOOK_WEIGHTS, name="attn_weights_2_naive")
    # A recipe's many calls share one limit, so its hang proves nothing of softmax_naive's own calls: full limit
    with pytest.raises(LearnerFailure, match="your code gave no answer within 1 s"):
        workers.request(1, "call", function="softmax_naive", args=[torch.zeros(2)])
    # The book's code that calls it again gets the short limit, then is not run
    with pytest.raises(LearnerFailure, match=f"no answer within {REPEAT_HANG_SECONDS:g} s"):
        workers.request(1, "recipe", calls=BOOK_WEIGHTS, name="attn_weights_2_naive")
    started = time.monotonic()
    with pytest.raises(LearnerFailure, match="not run: the book's code that calls softmax_naive gave no answer in 2"):
        workers.request(1, "recipe", calls=BOOK_WEIGHTS, name="attn_weights_2_naive")
    assert time.monotonic() - started < REPEAT_HANG_SECONDS
    # a recipe without it runs, with the full limit
    assert workers.request(1, "recipe", calls=("attention_scores",), name="attn_scores_2").shape == (6,)


def test_a_worker_that_names_another_function_for_a_hang_only_loses(tmp_path, workers_for):
    forge = (
        "    import json, os, stat\n"
        "    frame = json.dumps({'__dict__': [['calling', 'context_vector']]}).encode()\n"  # as the protocol has it
        "    for fd in map(int, os.listdir('/proc/self/fd')):\n"
        "        try:\n"
        "            if stat.S_ISSOCK(os.fstat(fd).st_mode):\n"
        "                os.write(fd, len(frame).to_bytes(4, 'big') + frame)\n"
        "        except OSError:\n"
        "            pass\n"
    )
    body = STAGE1.replace("    return inputs @ query  #", SLOW_SCORES).replace(
        "    exp_x = torch.exp(x)", forge + HANGING_SOFTMAX
    )
    workers = workers_for(submission(tmp_path, stage1_body=body), timeout=1.0)
    with pytest.raises(LearnerFailure, match="your code gave no answer within 1 s"):
        workers.request(1, "recipe", calls=BOOK_WEIGHTS, name="attn_weights_2_naive")
    # context_vector is not called by that recipe: the hang counts against both names it calls
    with pytest.raises(LearnerFailure, match=f"no answer within {REPEAT_HANG_SECONDS:g} s"):
        workers.request(1, "recipe", calls=("attention_scores",), name="attn_scores_2")
    context = workers.request(1, "call", function="context_vector", args=[torch.ones(2, 3), torch.ones(2)])
    assert context["result"].tolist() == [2.0, 2.0, 2.0]


def test_a_file_whose_import_hung_is_not_imported_again_in_another_worker(tmp_path, workers_for):
    workers = workers_for(submission(tmp_path, stage1_body="while True:\n    pass\n" + STAGE1), timeout=1.0)
    with pytest.raises(LearnerFailure, match="importing your file did not finish within 1 s"):
        scores(workers)
    started = time.monotonic()
    with pytest.raises(LearnerFailure, match="not run: importing your file took longer than 1 s"):
        workers.request(1, "call", function="softmax_naive", args=[torch.zeros(2)], switched_off=SOFTMAX_OFF)
    assert time.monotonic() - started < REPEAT_HANG_SECONDS


def test_all_calls_of_a_student_share_one_budget(tmp_path, workers_for):
    slow = "    import time\n    time.sleep(0.6)\n    exp_x = torch.exp(x)"
    workers = workers_for(
        submission(tmp_path, stage1_body=STAGE1.replace("    exp_x = torch.exp(x)", slow)), timeout=1.0, budget=1.6
    )
    for _ in range(2):  # the import and two calls: about 1.2 s of 1.6
        workers.request(1, "call", function="softmax_naive", args=[torch.zeros(2)])
    assert not workers.out_of_time
    with pytest.raises(LearnerFailure, match="all that was left of its 1.6 s for all calls"):
        workers.request(1, "call", function="softmax_naive", args=[torch.zeros(2)])
    with pytest.raises(LearnerFailure, match="not run: your code has used up its 1.6 s"):
        workers.request(1, "call", function="attention_scores", args=[torch.zeros(2, 3), torch.zeros(3)])
    assert workers.out_of_time and workers.not_run == 1 and 1.6 <= workers.spent < 2.5


def test_printing_fake_results_changes_nothing(tmp_path, workers_for):
    fake = 'print(json.dumps({"ok": "fake"}))\nprint("tensor([0.9544, 1.4950])")\n'
    body = STAGE1.replace(
        "    return inputs @ query  #",
        f"    import json\n    {fake.replace(chr(10), chr(10) + '    ')}return inputs @ query * 2  #",
    )
    result = scores(workers_for(submission(tmp_path, stage1_body=body)))
    assert result[0].item() == pytest.approx(2 * 0.9544, abs=1e-3)


def test_non_tensor_results_arrive_as_foreign_values(tmp_path, workers_for):
    body = STAGE1.replace("    return inputs @ query  #", "    return [1, 2]  #")
    result = scores(workers_for(submission(tmp_path, stage1_body=body)))
    assert result == Foreign("list", "[1, 2]")


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, as the host sees them."""
    found, queue = [], [pid]
    while queue:
        for task in Path(f"/proc/{queue.pop()}/task").glob("*"):
            children = [int(c) for c in (task / "children").read_text().split()]
            found += children
            queue += children
    return found


def test_the_next_student_starts_only_after_every_process_of_the_last_is_gone(tmp_path):
    (tmp_path / "first").mkdir(), (tmp_path / "second").mkdir()
    first, second = submission(tmp_path / "first"), submission(tmp_path / "second", "raise RuntimeError('second')\n")
    with Sandbox() as sandbox:
        sandbox.device  # noqa: B018 - the zygote is up
        idle = len(descendants(sandbox._zygote.pid))
        abandoned = LearnerWorkers(sandbox, read_submission(first).files, 10.0, stages=[1, 2, 3, 4, 5])  # never closed
        time.sleep(0.5)  # its workers have loaded the first student's file by now
        assert len(descendants(sandbox._zygote.pid)) == idle + 6  # the student's first process and five workers
        with LearnerWorkers(sandbox, read_submission(second).files, 10.0) as workers:
            with pytest.raises(LearnerFailure, match="second"):
                scores(workers)  # a worker of the first student would have answered
            assert len(descendants(sandbox._zygote.pid)) == idle + 2
        with sandbox.start_student({}):  # reads the zygote's "ended" for the second student first
            counts = [len(descendants(sandbox._zygote.pid))]
            while counts[-1] == idle and len(counts) < 500:  # the zygote forks the third student's first process
                time.sleep(0.01)
                counts.append(len(descendants(sandbox._zygote.pid)))
            assert set(counts) <= {idle, idle + 1} and counts[-1] == idle + 1, counts
        del abandoned


def test_decode_refuses_forged_tensors():
    good = encode(torch.arange(4.0))
    assert decode(good).tolist() == [0.0, 1.0, 2.0, 3.0]
    for forged in [
        {**good["__tensor__"], "shape": [5]},
        {**good["__tensor__"], "wire_dtype": "object"},
        {**good["__tensor__"], "shape": [2**40]},
        {**good["__tensor__"], "extra": 1},
    ]:
        with pytest.raises(ProtocolError):
            decode({"__tensor__": forged})
    with pytest.raises(ProtocolError):
        decode({"__pickle__": "gASV"})


def test_receive_refuses_oversized_and_non_json_frames():
    huge_integer = b'{"ok": ' + b"1" * 5000 + b"}"  # valid JSON that json.loads refuses (Python's digit limit)
    for frame in [
        (2**31).to_bytes(4, "big"),
        (3).to_bytes(4, "big") + b"\xff\xfe\x00",
        len(huge_integer).to_bytes(4, "big") + huge_integer,
    ]:
        left, right = socket.socketpair()
        left.sendall(frame)
        with pytest.raises(ProtocolError):
            receive(right)
        left.close(), right.close()


def test_receive_bounds_values_nesting_and_time():
    many = json.dumps([0.1] * 300_000).encode()
    deep = b"[" * 5000 + b"]" * 5000
    for body in (many, deep):
        left, right = socket.socketpair()
        sender = threading.Thread(target=left.sendall, args=(len(body).to_bytes(4, "big") + body,))
        sender.start()  # larger than the socket's buffer: sent while it is read
        with pytest.raises(ProtocolError):
            receive(right, 5.0)
        sender.join()
        left.close(), right.close()
    left, right = socket.socketpair()
    left.sendall((100).to_bytes(4, "big") + b"[")  # the rest never comes
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        receive(right, 0.3)
    assert time.monotonic() - started < 1.0
    left.close(), right.close()


def test_a_call_takes_keyword_arguments_and_bfloat16_arrives_as_bfloat16(tmp_path, workers_for):
    (tmp_path / "stage6_sdpa.py").write_text((REPO / "solutions" / "stage6_sdpa.py").read_text())
    eye = torch.eye(2, dtype=torch.bfloat16)  # the wire carries it as float64 and names its dtype
    reply = workers_for(tmp_path).request(
        6, "call", function="scaled_dot_product_attention", args=[eye, eye, eye], kwargs={"is_causal": True}
    )
    assert reply["result"].learner_dtype == "bfloat16"  # computed in bfloat16: the worker restored the dtype sent
    torch.testing.assert_close(
        reply["result"], torch.tensor([[1.0, 0.0], [0.3302, 0.6698]], dtype=torch.float64), atol=4e-3, rtol=0
    )


# Looks up names that are not there, under a read-only system folder: the kernel keeps each miss in its cache.
MISSES = """
import os as _os
_prefix = "/usr/" + "q" * 200 + _os.urandom(4).hex()
for _n in range(400_000):
    try:
        _os.stat(_prefix + str(_n))
    except OSError:
        pass
"""


def test_the_kernel_caches_a_student_fills_are_reclaimed_while_they_are_graded(tmp_path, workers_for, monkeypatch):
    monkeypatch.setattr(lane_bounds, "KERNEL_RECLAIMED_ABOVE", 64 * 1024**2)
    body = STAGE1.replace("    exp_x = torch.exp(x)", "    exec(MISSES_CODE)\n    exp_x = torch.exp(x)")
    workers = workers_for(submission(tmp_path, stage1_prefix=f"MISSES_CODE = {MISSES!r}\n", stage1_body=body))
    bound = workers.sandbox._bound
    if bound is None:
        pytest.skip("this kernel lets the grader make no cgroup")
    workers.request(1, "call", function="attention_scores", args=[torch.zeros(2, 3), torch.zeros(3)])
    before = bound.kernel_bytes()
    workers.request(1, "call", function="softmax_naive", args=[torch.zeros(2)])  # some 150 MiB of misses
    assert bound.kernel_bytes() < before + 64 * 1024**2, (before, bound.kernel_bytes())


def test_every_worker_the_judge_asks_for_runs_without_what_the_zygote_switches_off():
    for switched_off in [*SWITCHED_OFF_BY_STAGE.values(), *SWITCHED_OFF_BY_TARGET.values()]:
        assert switched_off.includes(SWITCHED_OFF_EVERYWHERE), switched_off


def test_routes_switched_off_in_the_zygote_are_off_in_every_worker_and_cannot_be_asked_back(tmp_path):
    attention = "    return torch.nn.functional.scaled_dot_product_attention(query[None], inputs, inputs)[0]  #"
    body = STAGE1.replace("    return inputs @ query  #", attention)
    with Sandbox(switched_off=SWITCHED_OFF_EVERYWHERE) as sandbox:
        files = read_submission(submission(tmp_path, stage1_body=body)).files
        with LearnerWorkers(sandbox, files, 10.0, switched_off=SWITCHED_OFF_BY_STAGE) as workers:
            with pytest.raises(LearnerFailure, match="scaled_dot_product_attention is switched off here"):
                workers.request(1, "call", function="attention_scores", args=[torch.ones(2, 3), torch.ones(3)])
            # torch's softmax (which simple_self_attention calls) is switched off in that check's worker alone
            assert workers.request(1, "recipe", name="all_context_vecs").shape == (6, 3)
            with pytest.raises(LearnerFailure, match="softmax is switched off here"):
                workers.request(1, "recipe", name="all_context_vecs", switched_off=SOFTMAX_OFF)
        with pytest.raises(ValueError, match="cannot be forked"):
            LearnerWorkers(sandbox, files, 10.0, [1], switched_off={1: SwitchedOff()})
