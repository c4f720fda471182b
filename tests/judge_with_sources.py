"""`python -m grader` as it runs once grader/session.py hands the judge each student's staged files.

The session is to set GradingPlugin.sources for each student before the student's workers start:
`self.grading.sources = staged_sources(staged)`, first in its loop over the students. Until it
does, the shortcut checks have no copy of the files to read, and this entry point makes that one
change from outside, for the tests that need it: `python -m tests.judge_with_sources SUBMISSION ...`
takes what `python -m grader` takes.
"""

import sys

import grader.session
from grader.__main__ import main
from grader.plugin import staged_sources


class _StudentLoopHandingSources(grader.session._StudentLoop):
    def __init__(self, grading, sandbox, students, deliver, timeout):
        def handing_sources():
            for staged in students:
                grading.sources = staged_sources(staged)
                yield staged

        super().__init__(grading, sandbox, handing_sources(), deliver, timeout)


grader.session._StudentLoop = _StudentLoopHandingSources

if __name__ == "__main__":
    sys.exit(main())
