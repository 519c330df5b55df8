# jobvisor's everyday commands. Each target creates the virtual environment
# and installs the project into it when needed (a stamp file remembers that the
# install is current with pyproject.toml, so a second run costs nothing).
#
#   make run        the service (`jobvisor run`), SQLite at ./jobvisor.db by default
#   make test       lint + typecheck + the whole test suite (its 25 slowest tests listed)
#   make test-fast  the quick loop: tests/unit and tests/contract, on SQLite only
#   make lint / typecheck / fmt / bench / docs / dist / clean

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.jobvisor-installed
DOCS_STAMP := $(VENV)/.jobvisor-docs-installed
RELEASE_STAMP := $(VENV)/.jobvisor-release-installed
CHECKED := src tests bench examples tools
PYTEST_ARGS ?=
# The suite runs in parallel (pytest-xdist): most tests wait on processes and
# the database rather than on a CPU, so more workers than cores pay.
# `make test TEST_WORKERS=0` runs it in one process.
TEST_WORKERS ?= 4
BENCH_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help install run test test-fast lint typecheck pytest fmt bench docs dist clean

help:
	@echo "make run        run the service (jobvisor run; SQLite ./jobvisor.db unless JOBVISOR_DATABASE_URL)"
	@echo "make test       lint, typecheck and the whole test suite"
	@echo "make test-fast  unit and contract tests on SQLite only: the quick loop"
	@echo "make lint       ruff check + ruff format --check over $(CHECKED), lint-imports"
	@echo "make typecheck  mypy (strict, configured in pyproject.toml)"
	@echo "make fmt        ruff format + ruff check --fix"
	@echo "make bench      bench/queue_throughput.py (BENCH_ARGS='--engine sqlite --jobs 20000')"
	@echo "make docs       the documentation site into site/ (mkdocs build --strict)"
	@echo "make dist       the wheel and sdist into dist/, checked, installed in a fresh venv"
	@echo "make clean      remove the virtual environment and caches"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Reinstalled only when pyproject.toml changes (or the venv is new).
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

install: $(STAMP)

# The extras for the site and for building a release, each installed once.
$(DOCS_STAMP): pyproject.toml | $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,docs]'
	@touch $@

$(RELEASE_STAMP): pyproject.toml | $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,release]'
	@touch $@

# Without JOBVISOR_APP the service runs the bundled example app: seed it a
# demo batch first (enqueued, run, some retried) and log the summary often.
run: $(STAMP)
ifeq ($(JOBVISOR_APP),)
	$(BIN)/python -m jobvisor.example
	JOBVISOR_SUMMARY_INTERVAL=$${JOBVISOR_SUMMARY_INTERVAL:-10} $(BIN)/jobvisor run
else
	$(BIN)/jobvisor run
endif

test: lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check $(CHECKED)
	$(BIN)/ruff format --check $(CHECKED)
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest -n $(TEST_WORKERS) --dist load --durations=25 $(PYTEST_ARGS)

# No database server, no process: the unit tests and the queue's contract on
# SQLite (tests/conftest.py leaves out what needs PostgreSQL).
test-fast: $(STAMP)
	JOBVISOR_TEST_ENGINES=sqlite $(BIN)/pytest -q tests/unit tests/contract $(PYTEST_ARGS)

fmt: $(STAMP)
	$(BIN)/ruff format $(CHECKED)
	$(BIN)/ruff check --fix $(CHECKED)

bench: $(STAMP)
	$(BIN)/python bench/queue_throughput.py $(BENCH_ARGS)

# --strict: a broken link, a missing page or a reference that does not resolve fails.
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

dist: $(RELEASE_STAMP)
	PYTHON=$(BIN)/python .ci/package

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis build dist site
	find src tests bench -name __pycache__ -type d -prune -exec rm -rf {} +
	rm -rf src/*.egg-info
