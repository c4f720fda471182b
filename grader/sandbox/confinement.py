"""What confines a student's workers: bubblewrap where it works (its binds: the system and Python read-only,
the runner package, a size-limited scratch), else Landlock and an unprivileged uid ("isolated"), else
nothing, said so. Standard library only, like the zygote's client."""

import functools
import glob
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from grader.runner.commands import MAX_COMMAND_BYTES

REPO = Path(__file__).resolve().parents[2]
INSIDE = Path("/grading")
SCRATCH_BYTES = 256 * 1024**2  # a student's one writable folder
# What a sandbox may read besides the Python installation: the dynamic loader's configuration
# and the like. Everything else on the machine stays out of sight.
SYSTEM_PATHS = [
    "/usr",
    "/lib",
    "/lib64",
    "/lib32",
    "/bin",
    "/sbin",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
]
HIDDEN_PACKAGES = ("solutions", "grader", "tests")  # what learner code must never read
PROBED_PER_PACKAGE = 100  # files of each hidden package the probe tries, fewer where a datagram cannot hold them


class SandboxError(RuntimeError):
    """The sandbox could not start: the grader cannot run learner code at all."""


@dataclass(frozen=True)
class Confinement:
    confined: bool
    detail: str  # how, or why not


def confinement(mode: str = "auto") -> Confinement:
    """bubblewrap where it works ("auto"; "isolated", whose Sandbox then proves what it got), insisted on
    ("bwrap"), or refused ("none")."""
    if mode == "none":
        return Confinement(False, "the sandbox was turned off (--sandbox none)")
    found = _probe_bubblewrap()
    if mode == "bwrap" and not found.confined:
        raise SandboxError(f"--sandbox bwrap was asked for, but {found.detail}")
    return found


