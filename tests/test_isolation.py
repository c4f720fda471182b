"""Hostile students in one class: each attack of the security review, graded before honest students.

One lane (--workers 1), attackers first, so that anything an attacker could leave behind meets
the students after it. Every honest student must keep full marks, no honest student's file may
appear in any other report, and each attacker gains nothing on what it targets.
"""

import ctypes
import json
import os
import platform
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from grader.sandbox.zygote import confinement
from tests.conftest import REPO
from tests.grading import batch, learner_copy, stage_scores
from tests.relay import COURSE as RELAY_COURSE
from tests.relay import relayed
from tests.tampering import ATTACKS

STAGE1 = "stage1_softmax.py"
SECRET = "HONEST-STUDENT-SECRET-7f3a"
needs_bubblewrap = pytest.mark.skipif(not confinement("auto").confined, reason="no bubblewrap here")
needs_x86_64_linux = pytest.mark.skipif(
    sys.platform != "linux" or platform.machine() != "x86_64", reason="the probes use x86_64 system call numbers"
)

# Run at import in the worker: try everything that reaches another process or outlives this one,
# then raise the list of what worked (the judge shows the message as the import error).
REACH_OUT = r"""
import ctypes, json, os, socket
libc = ctypes.CDLL(None, use_errno=True)
me = int(os.readlink("/proc/self"))  # as /proc numbers it
worked, fds = [], []

def attempt(name, action):
    try:
        result = action()
    except BaseException:
        return
    if result is None or (isinstance(result, int) and result >= 0):
        worked.append(name)

def syscall(number, *args):
    return libc.syscall(number, *[ctypes.c_long(a) for a in args])

def need(result):
    if result < 0:
        raise OSError(ctypes.get_errno(), "refused")
    return result

others = sorted(int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me)
for pid in others:
    attempt(f"kill {pid}", lambda: os.kill(pid, 0))
    siginfo = ctypes.create_string_buffer(128)
    attempt(f"rt_sigqueueinfo {pid}", lambda: need(libc.syscall(129, ctypes.c_long(pid), ctypes.c_long(0), siginfo)))
    attempt(f"pidfd_open {pid}", lambda: need(syscall(434, pid, 0)))
    attempt(f"fd list {pid}", lambda: os.listdir(f"/proc/{pid}/fd") and None)
    attempt(f"fd 0 of {pid}", lambda: open(f"/proc/{pid}/fd/0", "wb").close())
    attempt(f"mem of {pid}", lambda: open(f"/proc/{pid}/mem", "r+b").close())
    attempt(f"environ of {pid}", lambda: open(f"/proc/{pid}/environ", "rb").read() and None)
    local = (ctypes.c_char * 8)()
    iov = (ctypes.c_void_p * 2)(ctypes.addressof(local), 8)
    attempt(f"process_vm_readv {pid}", lambda: need(libc.syscall(310, ctypes.c_long(pid), iov, ctypes.c_long(1), iov, ctypes.c_long(1), ctypes.c_long(0))))
    attempt(f"ptrace {pid}", lambda: need(syscall(101, 16, pid, 0, 0)))
attempt("kill group", lambda: os.kill(0, 0))
attempt("kill everyone", lambda: os.kill(-1, 0))
attempt("fork", lambda: os.fork() and None)
attempt("unshare user", lambda: need(syscall(272, 0x10000000)))
attempt("unshare mount", lambda: need(syscall(272, 0x00020000)))
attempt("io_uring", lambda: need(libc.syscall(425, ctypes.c_long(4), ctypes.create_string_buffer(120))))
attempt("userfaultfd", lambda: need(syscall(323, 0)))
attempt("bpf", lambda: need(syscall(321, 0, 0, 0)))
attempt("perf_event_open", lambda: need(libc.syscall(298, ctypes.create_string_buffer(128), ctypes.c_long(0), ctypes.c_long(-1), ctypes.c_long(-1), ctypes.c_long(0))))
attempt("keyctl", lambda: need(syscall(250, 0, 0, 0)))
attempt("memfd_create", lambda: os.memfd_create("held"))
attempt("shmget", lambda: need(libc.shmget(0, 4096, 0o1600)))  # IPC_PRIVATE, IPC_CREAT | 0600
attempt("msgget", lambda: need(libc.msgget(0, 0o1600)))
attempt("socket", lambda: socket.socket(socket.AF_UNIX).close())
attempt("sched_setaffinity", lambda: os.sched_setaffinity(0, os.sched_getaffinity(0)))
import fcntl
for command in (fcntl.F_SETOWN, 10, 15):  # F_SETSIG, F_SETOWN_EX: the kernel signals the owner on I/O
    r, w = os.pipe()
    attempt(f"fcntl {command}", lambda: fcntl.fcntl(r, command, os.getpid() if command != 15 else b"\0" * 8) and None)
    attempt(f"ioctl FIOSETOWN", lambda: fcntl.ioctl(r, 0x8901, b"\0" * 4) and None)
    os.close(r), os.close(w)
for path in ("/grading/submission/leak", "/dev/leak", "/tmp/leak", "/var/tmp/leak", "/leak"):  # /dev/shm: the student's own
    attempt(f"write {path}", lambda: open(path, "w").write("x") and None)
# Re-plumbing the channel to the judge: a pair to relay through, or another descriptor in its place.
import stat
attempt("socketpair", lambda: [end.close() for end in socket.socketpair()] and None)
def is_socket(fd):
    try:
        return stat.S_ISSOCK(os.fstat(fd).st_mode)
    except OSError:
        return False

spare = os.open("/dev/null", os.O_RDONLY)
for channel in [fd for fd in range(3, 1024) if is_socket(fd)]:
    attempt("dup2 onto the channel", lambda: os.dup2(spare, channel))
    attempt("dup3 onto the channel", lambda: need(syscall(292, spare, channel, 0)))
    attempt("close_range over the channel", lambda: need(syscall(436, channel, channel, 4)))  # CLOSE_RANGE_CLOEXEC
    attempt("close_range from below it", lambda: need(syscall(436, min(spare, channel), 0xFFFFFFFF, 4)))
    attempt("close the channel", lambda: need(libc.close(channel)))  # had it worked, no report would arrive
os.close(spare)
for fd in range(3, 1024):
    try:
        os.fstat(fd)
        fds.append(fd)
    except OSError:
        pass
raise RuntimeError("REPORT" + json.dumps({"worked": worked, "fds": fds, "others": len(others)}))
"""

