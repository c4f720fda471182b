"""What learner code can see and do while it is graded, with and without bubblewrap."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.intake.submission import read_submission
from grader.runner.zygote import TORCH_LAZY_IMPORTS
from grader.sandbox import confinement as confinement_module
from grader.sandbox import zygote as sandbox_module
from grader.sandbox.workers import LearnerFailure, LearnerWorkers
from grader.sandbox.zygote import Sandbox, confinement
from tests.conftest import REPO
from tests.grading import batch, grade, learner_copy, stage_scores, verdicts
from tests.hostile import STAGE1, hostile_cases, write_hostile

BUBBLEWRAP = confinement("auto")
needs_bubblewrap = pytest.mark.skipif(not BUBBLEWRAP.confined, reason=f"no sandbox here: {BUBBLEWRAP.detail}")
HANG_SECONDS = 2.0

# Each probe runs at import in the sandbox and reports what happened; the module then raises
# the report, which comes back to the judge as the import error's message.
SANDBOX_PROBE = """
import json, os, socket
_seen = {}
def _try(name, action):
    try:
        _seen[name] = repr(action())
    except BaseException as error:
        _seen[name] = type(error).__name__
_try("read_solutions", lambda: open(REPO + "/solutions/stage1_softmax.py").read())
_try("read_checks", lambda: os.listdir(REPO + "/grader/judge/checks"))
_try("read_document_values", lambda: open(REPO + "/grader/judge/document_values.toml").read())
_try("write_repository", lambda: open(REPO + "/written.txt", "w").write("x"))
_try("write_system", lambda: open("/usr/written.txt", "w").write("x"))
_try("write_submission", lambda: open("/grading/submission/written.txt", "w").write("x"))
_try("write_scratch", lambda: open("written.txt", "w").write("x"))
_try("network", lambda: socket.create_connection(("1.1.1.1", 53), timeout=2))
_try("fork", os.fork)
_try("signal_the_zygote", lambda: os.kill(os.getppid(), 9))
_try("processes", lambda: len([p for p in os.listdir("/proc") if p.isdigit()]))
_try("command_lines", lambda: b"".join(open(f"/proc/{p}/cmdline", "rb").read() for p in os.listdir("/proc") if p.isdigit()))
raise RuntimeError(json.dumps(_seen))
"""


@pytest.fixture
def sandbox():
    with Sandbox() as opened:
        yield opened


def import_report(sandbox: Sandbox, folder: Path) -> dict:
    with (
        LearnerWorkers(sandbox, read_submission(folder).files, timeout=10.0) as learner,
        pytest.raises(LearnerFailure) as failure,
    ):
        learner.request(1, "call", function="softmax_naive", args=[])
    return json.loads(failure.value.message.split("RuntimeError: ", 1)[1])


@needs_bubblewrap
def test_the_sandbox_hides_the_grader_and_confines_writes(tmp_path, sandbox):
    (tmp_path / STAGE1).write_text(f"REPO = {str(REPO)!r}\n" + SANDBOX_PROBE)
    seen = import_report(sandbox, tmp_path)
    assert seen["read_solutions"] == seen["read_document_values"] == "FileNotFoundError", seen
    assert seen["read_checks"] == "FileNotFoundError", seen
    assert seen["write_repository"] == seen["write_system"] == seen["write_submission"] == "OSError", seen
    assert seen["write_scratch"] == "1", seen  # the one writable place
    assert seen["network"] in ("OSError", "PermissionError"), seen  # no route out; on the CPU, no socket at all
    assert seen["fork"] == seen["signal_the_zygote"] == "PermissionError", seen
    assert int(seen["processes"]) <= 4, seen  # bubblewrap's init, the zygote, this worker
    # what any process may read of the others: no part of the grader's options (the allowlist, the routes off)
    assert "grader.runner.zygote" in seen["command_lines"] and "aten" not in seen["command_lines"], seen
    assert "switched_off" not in seen["command_lines"] and "operators" not in seen["command_lines"], seen
    assert not (REPO / "written.txt").exists() and not (tmp_path / "written.txt").exists()
    assert sandbox.alive


def test_a_first_call_pays_no_import_torch_makes_lazily(tmp_path, sandbox):
    """torch.broadcast_shapes imports sympy on its first call (0.5 s), torch.testing.assert_close
    torch.distributed.tensor: a right answer's first call must not pay that against its time limit."""
    (tmp_path / STAGE1).write_text(
        "import json, sys\n"
        "import torch\n"
        f"missing = [name for name in {TORCH_LAZY_IMPORTS!r} if name not in sys.modules]\n"
        "raise RuntimeError(json.dumps({'missing': missing}))\n"
    )
    assert TORCH_LAZY_IMPORTS and import_report(sandbox, tmp_path) == {"missing": []}


