# pipecat-fast: every target sets itself up on a fresh machine (Python >= 3.11 on PATH).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
EXTRAS ?= dev,bench,llama
comma  := ,
STAMP  := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))

.PHONY: install demo test lint bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install -e ".[$(EXTRAS)]"
	touch $@

## make demo: real caller audio through a real Pipecat pipeline, per-turn TTFA table + JSON + PNG
demo: $(STAMP)
	$(BIN)/pipecat-fast demo $(ARGS)

## make test: ruff (lint + format check) and pytest
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pytest $(ARGS)

lint: $(STAMP)
	$(BIN)/pipecat-fast lint $(ARGS)

## make bench: stock vs pipecat-fast configurations, interleaved call by call
bench: $(STAMP)
	$(BIN)/pipecat-fast bench $(ARGS)

clean:
	rm -rf $(VENV) reports .pytest_cache .ruff_cache
