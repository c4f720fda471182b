"""What the judge found out about the student it is grading, kept for that student only.

A batch lane grades one student after another in one judge process: a fact the judge worked out by running a
student's code (which of their projections is which, why their module raises) must never reach the next
student. Keyed by the student's workers, which every student gets anew.
"""

from grader.sandbox.workers import LearnerWorkers


class _Facts:
    owner: object = None
    found: dict = {}


def student_facts(learner: LearnerWorkers) -> dict:
    """The facts found about the student whose workers ``learner`` are; emptied when another student's come."""
    if _Facts.owner is not learner:
        _Facts.owner, _Facts.found = learner, {}
    return _Facts.found
