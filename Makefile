# Two commands set everything up on a fresh machine with Python 3 and make:
#   make demo   - create .venv, install prefeval (with its plot and dask extras), compare
#                 the bundled sample runs
#   make test   - create .venv with the test extras, run the whole test suite on every core
#   make test-fast - the same without the tests marked slow (sweeps, Dask, resource limits, real data)
#   make test-min - the same in .venv-min, with the lowest versions pyproject allows
#   make lint   - ruff, the import contract (lint-imports) and the type checker (mypy)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
SAMPLE_RUNS := $(sort $(wildcard sample_data/runs/input.*))
VENV_MIN := .venv-min
BIN_MIN  := $(VENV_MIN)/bin
MIN_VERSIONS := tests/minimum-versions.txt
# the compiled part (setup.py): an install is redone when it changes, which rebuilds it
# in place for the editable install
EXTENSIONS := setup.py prefeval/io/_textpass.c

.PHONY: demo test test-fast test-min install install-test lint docs bench bench-smoke sample-data screenshot clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# with the extras the README's examples use: matplotlib (plots, report) and Dask
$(VENV)/.installed: pyproject.toml Makefile $(EXTENSIONS) | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[plot,dask]'
	touch $@

$(VENV)/.installed-test: pyproject.toml $(EXTENSIONS) | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(VENV)/.installed $@

# the declared minimum versions (pinned in $(MIN_VERSIONS)), in a venv of their own
$(BIN_MIN)/python:
	$(PYTHON) -m venv $(VENV_MIN)

$(VENV_MIN)/.installed-test: pyproject.toml $(MIN_VERSIONS) $(EXTENSIONS) | $(BIN_MIN)/python
	$(BIN_MIN)/python -m pip install --quiet --disable-pip-version-check \
		-c $(MIN_VERSIONS) -e '.[test]'
	touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

demo: install
	$(BIN)/prefeval compare sample_data/qrels.txt $(SAMPLE_RUNS)

# the suite on every core (pytest-xdist: one worker per core this process may run on,
# as nproc counts them: a CPU affinity or cpuset is respected, which xdist's own `auto`
# ignores); worksteal hands the queued tests of a busy worker to one that is done, so
# the slow files (test_layout, test_dask) do not keep one worker busy long after the
# others.  PYTEST_WORKERS=N sets the count; PYTEST_ARGS adds options
PYTEST_WORKERS ?= $(shell nproc 2>/dev/null || echo auto)
PYTEST_PARALLEL = -n $(PYTEST_WORKERS) --dist worksteal
# the suite starts prefeval in a few hundred processes: Python's bytecode caches
# (__pycache__, ignored by git) are written even where PYTHONDONTWRITEBYTECODE is set,
# so that each process does not compile the package anew
PYTEST := PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest

test: install-test
	$(PYTEST) -q $(PYTEST_PARALLEL) $(PYTEST_ARGS)

# everything but the tests marked slow (the property and layout sweeps, Dask, the
# resource limits): the whole suite is still `make test`, which CI runs
test-fast: install-test
	$(PYTEST) -q $(PYTEST_PARALLEL) -m "not slow" $(PYTEST_ARGS)

test-min: $(VENV_MIN)/.installed-test
	PYTHONDONTWRITEBYTECODE= $(BIN_MIN)/python -m pytest -q $(PYTEST_PARALLEL) $(PYTEST_ARGS)

# ruff, the layers' import contract, and mypy on the package (its settings in pyproject.toml)
lint: install-test
	$(BIN)/ruff check prefeval tests bench
	$(BIN)/ruff format --check prefeval tests bench
	$(BIN)/lint-imports
	$(BIN)/mypy prefeval

# docs/commands.md's --help blocks, rewritten by cog from the commands (tests/test_docs_cli.py
# fails when the committed page differs)
docs: install-test
	$(BIN)/cog -r docs/commands.md

bench: install
	$(BIN)/python bench/run.py $(BENCH_ARGS)

bench-smoke: install
	$(BIN)/python bench/run.py --scale 0.1 --repeat 1 --out bench/scratch/RESULTS-smoke.md $(BENCH_ARGS)

sample-data: install
	$(BIN)/python -m prefeval.synthetic sample sample_data --seed 20221

# the README's picture of `prefeval report` on the sample data: needs Chromium
# (Debian: apt-get install chromium); the page is rendered at 1000 px and its top kept
CHROMIUM ?= chromium
SHOT_DIR := $(shell mktemp -u /tmp/prefeval-shot.XXXXXX)
screenshot: install-test
	mkdir -p $(SHOT_DIR)
	$(BIN)/prefeval report -o $(SHOT_DIR)/report.html sample_data/qrels.txt $(SAMPLE_RUNS)
	$(CHROMIUM) --headless --no-sandbox --disable-gpu --hide-scrollbars \
		--user-data-dir=$(SHOT_DIR)/profile --window-size=1000,1250 \
		--screenshot=$(SHOT_DIR)/shot.png file://$(SHOT_DIR)/report.html 2>/dev/null
	$(BIN)/python -c "from PIL import Image; Image.open('$(SHOT_DIR)/shot.png').convert('RGB')\
		.quantize(64).save('sample_data/report.png', optimize=True)"
	rm -rf $(SHOT_DIR)

clean:
	rm -rf $(VENV) $(VENV_MIN) bench/scratch build prefeval/io/_textpass*.so prefeval/io/_textpass*.pyd
