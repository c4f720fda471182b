"""How a run grades, as one frozen value: built once by the command line (grader/cli/) and passed down to
the sandbox, the judge and a batch's lanes, which never change it."""

from dataclasses import dataclass, field

from grader.core.points import Points

DEVICES = ("cpu", "cuda", "auto")
SANDBOX_MODES = ("auto", "bwrap", "isolated", "none")


@dataclass(frozen=True)
class GradingOptions:
    stages: tuple[int, ...]  # the stages graded, in order
    points: Points
    visible_only: bool = False  # the visible checks alone: a provisional score
    timeout: float = 1.0  # seconds one call into learner code may take
    budget: float = 30.0  # seconds all calls into one student's code may take together, imports included
    device: str = "cpu"  # "cpu" or "cuda"; "auto" until a sandbox has resolved it
    sandbox: str = "auto"  # one of SANDBOX_MODES
    # the bonus stages as extra credit, {"cap": points or None} (grader.core.course.extra_credit); None: they
    # count toward the maximum, or are not graded
    extra_credit: dict | None = None
    # a class's secret (grader.core.inputs_key): hidden checks draw their inputs from it and the submission
    # (grader.judge.drawn_inputs); empty: from their names alone, as one learner's own grading does
    inputs_key: bytes = field(default=b"", repr=False)


@dataclass(frozen=True)
class ClassOptions:
    """What grading a class adds to the options of one submission (python -m grader batch)."""

    grading: GradingOptions
    workers: int
    force: bool
    students: tuple[str, ...] | None  # --student: only these ids; None: whoever the plan decides
    student_timeout: float  # seconds one student's grading may take in all
    lane_memory: int | None = None  # bytes a lane's processes may hold together; None: the machine's share
