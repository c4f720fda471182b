# The fixtures the checks use (learner, reference, device) live with the grading plugin.
from grader.plugin import device, learner, reference  # noqa: F401
