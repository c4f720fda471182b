"""Held-out learner submissions for the bonus stages 6-8: mutants (one mistake each) and correct alternatives."""
