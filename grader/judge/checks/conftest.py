# The fixtures the checks use (learner, learner_source, reference, device) live with the grading plugin.
from grader.judge.plugin import device, learner, learner_source, reference  # noqa: F401
