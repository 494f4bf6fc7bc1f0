# tootsie: two commands on a fresh machine.
#   make demo   install into .venv (the package and its demo extra) and run the end-to-end demo (no network at run time)
#   make test   install the dev and every optional extra into .venv (and Debian's chromium for the dashboard's
#               browser test, when missing and apt-get runs as root), check format and lint (ruff), run the tests
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
OUT ?= ./tootsie-demo

.PHONY: demo test install install-dev clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[demo]"
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev,all]"
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed

install-dev: $(VENV)/.installed-dev

demo: install
	$(BIN)/tootsie demo --out $(OUT)

test: install-dev
	sh scripts/ensure_chromium.sh
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache
