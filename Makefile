# The README's two commands:
#   make smoke   set up .venv, run the whole pipeline on the smoke budget (CPU minutes), write its results
#                page results/smoke/index.html and the workflow's report results/smoke/report.html
#   make test    set up .venv and run the test suite (make test-fast: without the end-to-end runs)
# Everything is installed from requirements.txt (exact pins) into .venv.
#   make clean                 remove the smoke budget's results, logs and synthetic corpora, naming them
#   make clean BUDGET=cpu      another budget's (paper: results/ and logs/ without the other budgets' folders)

VENV    ?= .venv
PYTHON3 ?= python3
BUDGET  ?= smoke
BIN     := $(abspath $(VENV))/bin
STAMP   := $(VENV)/.installed
# Rules call `python`: make it the venv's.
export PATH := $(BIN):$(PATH)
# BIN is absolute, so it holds the path of this folder, which may have a space ("my dir/rnnrepro"):
# the recipes quote every path they give the shell. VENV itself names make targets, which cannot
# have spaces: keep it relative (the default) or give one without.

.PHONY: smoke test test-fast setup clean example

setup: $(STAMP)

# The pinned numpy and pandas need Python 3.11 (pyproject.toml's requires-python): said before pip
# fails on them.
$(STAMP): requirements.txt pyproject.toml
	@"$(PYTHON3)" -c 'import sys; sys.version_info >= (3, 11) or sys.exit("make setup: $(PYTHON3) is Python " + sys.version.split()[0] + "; the pinned packages need Python 3.11 or newer: name one, e.g. make setup PYTHON3=python3.11")'
	"$(PYTHON3)" -m venv "$(VENV)"
	"$(BIN)/python" -m pip install --disable-pip-version-check -q --no-compile -r requirements.txt
	@# The bytecode pip would write one file at a time, written on every core instead (about 9 s less
	@# on 2 cores). As with pip, a file this Python cannot compile (torch ships some for newer ones) is
	@# left to be read as source.
	"$(BIN)/python" -c "import compileall, sysconfig; compileall.compile_dir(sysconfig.get_paths()['purelib'], quiet=2, workers=0)"
	"$(BIN)/python" -m pip install --disable-pip-version-check -q --no-deps -e .
	touch "$@"

# `all` ends with the results page (results/smoke/index.html); then the Snakemake report of that run,
# the workflow's view, its first page pointing at the results page.
smoke: $(STAMP)
	"$(BIN)/snakemake" --profile profiles/smoke all
	"$(BIN)/snakemake" --profile profiles/smoke --report results/smoke/report.html all
	@echo "[rnnrepro] the results page: results/smoke/index.html"

# A cell of your own beside the baselines (docs/custom_cells.md): the minimal gated unit of
# examples/mgu.py in PRU Table 1 and the LRU accuracy comparison, with its claims against each baseline
# (the scorecard of those two studies), on the smoke budget (CPU minutes); then the report of them.
EXAMPLE := results/smoke/tables/pru_table1.csv results/smoke/tables/lru_accuracy.csv results/smoke/tables/claims.csv \
	--configfile profiles/smoke/run-config.yaml examples/mgu.yaml --config 'studies=[pru,lru]'
example: $(STAMP)
	"$(BIN)/snakemake" --profile profiles/smoke $(EXAMPLE)
	"$(BIN)/snakemake" --profile profiles/smoke --report results/smoke/report.html $(EXAMPLE)

# The suite starts some 400 Python processes (training jobs, notebooks, Snakemake) over the same
# sources: they keep their compiled files (__pycache__/, ignored by git) even where the machine sets
# PYTHONDONTWRITEBYTECODE, rather than each compiling every module it imports again.
test: $(STAMP)
	PYTHONDONTWRITEBYTECODE= "$(BIN)/python" -m pytest

# Everyday edits: every test but those that run the pipeline, snakemake, training or notebooks, or
# render records, for a few seconds or more each (marker `slow`); `make test` stays the whole suite and
# what CI runs.
test-fast: $(STAMP)
	PYTHONDONTWRITEBYTECODE= "$(BIN)/python" -m pytest -m "not slow"

# Only the budget's own files, by the layout the workflow writes (src/rnnrepro/layout.py, standard
# library only: any Python 3 runs it, .venv or not).
clean:
	PYTHONPATH=src "$(PYTHON3)" -m rnnrepro.clean "$(BUDGET)"
