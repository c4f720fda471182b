# The two commands a newcomer needs: `make grade` and `make test`. Each creates .venv on
# first use; stamp files keep later runs instant.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SUBMISSION ?= exercises
STAGE ?=
GRADE_ARGS ?=
HTML_REPORT ?= grade-report.html
PYTEST_ARGS ?=

# torch: on Linux the default index's wheel is the CUDA build (GBs of nvidia-* packages), so the
# CPU wheel of the pinned version comes from PyTorch's CPU index first, and from the default index
# only where that index cannot be reached. macOS and Windows wheels on the default index are CPU-only.
UNAME_S ?= $(shell uname -s)
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH_PIN := $(shell grep -o 'torch==[0-9.]*' pyproject.toml)
# Asked first (grader.core.index_reachable: a few seconds), so that a machine without it never waits on pip's retries
INDEX_FALLBACK := PyTorch's CPU index ($(TORCH_CPU_INDEX)) could not be reached: torch comes from pip's other sources (on Linux, PyPI's torch is the CUDA build, several GB)

RUNTIME_STAMP := $(VENV)/.runtime-installed
DEV_STAMP := $(VENV)/.dev-installed
INSTRUCTOR_STAMP := $(VENV)/.instructor-installed
NBGRADER_STAMP := $(VENV)/.nbgrader-installed
DOCS_STAMP := $(VENV)/.docs-installed
SIMILARITY_STAMP := $(VENV)/.similarity-installed

.DEFAULT_GOAL := help
.PHONY: help grade watch grade-all gradescope nbgrader nbgrader-demo nbgrader-reconcile figures operators release test test-fast lint stubs bench-grade bench-batch bench-profile bench-watch bench-against bench-kv-cache clean
.PHONY: similarity class-report canvas-export moodle-export

help:
	@echo "make grade         grade exercises/ (STAGE=N for one stage, SUBMISSION=folder-or-zip for another); details in $(HTML_REPORT)"
	@echo "make watch         grade exercises/, then again each time you save a stage file (STAGE=N for one stage); Ctrl-C stops"
	@echo "make grade-all     grade a class: SUBMISSIONS=folder as the LMS downloaded it (Canvas, Moodle, Gradescope, nbgrader, or a folder or .zip each) OUT=folder"
	@echo "make similarity    pairs of students whose code is alike: SUBMISSIONS=folder OUT=folder (installs copydetect)"
	@echo "make class-report  OUT/class-report.html, the class at a glance: OUT=folder a batch graded [COURSE=course.toml]"
	@echo "make canvas-export OUT's grades.csv as a Canvas gradebook import: OUT=folder ROSTER=roster.csv [EXPORT=file]"
	@echo "make moodle-export OUT's grades.csv as a Moodle grade import: OUT=folder ROSTER=roster.csv [EXPORT=file]"
	@echo "make gradescope    build dist/gradescope-autograder.zip for a Gradescope programming assignment"
	@echo "make nbgrader      write the nbgrader course to build/nbgrader (installs nbgrader)"
	@echo "make nbgrader-demo a whole nbgrader term on two made-up students, then grades.csv"
	@echo "make nbgrader-reconcile  grade COURSE/autograded (default build/nbgrader) with grade-all; list where nbgrader differs, and why"
	@echo "make test          lint, then the repository's whole test suite, as CI runs it"
	@echo "make test-fast     the suite on every core, without the slow nbgrader and fresh-install tests (PYTEST_ARGS for more)"
	@echo "make lint          ruff (lint and format) and mypy on the layers up to the judge, the views and the class's grading"
	@echo "make release      the students' repository: dist/student/ and dist/student.zip (no solutions, no hidden checks)"
	@echo "make figures       redraw docs/figures from solutions/ (installs matplotlib)"
	@echo "make stubs         regenerate exercises/ from solutions/ (overwrites your work!)"
	@echo "make operators     derive the operators right code reaches (grader/core/operators-derived.toml)"
	@echo "make bench-grade   time make grade against a bare 'import torch'"
	@echo "make bench-batch   time grading 100 submissions against a process per submission, and against the floor (one process, no sandbox)"
	@echo "make bench-profile where one student's grading goes in a batch lane: forks, imports, IPC, pytest (STUDENT=correct|wrong|stub)"
	@echo "make bench-watch   time make watch's re-grade of one stage after a save (target: 0.5 s)"
	@echo "make bench-against REF=commit  time this tree's batch grader against another commit's, same class, one run"
	@echo "make bench-kv-cache  time greedy decoding of 256 tokens with stage 7's KV cache against without it"
	@echo "make clean         remove .venv and caches"

$(VENV)/bin/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed (found " + sys.version.split()[0] + "); set PYTHON=python3.11")'
	$(PYTHON) -m venv $(VENV)

$(RUNTIME_STAMP): pyproject.toml | $(VENV)/bin/python
	@echo "Setting up $(VENV) (first run only: about a minute)..."
ifeq ($(UNAME_S),Linux)
	@if $(PY) -m grader.core.index_reachable $(TORCH_CPU_INDEX); then \
		$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --retries 1 --timeout 15 \
			--index-url $(TORCH_CPU_INDEX) "$(TORCH_PIN)" || echo "$(INDEX_FALLBACK)"; \
	else echo "$(INDEX_FALLBACK)"; fi
endif
	$(PY) -m pip install --quiet --disable-pip-version-check -e .
	@touch $@

$(INSTRUCTOR_STAMP): pyproject.toml $(RUNTIME_STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[instructor]'
	@touch $@

$(NBGRADER_STAMP): pyproject.toml $(RUNTIME_STAMP)
	@echo "Installing nbgrader and Jupyter into $(VENV) (instructors only; learners never need them)..."
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[nbgrader]'
	@touch $@

$(DOCS_STAMP): pyproject.toml $(RUNTIME_STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[docs]'
	@touch $@

$(SIMILARITY_STAMP): pyproject.toml $(RUNTIME_STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[similarity]'
	@touch $@

$(DEV_STAMP): pyproject.toml $(RUNTIME_STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $@ $(INSTRUCTOR_STAMP) $(NBGRADER_STAMP) $(DOCS_STAMP) $(SIMILARITY_STAMP)  # dev includes those extras

grade: $(RUNTIME_STAMP)
	@$(PY) -m grader $(SUBMISSION) $(if $(STAGE),--stage $(STAGE)) --html $(HTML_REPORT) $(GRADE_ARGS)

watch: $(RUNTIME_STAMP)
	@$(PY) -m grader.cli.watch $(SUBMISSION) $(if $(STAGE),--stage $(STAGE)) --html $(HTML_REPORT) $(GRADE_ARGS)

grade-all: $(INSTRUCTOR_STAMP)
	@test -n "$(SUBMISSIONS)" -a -n "$(OUT)" || { echo "usage: make grade-all SUBMISSIONS=folder OUT=folder [GRADE_ARGS=...]"; exit 2; }
	@$(PY) -m grader batch $(SUBMISSIONS) --out $(OUT) $(GRADE_ARGS)

class-report: $(INSTRUCTOR_STAMP)
	@test -n "$(OUT)" || { echo "usage: make class-report OUT=folder [COURSE=course.toml]"; exit 2; }
	@$(PY) -m grader.cli.class_report $(OUT) $(if $(COURSE),--course $(COURSE))

similarity: $(SIMILARITY_STAMP)
	@test -n "$(SUBMISSIONS)" -a -n "$(OUT)" || { echo "usage: make similarity SUBMISSIONS=folder OUT=folder [SIMILARITY_ARGS=...]"; exit 2; }
	@$(PY) -m grader.cli.similarity $(SUBMISSIONS) --out $(OUT) $(SIMILARITY_ARGS)

# make canvas-export / moodle-export: one recipe, the LMS from the target's name.
canvas-export moodle-export: %-export: $(RUNTIME_STAMP)
	@test -n "$(OUT)" -a -n "$(ROSTER)" || { echo "usage: make $@ OUT=folder ROSTER=roster.csv [EXPORT=file] [EXPORT_ARGS=...]"; exit 2; }
	@$(PY) -m grader.cli.lms_export $* --grades $(OUT:%/=%)/grades.csv --roster $(ROSTER) --out $(or $(EXPORT),$(OUT:%/=%)/$*-import.csv) $(EXPORT_ARGS)

gradescope: $(RUNTIME_STAMP)
	@$(PY) -m grader.authoring.gradescope dist/gradescope-autograder.zip $(if $(COURSE),--course $(COURSE)) $(if $(POINTS),--points $(POINTS)) $(if $(INPUTS_KEY),--inputs-key $(INPUTS_KEY))

nbgrader: $(NBGRADER_STAMP)
	@$(PY) -m grader.authoring.nbgrader.course build/nbgrader

nbgrader-demo: $(NBGRADER_STAMP)
	@$(PY) -m grader.authoring.nbgrader.demo build/nbgrader-demo

nbgrader-reconcile: $(NBGRADER_STAMP) $(INSTRUCTOR_STAMP)
	@$(PY) -m grader.authoring.nbgrader.reconcile $(or $(COURSE),build/nbgrader)

test: lint
	$(PY) -m pytest $(PYTEST_ARGS)

test-fast: $(DEV_STAMP)
	$(PY) -m pytest -n auto -m "not nbgrader and not artefacts" $(PYTEST_ARGS)

lint: $(DEV_STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

release: $(RUNTIME_STAMP)
	@$(PY) -m grader.authoring.release dist/student

figures: $(DOCS_STAMP)
	$(PY) -m grader.authoring.figures

stubs: $(RUNTIME_STAMP)
	$(PY) -m grader.authoring.stubs

operators: $(DEV_STAMP)
	@$(PY) -m tests.derive_operators

bench-grade: $(RUNTIME_STAMP)
	@$(PY) -m tests.benchmarks.bench_grade

bench-batch: $(INSTRUCTOR_STAMP) $(NBGRADER_STAMP)
	@$(PY) -m tests.benchmarks.bench_batch

bench-profile: $(INSTRUCTOR_STAMP)
	@$(PY) -m tests.benchmarks.bench_profile $(if $(STUDENT),--student $(STUDENT))

bench-watch: $(RUNTIME_STAMP)
	@$(PY) -m tests.benchmarks.bench_watch

bench-against: $(INSTRUCTOR_STAMP)
	@test -n "$(REF)" || { echo "usage: make bench-against REF=commit"; exit 2; }
	@$(PY) -m tests.benchmarks.bench_against $(REF)

bench-kv-cache: $(RUNTIME_STAMP)
	@$(PY) -m tests.benchmarks.bench_kv_cache

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis *.egg-info dist build $(HTML_REPORT)
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