def test_workers_refuse_new_processes_even_unsandboxed(tmp_path):
    # Unsandboxed, the file system is open (the flag says so): point the probe at a decoy.
    (tmp_path / STAGE1).write_text(f"REPO = {str(tmp_path / 'decoy')!r}\n" + SANDBOX_PROBE)
    with Sandbox(mode="none") as unsandboxed:
        seen = import_report(unsandboxed, tmp_path)
        assert seen["fork"] == seen["signal_the_zygote"] == "PermissionError", seen
        assert unsandboxed.alive


def test_scratch_is_emptied_between_students(tmp_path, sandbox):
    writer, reader = tmp_path / "writer", tmp_path / "reader"
    writer.mkdir(), reader.mkdir()
    (writer / STAGE1).write_text("open('left-behind.txt', 'w').write('x')\nraise RuntimeError('{}')\n")
    (reader / STAGE1).write_text("import json, os\nraise RuntimeError(json.dumps({'seen': os.listdir('.')}))\n")
    import_report(sandbox, writer)
    assert import_report(sandbox, reader) == {"seen": []}


# Files carrying 64 KiB user.* extended attributes, in the scratch folder and /dev/shm, until the kernel
# refuses: the values sit in kernel memory that no size= or per-process limit counts.
XATTR_FLOOD = """
import json, os
CAP = 64 * 1024 * 1024  # far beyond the bound: without one, the flood stops here
held = {}
for folder in (".", "/dev/shm"):
    held[folder] = 0
    try:
        for n in range(CAP // 65536):
            path = os.path.join(folder, f"x{n}")
            open(path, "w").close()
            os.setxattr(path, "user.fill", b"x" * 65536)
            held[folder] += 65536
    except OSError:
        pass
raise RuntimeError(json.dumps(held))
"""


@needs_bubblewrap
def test_extended_attributes_cannot_fill_the_kernels_memory(tmp_path, sandbox):
    (tmp_path / STAGE1).write_text(XATTR_FLOOD)
    held = import_report(sandbox, tmp_path)
    assert set(held) == {".", "/dev/shm"}
    assert all(value <= 8 * 1024 * 1024 for value in held.values()), held  # 4096 inodes of 1 KiB each
    assert sandbox.alive


@pytest.fixture(scope="module")
def hostile_class(tmp_path_factory):
    """One batch: a correct submission, every hostile one, and another correct one."""
    root = tmp_path_factory.mktemp("hostile")
    outside = root / "outside"
    outside.mkdir()
    submissions = root / "class"
    learner_copy(submissions / "0-correct")
    cases = hostile_cases(outside)
    for case in cases:
        write_hostile(submissions / case.name, case)
    learner_copy(submissions / "z-correct")
    out = root / "out"
    batch(submissions, out, "--timeout", str(HANG_SECONDS))
    return cases, out, outside


@pytest.mark.parametrize("name", [case.name for case in hostile_cases(Path("/nowhere"))])
def test_a_hostile_submission_costs_only_what_it_touches(hostile_class, name):
    cases, out, _ = hostile_class
    case = next(c for c in cases if c.name == name)
    report = json.loads((out / "students" / f"{name}.json").read_text())
    scores = stage_scores(report)
    assert {s: scores[s] for s in (2, 3, 4, 5)} == {2: 20, 3: 20, 4: 20, 5: 20}, scores
    stage1 = report["stages"][0]["checks"]
    if case.harmless:
        assert scores[1] == 20, stage1
    elif case.at_import:
        assert scores[1] == 0, stage1
    else:  # only attention_scores misbehaves: softmax_naive still earns its points
        assert 0 < scores[1] < 20, stage1
    if case.hint:
        assert case.hint in {c["hint"] for c in stage1}, stage1