@functools.cache
def _probe_bubblewrap() -> Confinement:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Confinement(False, "bubblewrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)")
    probe = subprocess.run(
        [bwrap, *namespace_options(), *system_binds(), "--remount-ro", "/", "--", sys.executable, "-c", "pass"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        reason = probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else f"exit {probe.returncode}"
        return Confinement(False, f"bubblewrap cannot create a sandbox here ({reason})")
    return Confinement(True, "bubblewrap")


def grading_binds(device: str) -> list[str]:
    runner = REPO / "grader" / "runner"
    lib = INSIDE / "lib" / "grader"
    # bwrap makes a bind's missing parents 0700: workers run as another uid and must get through.
    binds = [arg for folder in (INSIDE, INSIDE / "lib", lib) for arg in ("--perms", "0755", "--dir", str(folder))]
    # Each student init mounts its own scratch over these (grader.runner.zygote); the zygote empties them too.
    binds += [
        "--ro-bind",
        str(REPO / "grader" / "__init__.py"),
        str(lib / "__init__.py"),
        "--ro-bind",
        str(runner),
        str(lib / "runner"),
        "--tmpfs",
        str(INSIDE / "submission"),
        "--size",
        str(SCRATCH_BYTES),
        "--tmpfs",
        str(INSIDE / "scratch"),
    ]
    # A non-editable install puts the references in site-packages, and a checkout under /usr or
    # beside the Python installation lies in a bound folder: cover them wherever they are visible.
    bound = [Path(path) for path in SYSTEM_PATHS] + sorted(_python_prefixes())
    for hidden in hidden_paths():
        if any(hidden.is_relative_to(folder) for folder in bound):
            binds += ["--tmpfs", str(hidden)]
    if device != "cpu":  # CUDA needs the driver's device nodes and sysfs
        for node in sorted(glob.glob("/dev/nvidia*")):
            binds += ["--dev-bind", node, node]
        binds += ["--ro-bind-try", "/sys", "/sys"]
    return binds


def landlock_paths() -> dict:
    """Unsandboxed, what a worker may still read: the system and the Python installation, never the
    references, the checks or the tests, wherever they are installed."""
    readable = {*SYSTEM_PATHS, "/proc", "/sys", "/dev", *map(str, _python_prefixes()), *site_folders()}
    devices = ["/dev/null", "/dev/zero", "/dev/random", "/dev/urandom", *sorted(glob.glob("/dev/nvidia*"))]
    return {"readable": sorted(_without(map(Path, readable), hidden_paths())), "devices": devices}


def site_folders() -> set[str]:
    """The folders of the import path (the standard library, site-packages) but the one holding the grader."""
    return {
        str(Path(entry).resolve())
        for entry in sys.path
        if entry and os.path.isdir(entry) and not REPO.is_relative_to(Path(entry).resolve())
    }


def hidden_paths() -> list[Path]:
    """The grader's own packages: in this checkout, in any folder on the import path, and wherever an
    import finder would load them from (an editable install maps them to its checkout)."""
    folders = [REPO, *(Path(entry) for entry in sys.path if entry and os.path.isdir(entry))]
    found = {
        Path(folder, package).resolve()
        for folder in folders
        for package in HIDDEN_PACKAGES
        if Path(folder, package).is_dir()
    }
    for package in HIDDEN_PACKAGES:
        for finder in sys.meta_path:
            try:
                spec = finder.find_spec(package, None)
            except (ImportError, AttributeError, TypeError, ValueError):
                continue
            found |= {Path(location).resolve() for location in (spec and spec.submodule_search_locations) or []}
    # The copy grading now comes first, so that a failed probe names the reference in use, wherever other copies lie.
    return sorted(found, key=lambda folder: (not folder.is_relative_to(REPO.resolve()), str(folder)))


def probe_paths() -> list[str]:
    """What the isolation probe tries to open: each hidden package and up to PROBED_PER_PACKAGE of its files
    (a folder that cannot be listed may still hold files that can be opened), as many as one command holds."""
    found = {
        package: [os.path.join(folder, name) for folder, _, names in os.walk(package) for name in sorted(names)]
        for package in map(str, hidden_paths())
    }
    per_package = PROBED_PER_PACKAGE
    while True:
        paths = [path for package, files in found.items() for path in (package, *files[:per_package])]
        if per_package <= 1 or len(json.dumps({"paths": paths})) <= MAX_COMMAND_BYTES:
            return paths
        per_package //= 2


def _without(paths, hidden: list[Path]) -> list[str]:
    """``paths``, each replaced by its entries wherever a hidden folder lies inside it (Landlock can
    only grant, so a granted folder must not hold one), and the hidden folders left out."""
    kept: list[str] = []
    pending = list(paths)
    while pending:
        path = pending.pop()
        if path in hidden:
            continue
        if any(folder.is_relative_to(path) for folder in hidden) and path.is_dir() and not path.is_symlink():
            pending += list(path.iterdir())
        else:
            kept.append(str(path))
    return kept


def namespace_options() -> list[str]:
    """No network, own PID/IPC/UTS namespaces; --new-session: no terminal injection. The zygote keeps
    CAP_SYS_ADMIN (a PID namespace and fresh tmpfs folders per student) and, as root, CAP_SETUID,
    CAP_SETGID (workers become an unprivileged uid) and CAP_KILL (to end them); workers drop every
    capability."""
    common = [
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-net",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--cap-drop",
        "ALL",
        "--cap-add",
        "CAP_SYS_ADMIN",
    ]
    if os.geteuid() == 0:  # no user namespace: it would map root alone, and workers need another uid
        return [*common, "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_KILL"]
    return ["--unshare-user", *common]


@functools.cache
def _python_prefixes() -> set[Path]:
    return {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}


def system_binds() -> tuple[str, ...]:
    binds: list[str] = []
    for path in SYSTEM_PATHS:
        binds += ["--ro-bind-try", path, path]
    for prefix in sorted(_python_prefixes()):
        if not any(prefix.is_relative_to(p) for p in ("/usr", "/lib", "/bin")):
            # bwrap would make the missing parents 0700: workers run as another uid and must get through.
            for parent in reversed(prefix.parents[:-1]):
                binds += ["--perms", "0755", "--dir", str(parent)]
            binds += ["--ro-bind", str(prefix), str(prefix)]
    return tuple(binds)
