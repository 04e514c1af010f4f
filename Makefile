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
test: $(STAMP)
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

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
