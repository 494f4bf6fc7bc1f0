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
	# Two worker processes (pytest-xdist): the 2-core CI machine finishes sooner, and no one process runs every
	# test: one interpreter running all ~1,050 segfaulted in libgcc's unwinder near the end (XLA CPU, jaxlib 0.10.2),
	# and a worker did again at ~890 of ~1,780; tests/conftest.py now drops compiled programs after each module.
	$(BIN)/python -m pytest -q -n 2 --durations=15

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache
