# The README's two commands: `make run` and `make test`. Both set everything up first.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test setup lint unit clean

$(STAMP): pyproject.toml
	@command -v $(PY) >/dev/null 2>&1 || PY=python3; \
	  test -x $(BIN)/python || $${PY:-$(PY)} -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

node_modules/.installed: package.json
	npm install --no-audit --no-fund --silent
	touch node_modules/.installed

setup: $(STAMP) node_modules/.installed

run: setup
	$(BIN)/kcoord up

lint: $(STAMP)
	$(BIN)/ruff check coordinator replication cluster chaos tests
	$(BIN)/mypy coordinator replication cluster
	$(BIN)/lint-imports

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit tests/runtime

test: setup lint
	$(BIN)/pytest -q -m "not slow"

clean:
	rm -rf $(VENV) node_modules .mypy_cache .ruff_cache .pytest_cache