# The first of a pair of colluders: leaves what it can wherever it can, and stays behind if it can.
LEAVE_BEHIND = r"""
import ctypes, os, threading, time
libc = ctypes.CDLL(None, use_errno=True)
for path in ("leak.txt", "/dev/shm/leak", "/tmp/leak"):
    try:
        open(path, "w").write("LEFT-BEHIND")
    except OSError:
        pass
segment = libc.shmget(0x5EC2E7, 4096, 0o1666)  # IPC_CREAT | 0666
if segment >= 0:
    address = libc.shmat(segment, None, 0)
    ctypes.memmove(address, b"LEFT-BEHIND", 11)

def loot():  # copy every later student's files, for as long as this process lives
    while True:
        for root in ("/grading/submission", "/grading"):
            try:
                for name in os.listdir(root):
                    data = open(os.path.join(root, name), "rb").read()
                    open(f"loot-{name}", "wb").write(data)
            except OSError:
                pass
        time.sleep(0.01)

threading.Thread(target=loot, daemon=True).start()
"""

# The second colluder, graded after an honest student: reports whatever its partner left.
PICK_UP = r"""
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
found = []
for root in (".", "/grading", "/dev/shm", "/tmp", "/var/tmp"):
    for base, dirs, files in os.walk(root):
        if base.startswith(sys.prefix) or base.startswith(sys.base_prefix):
            dirs[:] = []  # a Python installation that happens to live under /tmp (a CI clone's .venv): not walked,
            continue  # which would take this import past its 1 s
        for name in files:
            path = os.path.join(base, name)
            try:
                text = open(path, "rb").read(4096).decode("latin-1")
            except OSError:
                continue
            if "LEFT-" + "BEHIND" in text or name in ("leak", "leak.txt") or name.startswith("loot-"):  # not this file
                found.append(path)
segment = libc.shmget(0x5EC2E7, 0, 0)
if segment >= 0:
    found.append("System V shared memory")
raise RuntimeError("REPORT" + json.dumps(found))
"""

