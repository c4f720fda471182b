"""Reference solutions: the single source of the learner stubs and the notebooks.

Each stage module marks the learner's part between ``### BEGIN SOLUTION`` and
``### END SOLUTION``; ``make stubs`` turns those regions into ``exercises/``.
"""
