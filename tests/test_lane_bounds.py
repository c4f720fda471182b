"""A cgroup per lane (grader/sandbox/lane_bounds.py): made, entered before the first instruction, counted
from outside, removed; and --lane-memory as an instructor writes it."""

import argparse
import os
import subprocess
import sys

import pytest

from grader.cli.batch import size_in_bytes
from grader.sandbox.lane_bounds import NAME, lane_bound, remove_stranded

MiB = 1024**2


@pytest.fixture
def bound():
    made = lane_bound(7, 160 * MiB)
    if made is None:
        pytest.skip("this kernel lets the grader make no cgroup (not root, or no memory and pids controllers)")
    yield made
    made.remove()


def test_a_command_runs_inside_the_lanes_cgroups_from_its_first_instruction(bound):
    shown = subprocess.run(bound.enter_then(["cat", "/proc/self/cgroup"]), capture_output=True, text=True, check=True)
    lines = [line for line in shown.stdout.splitlines() if f"{NAME}-{os.getpid()}-7-" in line]
    assert len(lines) == len(bound.folders), shown.stdout  # memory and pids (v1), or the one v2 cgroup


def test_the_kernel_stops_a_process_past_the_bound_and_the_judge_counts_it(bound):
    assert bound.memory_kills() == 0
    held = subprocess.run(bound.enter_then([sys.executable, "-c", "x = bytes([1]) * (400 * 1024**2)"]))
    assert held.returncode == -9
    assert bound.memory_kills() == 1
    within = subprocess.run(bound.enter_then([sys.executable, "-c", "x = bytes([1]) * (40 * 1024**2)"]))
    assert within.returncode == 0 and bound.memory_kills() == 1


def test_a_lane_folder_of_a_judge_that_died_is_removed_by_the_next(bound):
    parent = bound.folders[0].parent
    gone = parent / f"{NAME}-{2**22 + 1}-0-0"  # above pid_max's default: no process has it
    gone.mkdir()
    mine = bound.folders[0]
    remove_stranded(parent)
    assert not gone.exists() and mine.exists()


def test_the_folders_are_gone_once_removed(bound):
    bound.remove()
    assert not any(folder.exists() for folder in bound.folders)


@pytest.mark.parametrize(
    ("text", "size"), [("6G", 6 * 1024**3), ("1500M", 1500 * MiB), ("1.5g", 1536 * MiB), ("300000000", 300000000)]
)
def test_lane_memory_reads_sizes_as_instructors_write_them(text, size):
    assert size_in_bytes(text) == size


@pytest.mark.parametrize(("text", "said"), [("lots", "not a size"), ("100M", "less than 256M"), ("G", "not a size")])
def test_lane_memory_refuses_what_is_no_size_in_one_line(text, said):
    with pytest.raises(argparse.ArgumentTypeError, match=said):
        size_in_bytes(text)
