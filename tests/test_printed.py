"""What learner code prints comes back to the judge: the first lines, escaped, bounded, cheap, even from a hang."""

import time

import pytest

from grader.sandbox.printed import MAX_COUNT, SHOWN_LINE_CHARACTERS, SHOWN_LINES, PrintedOutput
from grader.sandbox.workers import LearnerFailure
from tests.test_learner_process import STAGE1, scores, submission, workers_for  # noqa: F401 - a fixture

BODY = "    return inputs @ query  #"


def printing(code: str) -> str:
    """Stage 1 with ``code`` run first in attention_scores (the call `scores` makes)."""
    return STAGE1.replace(BODY, "".join(f"    {line}\n" for line in code.splitlines()) + BODY)


def test_a_call_prints_its_first_lines_and_counts_the_rest(tmp_path, workers_for):
    workers = workers_for(submission(tmp_path, stage1_body=printing("for i in range(25):\n    print('line', i)")))
    scores(workers)
    assert workers.printed.text().split("\n") == [f"line {i}" for i in range(10)] + ["… 15 more lines"]


def test_printing_ten_megabytes_costs_little_and_shows_ten_lines(tmp_path, workers_for):
    code = "for i in range(100_000):\n    print(i, 'x' * 100)"
    workers = workers_for(submission(tmp_path, stage1_body=printing(code)), timeout=5.0)
    scores(workers)  # the first call also imports the file
    workers.printed.reset()
    started = time.monotonic()
    scores(workers)
    assert time.monotonic() - started < 1.0
    lines = workers.printed.text().split("\n")
    assert len(lines) == SHOWN_LINES + 1 and lines[-1] == f"… {100_000 - SHOWN_LINES} more lines"


def test_what_was_printed_before_a_hang_survives_it(tmp_path, workers_for):
    workers = workers_for(
        submission(tmp_path, stage1_body=printing("print('before the loop')\nwhile True:\n    pass")), timeout=1.0
    )
    with pytest.raises(LearnerFailure) as failure:
        scores(workers)
    assert failure.value.kind == "timeout"
    assert workers.printed.text() == "before the loop" and not workers.printed.a_lot


def test_a_hang_that_prints_without_end_is_marked_as_printing_a_lot(tmp_path, workers_for):
    workers = workers_for(submission(tmp_path, stage1_body=printing("while True:\n    print('again')")), timeout=1.0)
    with pytest.raises(LearnerFailure):
        scores(workers)
    assert workers.printed.a_lot
    assert workers.printed.text().split("\n") == ["again"] * SHOWN_LINES + ["… and more"]


def test_prints_at_import_and_control_characters_arrive_escaped(tmp_path, workers_for):
    workers = workers_for(submission(tmp_path, "print('\\x1b[2J\\u202eat import\\r<script>')\n"))
    scores(workers)
    assert workers.printed.text() == "\\x1b[2J\\u202eat import\\r<script>"


def test_a_closed_or_replaced_stdout_does_not_stop_the_next_call_from_being_heard(tmp_path, workers_for):
    code = "import io, sys\nprint('heard')\nsys.stdout.close()\nsys.stderr = io.StringIO()"
    workers = workers_for(submission(tmp_path, stage1_body=printing(code)))
    for _ in range(2):
        workers.printed.reset()
        scores(workers)
        assert workers.printed.text() == "heard"


def test_the_judge_bounds_what_a_worker_sends():
    printed = PrintedOutput()
    printed.add(["x" * 5000, *["y"] * 50, ""])
    printed.add_unsent(10**15)
    lines = printed.text().split("\n")
    assert lines[0] == "x" * SHOWN_LINE_CHARACTERS + "…" and len(lines) == SHOWN_LINES + 1
    assert lines[-1] == f"… {51 - SHOWN_LINES + MAX_COUNT} more lines"
    for forged in ("text", [1, 2], None):
        with pytest.raises(ValueError):
            printed.add(forged)
    for not_a_count in (-5, True, "9", 2.5):
        empty = PrintedOutput()
        empty.add_unsent(not_a_count)
        assert empty.text() == "" and not empty.a_lot


def test_a_stage_whose_worker_runs_with_routes_off_still_shows_what_its_file_prints_on_import(tmp_path):
    from tests.grading import grade, learner_copy

    folder = learner_copy(tmp_path / "submission", stages=[2])
    stage2 = folder / "stage2_self_attention.py"
    wrong = stage2.read_text().replace("return attn_weights @ values", "return 2 * attn_weights @ values")
    stage2.write_text('print("PRINTED AT IMPORT")\n' + wrong)
    result, _ = grade(folder, "--stage", "2")
    assert "PRINTED AT IMPORT" in result.stdout  # stage 2's own worker runs without torch's attention
