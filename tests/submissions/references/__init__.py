"""Correct stage files written from the brief, used by verify.py as the neighbouring stages and the yardstick."""