# An exception whose class name and message are a million zero-width spaces each: the judge keeps
# what it cuts, whatever the worker sends.
HUGE_NAMES = r"""
raise type("\u200b" * 1_000_000, (Exception,), {})("\u200b" * 1_000_000)
"""

# Takes the worker's own socket to the judge and sends a 255 MiB frame of small JSON values:
# decoding them all used to take the judge past 10 GiB.
FRAME_BOMB = r"""
import os, socket
for fd in range(3, 64):
    try:
        channel = socket.socket(fileno=os.dup(fd))
    except OSError:
        continue
    size = 255 * 1024 * 1024
    body = b"[" + b"0.1," * (size // 4 - 1) + b"0.1]"
    try:
        channel.sendall(len(body).to_bytes(4, "big") + body)
    except OSError:
        pass
"""

# Announces a frame of 1 MB and sends it a byte every 0.2 s: each byte used to reset the limit.
SLOW_DRIP = r"""
import os, socket, time
for fd in range(3, 64):
    try:
        channel = socket.socket(fileno=os.dup(fd))
        channel.getsockname()
    except OSError:
        continue
    channel.sendall((1024 * 1024).to_bytes(4, "big"))
    while True:
        channel.sendall(b" ")
        time.sleep(0.2)
"""


def _attacker(folder: Path, code: str, at_import: bool = True) -> Path:
    """The solutions as learner files, with ``code`` at the top of stage 1 or inside softmax_naive."""
    learner_copy(folder)
    path = folder / STAGE1
    text = path.read_text()
    if at_import:
        text = code + "\n" + text
    else:
        anchor = "def softmax_naive(x: torch.Tensor) -> torch.Tensor:\n"
        assert anchor in text
        body = "".join(f"    {line}\n" for line in code.strip().splitlines())
        text = text.replace(anchor, anchor + body)
    path.write_text(text)
    return folder


def _honest(folder: Path) -> Path:
    learner_copy(folder)
    for stage_file in folder.glob("stage*.py"):
        stage_file.write_text(f"# {SECRET}\n" + stage_file.read_text() + f"# {SECRET}\n")
    return folder


def _probe_report(out: Path, student: str) -> object:
    """What a probe raised at import, as the judge reported it."""
    report = json.loads((out / "students" / f"{student}.json").read_text())
    message = report["stages"][0]["checks"][0]["message"]
    assert "REPORT" in message, message
    return json.JSONDecoder().raw_decode(message.split("REPORT", 1)[1])[0]


@pytest.fixture(scope="module")
def hostile_class(tmp_path_factory):
    """One lane: the attackers, each followed by an honest student, then the colluder who picks up."""
    root = tmp_path_factory.mktemp("isolation")
    submissions = root / "class"
    _attacker(submissions / "a1-reach-out", REACH_OUT)
    _honest(submissions / "a2-honest")
    _attacker(submissions / "b1-leave-behind", LEAVE_BEHIND)
    _honest(submissions / "b2-honest")
    _attacker(submissions / "b3-pick-up", PICK_UP)
    _attacker(submissions / "c1-frame-bomb", FRAME_BOMB, at_import=False)
    _honest(submissions / "c2-honest")
    _attacker(submissions / "d1-slow-drip", SLOW_DRIP, at_import=False)
    _honest(submissions / "d2-honest")
    _attacker(submissions / "e1-huge-names", HUGE_NAMES)
    for index, attack in enumerate(ATTACKS):  # hiding from the grader, or rewriting what it recorded
        learner_copy(submissions / f"f{index}-tampering", attack)
        _honest(submissions / f"f{index}-z-honest")
    out = root / "out"
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.monotonic()
    batch(submissions, out, "--workers", "1")
    return out, time.monotonic() - started, before


@needs_bubblewrap
@needs_x86_64_linux
def test_honest_students_keep_full_marks_and_their_files_stay_theirs(hostile_class):
    out, _, _ = hostile_class
    honest_students = [
        "a2-honest",
        "b2-honest",
        "c2-honest",
        "d2-honest",
        *(f"f{index}-z-honest" for index in range(len(ATTACKS))),
    ]
    for honest in honest_students:
        report = json.loads((out / "students" / f"{honest}.json").read_text())
        assert report["score"] == 100 and report["complete"], (honest, report["flags"])
    for other in out.rglob("*"):  # the history of each student too (OUT/.grader/history/<id>/)
        if other.is_file() and not any("honest" in part for part in other.relative_to(out).parts):
            assert SECRET not in other.read_text(errors="replace"), other.name