def test_hostile_classmates_change_no_one_elses_result(hostile_class, tmp_path):
    _, out, _ = hostile_class
    first, last = (
        verdicts(json.loads((out / "students" / f"{name}.json").read_text())) for name in ("0-correct", "z-correct")
    )
    _, alone = grade(learner_copy(tmp_path / "alone"))
    assert first == last == alone
    assert first["score"] == 100


@needs_bubblewrap
def test_writes_outside_the_scratch_folder_never_land(hostile_class):
    _, _, outside = hostile_class
    assert list(outside.iterdir()) == []


def test_forbidden_imports_cost_the_stage_that_tried(tmp_path):
    folder = learner_copy(tmp_path / "submission")
    for name, sneak in [
        ("stage2_self_attention.py", "from solutions.stage2_self_attention import SelfAttention_v1 as _reference\n"),
        ("stage4_causal_attention.py", "try:\n    import grader.judge.checks\nexcept ImportError:\n    pass\n"),
        (
            "stage5_multihead_attention.py",
            "import importlib\n_values = lambda: importlib.import_module('grader')\n_values()\n",
        ),
    ]:
        (folder / name).write_text(sneak + (folder / name).read_text())
    _, report = grade(folder)
    assert stage_scores(report) == {1: 20, 2: 0, 3: 20, 4: 0, 5: 0}
    for stage in (2, 4, 5):
        hints = {c["hint"] for c in report["stages"][stage - 1]["checks"]}
        assert hints == {"forbidden-import"}, (stage, hints)


def test_only_the_five_stage_files_are_taken(tmp_path):
    folder = learner_copy(tmp_path / "submission")
    planted = {
        "conftest.py": "import os\nos._exit(1)\n",
        "pytest.ini": "[pytest]\naddopts = --co\n",
        "sitecustomize.py": "import os\nos._exit(1)\n",
        "evil.pth": "import os; os._exit(1)\n",
        "helpers.py": "raise SystemExit\n",
        "nested/stage1_softmax.py": "raise SystemExit\n",  # deeper than the real one: not taken
    }
    for name, text in planted.items():
        (folder / name).parent.mkdir(exist_ok=True)
        (folder / name).write_text(text)
    (folder / "linked.py").symlink_to(REPO / "solutions" / "stage1_softmax.py")
    _, report = grade(folder)
    assert report["score"] == 100
    ignored = next(f for f in report["flags"] if f.startswith("ignored: "))
    for name in [*planted, "linked.py (a symbolic link)"]:
        assert name in ignored, ignored


def test_a_stage_file_that_is_a_link_is_not_followed(tmp_path):
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / STAGE1).symlink_to(REPO / "solutions" / STAGE1)
    _, report = grade(folder, "--stage", "1")
    assert report["score"] == 0
    assert f"{STAGE1} (a symbolic link)" in " ".join(report["flags"])


def test_unsandboxed_grading_says_so_in_every_report(tmp_path):
    folder = learner_copy(tmp_path / "class" / "submission", stages=[1])  # a class folder apart from OUT
    result, report = grade(folder, "--stage", "1", "--sandbox", "none", "--gradescope", str(tmp_path / "gs.json"))
    assert "unsandboxed" in report["flags"] and "turned off" in report["sandbox"]
    assert "unsandboxed" in result.stdout
    assert "unsandboxed" in json.loads((tmp_path / "gs.json").read_text())["output"]
    out = tmp_path / "out"
    batch(folder.parent, out, "--sandbox", "none")
    assert "unsandboxed" in (out / "grades.csv").read_text().splitlines()[1]
    assert "unsandboxed" in (out / "students" / "submission.txt").read_text()


@needs_bubblewrap
def test_sandboxed_grading_carries_no_unsandboxed_flag(tmp_path):
    _, report = grade(learner_copy(tmp_path / "submission", stages=[1]), "--stage", "1")
    assert "unsandboxed" not in report["flags"] and report["sandbox"].startswith(
        "bubblewrap; a PID namespace per student"
    )


