"""Build learner material from the single source, solutions/."""