@needs_bubblewrap
@needs_x86_64_linux
def test_no_other_process_can_be_reached_from_learner_code(hostile_class):
    out, _, _ = hostile_class
    found = _probe_report(out, "a1-reach-out")
    assert found["worked"] == [], found
    assert len(found["fds"]) == 1, found  # its own channel to the judge, nothing else
    assert found["others"] <= 5, found  # the student's first process and its other four workers


@needs_bubblewrap
@needs_x86_64_linux
def test_nothing_a_student_leaves_behind_reaches_the_next(hostile_class):
    out, _, _ = hostile_class
    assert _probe_report(out, "b3-pick-up") == []


@needs_bubblewrap
@needs_x86_64_linux
def test_a_frame_bomb_costs_its_check_not_the_judges_memory(hostile_class):
    out, _, before = hostile_class
    report = json.loads((out / "students" / "c1-frame-bomb.json").read_text())
    softmax = [c for c in report["stages"][0]["checks"] if "softmax_naive" in c["id"]]
    assert all(c["status"] != "passed" for c in softmax), softmax
    assert report["complete"]
    # The largest process of the run (ru_maxrss of the children, in KiB): a worker or the judge.
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert max(peak, before) < 2 * 1024 * 1024, peak


@needs_bubblewrap
def test_hiding_from_the_grader_gains_nothing_in_a_class(hostile_class):
    out, _, _ = hostile_class
    for index, attack in enumerate(ATTACKS):
        report = json.loads((out / "students" / f"f{index}-tampering.json").read_text())
        checks = report["stages"][attack["stage"] - 1]["checks"]
        targeted = [c for c in checks if c["id"].endswith(attack["voided"])]
        assert targeted and all(c["score"] == 0 for c in targeted), (attack["what"], targeted)


@needs_bubblewrap
def test_huge_names_cost_kilobytes_in_the_report(hostile_class):
    out, _, _ = hostile_class
    assert (out / "students" / "e1-huge-names.json").stat().st_size < 100_000
    assert (out / "students" / "e1-huge-names.txt").stat().st_size < 100_000
    report = json.loads((out / "students" / "e1-huge-names.json").read_text())
    assert "\\u200b" in report["stages"][0]["checks"][0]["message"]  # escaped, and cut


@needs_bubblewrap
@needs_x86_64_linux
def test_a_slow_drip_is_cut_off_at_the_call_limit(hostile_class):
    out, seconds, _ = hostile_class
    report = json.loads((out / "students" / "d1-slow-drip.json").read_text())
    stage1 = report["stages"][0]["checks"]
    assert {c["status"] for c in stage1 if "softmax_naive" in c["id"]} == {"timeout"}, stage1
    assert stage_scores(report)[2] == 20
    assert seconds < 120, seconds  # the whole class; one drip used to cost minutes


def _children() -> list[int]:
    return [int(pid) for task in Path("/proc/self/task").iterdir() for pid in (task / "children").read_text().split()]


def _children_left_after(seconds: float) -> list[int]:
    """Reap this process's children (its own and adopted orphans) until none is left or time is up."""
    deadline = time.monotonic() + seconds
    while _children() and time.monotonic() < deadline:
        for pid in _children():
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
        time.sleep(0.05)
    return _children()