def test_without_bubblewrap_the_grader_says_why_and_can_insist(tmp_path):
    bin_dir = tmp_path / "bin"  # a PATH with python but no bwrap
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    environment = {**os.environ, "PATH": str(bin_dir)}
    folder = learner_copy(tmp_path / "submission", stages=[1])
    command = [sys.executable, "-m", "grader", str(folder), "--stage", "1", "--json", str(tmp_path / "r.json")]
    result = subprocess.run(command, cwd=REPO, env=environment, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert "unsandboxed" in report["flags"] and "apt-get install bubblewrap" in report["sandbox"]
    insisted = subprocess.run(
        [*command, "--sandbox", "bwrap"], cwd=REPO, env=environment, capture_output=True, text=True, timeout=300
    )
    assert insisted.returncode == 2 and "bubblewrap is not installed" in insisted.stderr
    assert shutil.which("bwrap", path=str(bin_dir)) is None


HUGE_PAGE_PROBE = """
import json
rollup = open("/proc/self/smaps_rollup").read().split()
raise RuntimeError(json.dumps({"huge_kib": int(rollup[rollup.index("AnonHugePages:") + 1])}))
"""


def test_a_sandbox_for_a_class_forks_its_workers_from_huge_pages(tmp_path):
    # What the zygote has after importing torch: can this kernel move it?
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import torch\nfrom grader.runner.hugepages import "
            "collapse_into_huge_pages\nprint(collapse_into_huge_pages())",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    if int(probe.stdout) == 0:
        pytest.skip("this kernel does not move memory into huge pages (Linux 6.1+ with transparent huge pages)")
    (tmp_path / "class" / "probe").mkdir(parents=True)
    (tmp_path / "class" / "probe" / STAGE1).write_text(HUGE_PAGE_PROBE)
    batch(tmp_path / "class", tmp_path / "out")
    message = json.loads((tmp_path / "out" / "students" / "probe.json").read_text())["stages"][0]["checks"][0][
        "message"
    ]
    # The zygote moves ~110 MB; a worker's own writes have split some of it by the time it looks.
    said = message.split("RuntimeError: ", 1)[1].rpartition(" (")[0]  # the learner's line where it raised, after
    assert json.loads(said)["huge_kib"] >= 16 * 1024
    if "[always]" not in Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text():
        with Sandbox() as for_one:  # one submission forks five workers: not worth the move
            assert import_report(for_one, tmp_path / "class" / "probe")["huge_kib"] < 16 * 1024


def test_the_copy_of_the_grader_in_use_is_probed_first(tmp_path, monkeypatch):
    # Another copy whose path sorts first (as a checkout in /a would before /tmp/autograder/source): a failed
    # probe names at most a few files, and those must be of the reference that grades.
    other = tmp_path / "aaa"
    for package in confinement_module.HIDDEN_PACKAGES:
        (other / package).mkdir(parents=True)
        (other / package / "x.py").write_text("")
    monkeypatch.syspath_prepend(str(other))
    hidden = confinement_module.hidden_paths()
    assert any(path.is_relative_to(other) for path in hidden)
    assert hidden[0].is_relative_to(confinement_module.REPO.resolve())
    assert confinement_module.probe_paths()[0].startswith(str(confinement_module.REPO.resolve()))


def test_a_sandbox_left_by_a_judge_killed_while_bwrap_started_is_ended_by_the_next():
    """bubblewrap#633: bwrap's inner process waits forever when its judge dies in bwrap's first milliseconds.
    Stand-ins named bwrap, with a zygote's options, show the next judge ends the one whose judge is gone
    and leaves the one whose judge lives."""
    gone = subprocess.Popen(["true"])
    gone.wait()

    def stand_in(judge: int) -> subprocess.Popen:
        return subprocess.Popen(
            [
                "bash",
                "-c",
                'exec -a bwrap "$0" -c "import time; time.sleep(120)" -m grader.runner.zygote "$1"',
                sys.executable,
                str(judge),
            ]
        )

    stranded, running = stand_in(gone.pid), stand_in(os.getpid())
    try:
        deadline = time.monotonic() + 10  # until both show their new names
        while time.monotonic() < deadline and not all(
            Path(f"/proc/{p.pid}/cmdline").read_bytes().startswith(b"bwrap\0") for p in (stranded, running)
        ):
            time.sleep(0.05)
        assert sandbox_module.end_stranded_sandboxes() >= 1
        assert stranded.wait(timeout=10) == -9
        assert running.poll() is None
    finally:
        for process in (stranded, running):
            process.kill()
            process.wait()
