"""A memory and task bound on everything a lane runs (its zygote, each student's init and workers), kept by
the kernel from outside those processes: a cgroup of the lane's own, which the judge makes and enters its
zygote into before that zygote starts.

Memory counts what the processes map *and* what the kernel allocates for them (tmpfs pages, extended
attributes, pipe buffers, page tables): no per-process limit sees the latter. When a lane reaches its bound,
the kernel kills the lane's worst process, and workers volunteer first (grader.runner.confine.volunteer_for_oom),
so a student who fills memory loses their own call, not another lane's students their machine. Tasks count
threads as well as processes, so a thread flood in one lane ends at the lane's bound.

Where it holds: cgroup v2 when the judge's own cgroup can hold children with the memory and pids controllers
(the root of a cgroup namespace, or a delegated subtree with them enabled); else cgroup v1 when the
judge may make folders in its own memory and pids hierarchies (as root). Elsewhere (a learner's laptop, a
container with /sys/fs/cgroup read-only) there is no lane bound, and the report's sandbox line does not claim
one. Standard library only, like the zygote's client.
"""

import itertools
import os
import time
from dataclasses import dataclass
from pathlib import Path

from grader.runner.confine import PROCESSES

# Threads and processes of a lane together: its workers' uid may have PROCESSES (RLIMIT_NPROC counts threads),
# and the zygote and each student's init keep room beyond them, so that the uid's limit is what a thread flood
# meets first (a failure of the student's own), never the lane's (the grader could not start a worker).
LANE_TASKS = PROCESSES + 512
# <NAME>-<judge pid>-<lane>-<n>: a judge that died leaves folders the next one removes; n tells apart two sandboxes
# of one judge and lane (a restarted one, or two a test holds at once)
NAME = "grader-lane"
_MADE = itertools.count()
_REMOVE_SECONDS = 2.0  # a killed zygote's namespace takes some milliseconds to empty
# Kernel memory a lane may hold before the judge has the kernel reclaim what it can of it. Most of what learner
# code can make the kernel keep is reclaimable cache (the entries of names it looked up and did not find, under
# the shared, read-only system folders), which outlives the student, the lane and the class until memory runs
# short: a lane of honest students holds a few tens of MiB.
KERNEL_RECLAIMED_ABOVE = 512 * 1024**2


def lane_memory_bytes(lanes: int) -> int:
    """A lane's share of the machine's memory by default: ``lanes`` lanes together leave their judges a share."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return total // (max(1, lanes) + 1)


@dataclass(frozen=True)
class LaneBound:
    """The cgroup folders of one lane (one for v2; memory's and pids' for v1)."""

    version: int
    folders: tuple[Path, ...]

    def enter_then(self, command: list[str]) -> list[str]:
        """``command``, run by a shell that first enters itself into the lane's cgroups: so the process and
        everything it starts are in them from their first instruction (moving a started process would
        leave the children it already has outside)."""
        enter = 'while [ "$1" != -- ]; do echo 0 > "$1" || exit 125; shift; done; shift; exec "$@"'
        return [
            "/bin/sh",
            "-c",
            enter,
            "sh",
            *(str(folder / "cgroup.procs") for folder in self.folders),
            "--",
            *command,
        ]

    def memory_kills(self) -> int:
        """How many of the lane's processes the kernel has killed for its memory bound: a count the judge
        reads from the cgroup, which nothing in the lane can write."""
        events = self.folders[0] / ("memory.events" if self.version == 2 else "memory.oom_control")
        try:
            lines = events.read_text().splitlines()
        except OSError:
            return 0
        return next((int(line.split()[1]) for line in lines if line.startswith("oom_kill ")), 0)

    def kernel_bytes(self) -> int:
        """The kernel memory the lane's processes hold (slab, page tables, stacks); 0 where it cannot be read."""
        try:
            if self.version == 1:
                return int((self.folders[0] / "memory.kmem.usage_in_bytes").read_text())
            stat = dict(line.split() for line in (self.folders[0] / "memory.stat").read_text().splitlines())
            return int(stat.get("slab", 0)) + int(stat.get("kernel_stack", 0)) + int(stat.get("pagetables", 0))
        except (OSError, ValueError):
            return 0

    def reclaim(self) -> None:
        """Have the kernel reclaim what it can of the lane's memory (caches; what processes hold stays)."""
        try:
            if self.version == 1:
                (self.folders[0] / "memory.force_empty").write_text("0")
            else:
                (self.folders[0] / "memory.reclaim").write_text(str(self.kernel_bytes()))
        except OSError:  # an older kernel (memory.reclaim is Linux 5.19+), or nothing left to reclaim
            pass

    @property
    def detail(self) -> str:
        return f"memory and tasks bounded per lane (cgroup v{self.version})"

    def remove(self) -> None:
        """Remove the folders once the lane's processes are gone; one still busy after a short wait is left
        for the next judge (remove_stranded)."""
        deadline = time.monotonic() + _REMOVE_SECONDS
        for folder in self.folders:
            while True:
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.01)


def lane_bound(lane: int, memory: int) -> LaneBound | None:
    """Make lane ``lane``'s cgroup, its processes bounded to ``memory`` bytes together and LANE_TASKS tasks;
    None where the kernel or our rights allow none."""
    name = f"{NAME}-{os.getpid()}-{lane}-{next(_MADE)}"
    for version, parents in ((2, _v2_parents()), (1, _v1_parents())):
        if parents is None:
            continue
        folders = tuple(parent / name for parent in parents)
        try:
            for parent in parents:
                remove_stranded(parent)
            for folder in folders:
                folder.mkdir(exist_ok=True)
            if version == 2:
                _write(folders[0] / "memory.max", memory)
                _write(folders[0] / "memory.swap.max", 0, needed=False)
                _write(folders[0] / "pids.max", LANE_TASKS)
            else:
                _write(folders[0] / "memory.limit_in_bytes", memory)
                _write(folders[0] / "memory.memsw.limit_in_bytes", memory, needed=False)
                _write(folders[1] / "pids.max", LANE_TASKS)
            return LaneBound(version, folders)
        except OSError:
            LaneBound(version, folders).remove()
    return None


def remove_stranded(parent: Path) -> None:
    """Remove the lane folders under ``parent`` of judges that no longer run (an empty cgroup's folder goes
    with rmdir; one that still holds processes stays)."""
    for folder in parent.glob(f"{NAME}-*-*"):
        try:
            judge = int(folder.name.split("-")[2])
            os.kill(judge, 0)
        except ProcessLookupError:
            try:
                folder.rmdir()
            except OSError:
                pass
        except (ValueError, IndexError, OSError):
            continue


def _write(path: Path, value: int, needed: bool = True) -> None:
    try:
        path.write_text(str(value))
    except OSError:
        if needed:
            raise


def _mounts() -> list[tuple[Path, str, set[str]]]:
    """(mount point, file system type, super options) of each cgroup file system this process sees."""
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        fields, _, rest = line.partition(" - ")
        kind, _, options = (rest.split(" ") + ["", "", ""])[:3]
        if kind in ("cgroup", "cgroup2"):
            found.append((Path(fields.split(" ")[4]), kind, set(options.split(","))))
    return found


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup in each hierarchy: controller (or "" for v2) -> path."""
    own = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return {}
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path
    return own


def _v2_parents() -> tuple[Path] | None:
    """The judge's own v2 cgroup, where children of it get memory and pids."""
    own = _own_cgroups().get("")
    mount = next((point for point, kind, _ in _mounts() if kind == "cgroup2"), None)
    if own is None or mount is None:
        return None
    parent = mount / own.lstrip("/")
    try:
        enabled = set((parent / "cgroup.subtree_control").read_text().split())
        if not {"memory", "pids"} <= enabled:
            # Possible only where the cgroup holds no process of its own (the root of a namespace can)
            (parent / "cgroup.subtree_control").write_text("+memory +pids")
    except OSError:
        return None
    return (parent,)


def _v1_parents() -> tuple[Path, Path] | None:
    """The judge's own v1 memory and pids cgroups, where it may make folders."""
    own, mounts = _own_cgroups(), _mounts()
    parents = []
    for controller in ("memory", "pids"):
        mount = next((point for point, kind, options in mounts if kind == "cgroup" and controller in options), None)
        if mount is None or controller not in own:
            return None
        parent = mount / own[controller].lstrip("/")
        if not os.access(parent, os.W_OK):
            return None
        parents.append(parent)
    return parents[0], parents[1]
