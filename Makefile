# The README's two commands:
#   make smoke   set up .venv and run the whole pipeline on the smoke budget (CPU minutes)
#   make test    set up .venv and run the test suite
# Everything is installed from requirements.txt (exact pins) into .venv; `make clean` removes results.

VENV    ?= .venv
PYTHON3 ?= python3
BIN     := $(abspath $(VENV))/bin
STAMP   := $(VENV)/.installed
# Rules call `python`: make it the venv's.
export PATH := $(BIN):$(PATH)

.PHONY: smoke test setup clean

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON3) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check -q -r requirements.txt
	$(BIN)/python -m pip install --disable-pip-version-check -q --no-deps -e .
	touch $@

smoke: $(STAMP)
	$(BIN)/snakemake --profile profiles/smoke all

test: $(STAMP)
	$(BIN)/python -m pytest

clean:
	rm -rf results logs .snakemake data/processed/synth_*
