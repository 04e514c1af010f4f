# Every target that needs the tools depends on the venv stamp, so `make test` and `make demo`
# work from a fresh clone with nothing run before.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: venv test test-all lint format proto demo clean

# setuptools warns on every editable install of a flat layout ("Editable installation ... folders
# with the same name as your package"): nothing a user can act on, so it is not shown.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	PYTHONWARNINGS="ignore:Editable installation" $(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

## make test: the default suite (unit, short simulator, integration, spark and chaos runs); `slow` soaks excluded.
## Most of it runs on one worker per core (up to 4, pytest-xdist): much of its time is spent waiting
## on real processes, JVMs and timers. The chaos runs go last, alone: they kill and pause node
## processes under a workload with default timeouts, on a machine nothing else loads.
test: $(STAMP)
	$(BIN)/python -m pytest -m "not slow and not chaos" --numprocesses auto --maxprocesses 4 --dist worksteal $(PYTEST_ARGS)
	$(BIN)/python -m pytest -m "not slow and chaos" $(PYTEST_ARGS)

## make test-all: everything, including the slow soaks.
test-all: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

## make proto: regenerate raftmeta/v1 from proto/raftmeta/v1/*.proto (commit the result).
proto: $(STAMP)
	$(BIN)/python proto/generate.py

demo: $(STAMP)
	$(BIN)/raftmeta demo

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