@pytest.mark.parametrize("sandbox", ["auto", "none"])
def test_a_killed_judge_leaves_no_process_and_no_folder(tmp_path, sandbox):
    """The test process adopts whatever the killed judge leaves (a subreaper) and waits for it to go."""
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    try:
        slow = _attacker(tmp_path / "slow", "import time\ntime.sleep(0.5)", at_import=False)
        temporary = tmp_path / "tmp"  # the judge's own temporary folder
        temporary.mkdir()
        judge = subprocess.Popen(
            [sys.executable, "-m", "grader", str(slow), "--sandbox", sandbox],
            cwd=REPO,
            env={**os.environ, "TMPDIR": str(temporary)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(4)  # torch imported, grading under way
        assert judge.poll() is None
        judge.send_signal(signal.SIGKILL)
        judge.wait()
        assert _children_left_after(10) == []
        assert list(temporary.iterdir()) == []
    finally:
        libc.prctl(36, 0, 0, 0, 0)


def test_unsandboxed_workers_can_neither_read_nor_change_the_reference(tmp_path):
    solutions = REPO / "solutions" / STAGE1
    before = solutions.read_bytes()
    sneak = (
        f"import sys\nsys.meta_path[:] = [f for f in sys.meta_path if 'Guard' not in type(f).__name__]\n"
        f"try:\n    open({str(solutions)!r}, 'a').write('# changed\\n')\nexcept OSError:\n    pass\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "from solutions.stage1_softmax import softmax_naive as _reference\n"
    )
    attacker = _attacker(tmp_path / "class" / "a-attacker", sneak)
    _honest(tmp_path / "class" / "b-honest")
    out = tmp_path / "out"
    batch(tmp_path / "class", out, "--workers", "1", "--sandbox", "none")
    assert solutions.read_bytes() == before
    attacked = json.loads((out / "students" / "a-attacker.json").read_text())
    if "Landlock ABI" in attacked["sandbox"]:  # else the report says this user's files were reachable
        assert stage_scores(attacked)[1] == 0, attacked["stages"][0]
    honest = json.loads((out / "students" / "b-honest.json").read_text())
    assert honest["score"] == 100 and "unsandboxed" in honest["flags"]
    assert attacker.exists()


def test_a_class_is_not_graded_unsandboxed_unless_asked(tmp_path):
    bin_dir = tmp_path / "bin"  # a PATH with python but no bwrap
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    learner_copy(tmp_path / "class" / "one")
    result = subprocess.run(
        [sys.executable, "-m", "grader", "batch", str(tmp_path / "class"), "--out", str(tmp_path / "out")],
        cwd=REPO,
        env={**os.environ, "PATH": str(bin_dir)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    assert "refusing to grade a class without a sandbox" in result.stderr and "--sandbox none" in result.stderr
    assert not (tmp_path / "out" / "students" / "one.json").exists()


@pytest.mark.parametrize("sandbox", ["auto", "none"])
def test_ctrl_c_on_a_batch_leaves_no_process_and_no_folder(tmp_path, sandbox):
    """Ctrl-C reaches the terminal's whole process group: the batch stops, and nothing stays."""
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER: whatever stays comes here
    try:
        for name in ("a", "b", "c", "d"):
            _attacker(tmp_path / "class" / name, "import time\ntime.sleep(0.3)", at_import=False)
        temporary = tmp_path / "tmp"
        temporary.mkdir()
        coordinator = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "grader",
                "batch",
                str(tmp_path / "class"),
                "--out",
                str(tmp_path / "out"),
                "--sandbox",
                sandbox,
            ],
            cwd=REPO,
            env={**os.environ, "TMPDIR": str(temporary)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        time.sleep(6)  # lanes started, students under way
        assert coordinator.poll() is None
        os.killpg(coordinator.pid, signal.SIGINT)
        assert coordinator.wait(timeout=60) == 130
        assert _children_left_after(10) == []
        assert list(temporary.iterdir()) == []
    finally:
        libc.prctl(36, 0, 0, 0, 0)


# Reads this worker's own memory (a copy of the zygote's) for the previous student's text.
HEAP_SCAN = r"""
import ctypes, os
FIRST, SECOND = b"HONEST-STUDENT-", b"SECRET-7f3a"
sink, found = os.open("scan", os.O_RDWR | os.O_CREAT), 0
for line in open("/proc/self/maps").read().splitlines():
    fields = line.split()
    if "r" not in fields[1] or (len(fields) > 5 and fields[5].startswith("[v")):
        continue
    start, end = (int(x, 16) for x in fields[0].split("-"))
    for offset in range(start, end, 16 << 20):
        size = min(end, offset + (16 << 20)) - offset
        try:  # through the kernel: an unreadable page is EFAULT, not a crash
            written = os.pwrite(sink, (ctypes.c_char * size).from_address(offset), 0)
        except OSError:
            continue
        data, at = os.pread(sink, written, 0), 0
        while (at := data.find(FIRST, at)) >= 0:  # the two halves are never joined here, so only
            at += len(FIRST)                        # another student's text can hold them together
            found += data[at:at + len(SECOND)] == SECOND
raise RuntimeError(f"REPORT{found}")
"""


@needs_bubblewrap
def test_no_student_text_is_left_in_the_memory_workers_are_forked_from(tmp_path):
    from grader.core.options import GradingOptions
    from grader.core.points import points_in_use
    from grader.intake.submission import read_submission
    from grader.judge.session import grade_each
    from grader.sandbox.zygote import Sandbox

    honest = _honest(tmp_path / "honest")
    (tmp_path / "scan").mkdir()
    (tmp_path / "scan" / STAGE1).write_text(HEAP_SCAN)
    reports = []
    with Sandbox(many_students=True) as sandbox:  # one lane: the honest student fully graded, then the scan
        grade_each(
            sandbox,
            iter([read_submission(honest), read_submission(tmp_path / "scan")]),
            reports.append,
            GradingOptions((1, 2, 3, 4, 5), points_in_use(), timeout=60.0),
        )
    assert reports[0]["score"] == 100
    message = reports[1]["stages"][0]["checks"][0]["message"]
    assert "REPORT0" in message, message


def test_each_lane_keeps_to_its_own_core(tmp_path):
    from grader.classroom.lanes import lane_cores

    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("one core: lanes share it")
    assert lane_cores(2) == [{cores[0]}, {cores[1]}] and lane_cores(1) == [None]
    for name in ("a", "b", "c"):
        (tmp_path / "class" / name).mkdir(parents=True)
        (tmp_path / "class" / name / STAGE1).write_text(
            "import os\nraise RuntimeError(f'REPORT{sorted(os.sched_getaffinity(0))}')\n"
        )
    batch(tmp_path / "class", tmp_path / "out", "--workers", "2")
    seen = [_probe_report(tmp_path / "out", name) for name in ("a", "b", "c")]
    assert all(len(found) == 1 and found[0] in cores[:2] for found in seen), seen


def test_the_references_are_covered_wherever_the_sandbox_shows_them(monkeypatch, tmp_path):
    from grader.sandbox import confinement as sandbox

    monkeypatch.setattr(sandbox, "SYSTEM_PATHS", [*sandbox.SYSTEM_PATHS, str(REPO.parent)])  # a checkout under /usr
    binds = sandbox.grading_binds("cpu")
    for package in ("solutions", "grader", "tests"):
        assert str(REPO / package) in [binds[i + 1] for i, arg in enumerate(binds) if arg == "--tmpfs"]
    site = tmp_path / "site-packages"  # a non-editable install
    for name in ("solutions", "torch", "numpy"):
        (site / name).mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [*sys.path, str(site)])
    readable = sandbox.landlock_paths()["readable"]
    assert str(site / "torch") in readable and str(site / "numpy") in readable
    assert not any(
        Path(path) in (site, site / "solutions", REPO) or (REPO / "solutions").is_relative_to(path) for path in readable
    ), readable


def test_a_judge_killed_while_its_zygote_starts_leaves_no_folder(tmp_path):
    """Unsandboxed, the zygote removes the judge's folders once the judge is gone, even when the judge is
    killed in the seconds the zygote spends importing torch."""
    judge = (
        "import os, signal, threading\n"
        "from grader.sandbox.zygote import Sandbox\n"
        "threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()\n"
        "Sandbox('cpu', 'none')\n"
    )
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    result = subprocess.run(
        [sys.executable, "-c", judge],
        cwd=REPO,
        env={**os.environ, "TMPDIR": str(temporary)},
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == -signal.SIGKILL, result.stderr
    deadline = time.monotonic() + 30
    while list(temporary.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert list(temporary.iterdir()) == []


@pytest.fixture(scope="module")
def relay_class(tmp_path_factory):
    """The relay of the security review first, honest students after it, and the same code without the relay."""
    root = tmp_path_factory.mktemp("relay")
    submissions = root / "class"
    relayed(submissions / "a1-relay", on=True)
    _honest(submissions / "a2-honest")
    relayed(submissions / "b1-same-code-without-relay", on=False)
    _honest(submissions / "b2-honest")
    out = root / "out"
    batch(submissions, out, "--workers", "1", "--course", str(RELAY_COURSE))
    return out


@needs_bubblewrap
@needs_x86_64_linux
def test_a_relay_on_the_channel_gains_nothing_and_costs_no_one_else(relay_class):
    students = ("a1-relay", "a2-honest", "b1-same-code-without-relay", "b2-honest")
    reports = {student: json.loads((relay_class / "students" / f"{student}.json").read_text()) for student in students}
    relay, alone = reports["a1-relay"], reports["b1-same-code-without-relay"]
    assert stage_scores(relay) == stage_scores(alone), (stage_scores(relay), stage_scores(alone))
    # torch's softmax and attention earn nothing, relay or not (a stage short of its maximum: under bonus stages as
    # extra credit, the total is out of the core's maximum alone)
    assert any(stage["score"] < stage["max_score"] for stage in relay["stages"])
    for honest in ("a2-honest", "b2-honest"):
        assert all(stage["score"] == stage["max_score"] for stage in reports[honest]["stages"])
        assert reports[honest]["complete"]
    assert SECRET not in (relay_class / "students" / "a1-relay.json").read_text()


# Every product of two tensors takes 0.9 s, just under the call limit, with right answers.
SLOW_EVERYWHERE = """
import time as _time
import torch as _torch
_matmul = _torch.Tensor.__matmul__
_torch.Tensor.__matmul__ = lambda a, b: (_time.sleep(0.9), _matmul(a, b))[1]
"""
BUDGET = 4.0


@needs_bubblewrap
def test_a_student_who_stalls_every_call_costs_the_class_their_budget(tmp_path):
    submissions = tmp_path / "class"
    _attacker(submissions / "a1-slow", SLOW_EVERYWHERE)
    _honest(submissions / "a2-honest")
    started = time.monotonic()
    batch(submissions, tmp_path / "out", "--workers", "1", "--budget", str(BUDGET))
    elapsed = time.monotonic() - started
    slow = json.loads((tmp_path / "out" / "students" / "a1-slow.json").read_text())
    honest = json.loads((tmp_path / "out" / "students" / "a2-honest.json").read_text())
    assert any(flag.startswith(f"out-of-time: your code used all of its {BUDGET:g} s") for flag in slow["flags"])
    assert slow["complete"] and slow["score"] < slow["max_score"]
    assert honest["score"] == honest["max_score"] and not any("out-of-time" in f for f in honest["flags"])
    # Stalled without a budget, its few hundred calls would take minutes; with it, seconds past the budget.
    assert elapsed < 60, elapsed


# Every thread the uid may have, held for as long as the student is graded; each call then takes 0.5 s,
# so that it is graded long after the other lane's student has started.
THREAD_FLOOD = """
import threading as _threading, time as _time
_threading.stack_size(64 * 1024)
_held, _stop = [], _threading.Event()
while True:
    try:
        _held.append(_threading.Thread(target=_stop.wait, daemon=True))
        _held[-1].start()
    except RuntimeError:
        break
"""
IN_A_THREAD = (
    "        thread = threading.Thread(target=len, args=((),))\n        thread.start()\n        thread.join()\n"
)
FORWARD = "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"


def _threaded(folder: Path) -> Path:
    """An honest student whose every forward starts a thread (and waits for it): correct, and full marks."""
    learner_copy(folder)
    for stage_file in folder.glob("stage[245]_*.py"):
        text = stage_file.read_text()
        assert FORWARD in text
        stage_file.write_text("import threading\n" + text.replace(FORWARD, FORWARD + IN_A_THREAD))
    return folder


@needs_bubblewrap
@needs_x86_64_linux
@pytest.mark.skipif(os.geteuid() != 0, reason="a uid per lane needs root")
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two lanes need two cores")
def test_a_lane_that_uses_up_its_uids_threads_leaves_the_other_lane_its_own(tmp_path):
    submissions = tmp_path / "class"
    attacker = _attacker(submissions / "a1-thread-flood", THREAD_FLOOD)
    for stage_file in attacker.glob("stage[245]_*.py"):
        text = stage_file.read_text()
        stage_file.write_text("import time\n" + text.replace(FORWARD, FORWARD + "        time.sleep(0.5)\n"))
    _threaded(submissions / "a2-threaded")
    batch(submissions, tmp_path / "out", "--workers", "2", "--budget", "10")
    flood = json.loads((tmp_path / "out" / "students" / "a1-thread-flood.json").read_text())
    threaded = json.loads((tmp_path / "out" / "students" / "a2-threaded.json").read_text())
    assert flood["complete"]
    assert threaded["score"] == threaded["max_score"], [
        (c["id"], c["message"]) for s in threaded["stages"] for c in s["checks"] if c["status"] != "passed"
    ]


# Each stage file holds 900 MiB for as long as its worker lives: within a worker's own limits, beyond its lane's.
MEMORY_HOG = """
_held = bytes([1]) * (900 * 1024 * 1024)
"""
# 64 KiB extended attributes on every file it may make, in its scratch folder and /dev/shm, from every worker.
XATTR_EVERYWHERE = """
import os as _os
for _folder in (".", "/dev/shm"):
    try:
        for _n in range(1024):
            _path = _os.path.join(_folder, f"x{_os.getpid()}-{_n}")
            open(_path, "w").close()
            _os.setxattr(_path, "user.fill", b"x" * 65536)
    except OSError:
        pass
"""
LANE_MEMORY = 1200 * 1024**2


def _everywhere(folder: Path, code: str) -> Path:
    """An attacker whose every stage file runs ``code`` when it is imported, and is otherwise correct."""
    learner_copy(folder)
    for stage_file in folder.glob("stage*.py"):
        stage_file.write_text(code + "\n" + stage_file.read_text())
    return folder


def _meminfo() -> dict[str, int]:
    return {line.split(":")[0]: int(line.split()[1]) * 1024 for line in Path("/proc/meminfo").read_text().splitlines()}


@needs_bubblewrap
@pytest.mark.skipif(os.geteuid() != 0, reason="a cgroup per lane needs root here")
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two lanes need two cores")
def test_a_student_who_fills_memory_is_stopped_at_their_lanes_bound_and_costs_no_one_else(tmp_path):
    """Two attackers in two lanes, honest students after and beside them. The kernel stops the workers that
    take the lane past its bound (the judge says so from the lane's own count of such kills), the kernel's
    slab grows by less than 1 GiB, and the honest students keep full marks."""
    from grader.sandbox.lane_bounds import lane_bound

    probe = lane_bound(9, LANE_MEMORY)  # made and removed here, as a lane's judge would
    if probe is None:
        pytest.skip("this kernel lets the grader make no cgroup")
    probe.remove()
    submissions = tmp_path / "class"
    _everywhere(submissions / "a1-memory-hog", MEMORY_HOG)
    _everywhere(submissions / "a2-xattr", XATTR_EVERYWHERE)
    for name in ("a3-honest", "a4-honest"):
        learner_copy(submissions / name)
    before, available, slab, stop = _meminfo(), [], [], threading.Event()

    def sample() -> None:
        while not stop.wait(0.02):
            now = _meminfo()
            available.append(now["MemAvailable"])
            slab.append(now["Slab"])

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        batch(submissions, tmp_path / "out", "--workers", "2", "--lane-memory", str(LANE_MEMORY))
    finally:
        stop.set()
        sampler.join()
    reports = {p.stem: json.loads(p.read_text()) for p in (tmp_path / "out" / "students").glob("a*.json")}
    for name in ("a3-honest", "a4-honest"):
        assert reports[name]["score"] == reports[name]["max_score"], name
    hog = reports["a1-memory-hog"]
    assert hog["complete"] and hog["score"] < hog["max_score"]
    stopped = [c["message"] for s in hog["stages"] for c in s["checks"] if "1,200 MiB of memory" in c["message"]]
    assert stopped and all("held more than the 1,200 MiB of memory they may share" in m for m in stopped)
    # Both lanes at their bounds, and the two judges beside them with torch: 900 MiB a worker, unbounded, is more.
    taken = before["MemAvailable"] - min(available)
    assert taken < 2 * LANE_MEMORY + 2 * 1024**3, f"{taken / 1024**3:.1f} GiB"
    assert max(slab) - before["Slab"] < 1024**3
