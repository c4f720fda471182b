"""nbgrader's OverwriteCells without its false alarm on hidden tests (jupyter/nbgrader#1961).

generate_assignment stores a test cell's checksum before it clears the cell's hidden tests, so autograde
finds every untouched submission's hidden-test cell "changed" and warns "Attribute 'checksum' for cell
stageN-hidden has changed!", which reads as tampering. This preprocessor, used in its place
(nbgrader_config_generated.py), restores such a cell as nbgrader does but stays quiet when the student's
cell is exactly its source with the hidden tests cleared (what the students were given), and reports any
other change as nbgrader would.
"""

import copy

from nbgrader.preprocessors import ClearHiddenTests, OverwriteCells


class RestoreHiddenTests(OverwriteCells):
    def preprocess_cell(self, cell, resources, cell_index):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        self._as_given = grade_id is not None and self._is_as_given(cell, grade_id)
        return super().preprocess_cell(cell, resources, cell_index)

    def report_change(self, name, attr, old, new):
        if attr == "checksum" and self._as_given:
            self.log.info("Cell %s: its hidden tests put back (the students' copy is as released)", name)
            return
        super().report_change(name, attr, old, new)

    def _is_as_given(self, cell, grade_id: str) -> bool:
        """Whether ``cell`` is its source cell with the hidden tests cleared, as the students' copy has it."""
        try:
            source = self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
        except Exception:  # nbgrader's MissingEntry: the parent reports the missing cell itself
            return False
        released = copy.deepcopy(cell)
        released.source = source.source
        clearing = ClearHiddenTests(config=self.config)
        if not clearing._remove_hidden_test_region(released):
            return False  # no hidden tests here: nbgrader's own check is the right one
        return released.source == cell.source
