"""Grading engine for the attention exercises.

Data flow: solutions/ -> exercises/ (authoring.stubs); submission -> implementation ->
document examples -> compared with document_values.toml.
"""
