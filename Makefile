# ML Systems Workbench: the two set-up commands are `make lab` and `make test`.
# Both create .venv on first use and reinstall when pyproject.toml changes.

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DOCS_STAMP := $(VENV)/.installed-docs
LAB_ARGS ?=
# JupyterLab refuses to run as root (containers, CI) unless told it may.
ROOT_ARGS := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)
PYTEST_ARGS ?=
# pytest-xdist workers for `make test` (0: one process); tests/conftest.py groups the work.
TEST_WORKERS ?= 2
FIGURES_DIR ?= figures

.PHONY: venv lab test figures report docs bench fuzz lint clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@$(BIN)/python -m pip --version >/dev/null 2>&1 || { \
	  rm -rf $(VENV); \
	  $(PYTHON) -m venv $(VENV) || { \
	    echo "error: '$(PYTHON) -m venv' failed. On Debian/Ubuntu: sudo apt-get install python3-venv"; \
	    rm -rf $(VENV); exit 1; }; }
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

# JupyterLab on a working copy of notebooks/ in $(LAB_DIR)/ (ignored by git), so that saved
# outputs never dirty the tracked notebooks; e.g. make lab LAB_ARGS="--no-browser --port 8899"
LAB_DIR ?= lab
lab: $(STAMP)
	$(BIN)/python -m mlsys_workbench.labcopy notebooks $(LAB_DIR)
	$(BIN)/jupyter lab --ServerApp.root_dir=$(LAB_DIR) $(ROOT_ARGS) $(LAB_ARGS)

# The whole suite: unit, property, snapshot (lit), notebook and browser tests (the docs site's
# browser test needs the docs extra).
test: $(STAMP) $(DOCS_STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

# The paper-figure notebooks at full size into $(FIGURES_DIR)/ (PNG, HTML, manifest.json,
# REPORT.md); SMOKE=1 runs them at the test suite's small sizes. ONLY=12,14 reruns just those
# notebooks (keeping the others' figures); COMPARE=old/manifest.json then lists every value
# that differs from that earlier run (wall-clock timings aside) and fails if any does.
figures: $(STAMP)
	$(BIN)/python -m mlsys_workbench.figures --out $(FIGURES_DIR) $(if $(filter 1,$(SMOKE)),--smoke) \
	  $(if $(ONLY),--only $(ONLY)) $(if $(COMPARE),--compare $(COMPARE))

# A full `make figures` run published into the docs: docs/REPORT.md and its pictures in
# docs/img/report/ (refuses a SMOKE=1 run or one where a notebook failed).
report: $(STAMP)
	$(BIN)/python -m mlsys_workbench.publish $(FIGURES_DIR) docs

# The documentation site into docs/_build/html (open index.html): the docs/ pages, the API
# reference from the docstrings, and every notebook executed at SMOKE=1 (most of the build).
# NOTEBOOKS=00,03 executes only those and shows the others unexecuted (NOTEBOOKS=none: none).
# Installs the `docs` extra (Sphinx, myst-nb, furo) on first use.
NOTEBOOKS ?= all
$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,docs]'
	@touch $@

docs: $(DOCS_STAMP)
	DOCS_NOTEBOOKS=$(NOTEBOOKS) $(BIN)/sphinx-build -E -b html docs docs/_build/html \
	  -d docs/_build/doctrees

# Every benchmark; each writes JSON into benchmarks/results/.
bench: $(STAMP)
	@set -e; for script in benchmarks/*_bench.py; do \
	  echo "== $$script"; $(BIN)/python $$script; done

# The compilerkit fuzz run: N cases of every axis (drawn graphs, mutated datasets models,
# integer graphs, Convs under every algorithm, schedule strings, hand-edited Kernel IR, command
# lines, forked and RLIMIT_AS-limited children, segkit and lmskit inputs), each in a worker
# process against onnxruntime or the kit's reference, then RSS over MEMORY_COMPILES compiles;
# counts per class and examples into benchmarks/results/fuzz.json (tests/fuzz/test_fuzz.py
# runs a fixed-seed sample). JOBS worker processes.
N ?= 2000
JOBS ?= 2
MEMORY_COMPILES ?= 1000
fuzz: $(STAMP)
	$(BIN)/python tests/fuzz/fuzzlib.py --n $(N) --jobs $(JOBS) \
	  --memory-compiles $(MEMORY_COMPILES) --out benchmarks/results/fuzz.json

lint: $(STAMP)
	$(BIN)/ruff check lmskit compilerkit segkit mlsys_viz mlsys_workbench datasets tests benchmarks

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
