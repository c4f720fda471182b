"""The collectors' old address: nbgrader_config.py files written before grader/authoring/nbgrader/ name
grader.authoring.nbgrader_lms.CanvasCollector (or MoodleCollector), and keep working."""

from grader.authoring.nbgrader.lms import CanvasCollector, MoodleCollector

__all__ = ["CanvasCollector", "MoodleCollector"]
