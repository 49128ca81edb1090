# The README's two commands: `make run` and `make test`. Both set everything up first.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test check difftest setup lint unit clean compose-tools

$(STAMP): pyproject.toml
	@command -v $(PY) >/dev/null 2>&1 || PY=python3; \
	  test -x $(BIN)/python || $${PY:-$(PY)} -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

node_modules/.installed: package.json
	npm install --no-audit --no-fund --silent
	touch node_modules/.installed

# docker-compose (Debian package) validates compose/docker-compose.yml in the tests (`config` only,
# no Docker engine needed). Installed with apt-get when missing and we are root; skipped if present.
compose-tools:
	@command -v docker-compose >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get install -y -q docker-compose >/dev/null 2>&1 || \
	      { apt-get update -q >/dev/null && apt-get install -y -q docker-compose >/dev/null; } || \
	      echo "warning: could not install docker-compose; the compose test will be skipped"; \
	  else echo "note: docker-compose missing (install it as root); the compose test will be skipped"; fi; }

setup: $(STAMP) node_modules/.installed compose-tools

run: setup
	$(BIN)/kcoord up

lint: $(STAMP)
	$(BIN)/ruff check coordinator coordinator_common transactions replication cluster chaos bench tests
	$(BIN)/mypy coordinator coordinator_common transactions replication cluster chaos bench
	$(BIN)/lint-imports

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit tests/runtime

# Two workers: tests/cluster (node processes) on one, every other test on the other (tests/conftest.py).
test: setup lint
	$(BIN)/pytest -q -m "not slow" -n 2 --tiers --durations=30

# The fast tier (CONTRIBUTING.md): lint, then the pure and in-process wire tests (no node
# processes, nothing slow), in under three minutes.
check: $(STAMP) lint
	$(BIN)/pytest -q -m "not slow and not cluster" tests/unit tests/wire tests/runtime

# Side by side with Apache Kafka 4.4 (from Maven Central): the differential scenarios and the
# Java Admin's calls; slow, not part of make test.
difftest: setup
	$(BIN)/pytest -q -m slow tests/diff tests/cluster/test_admin_side_by_side.py

clean:
	rm -rf $(VENV) node_modules .mypy_cache .ruff_cache .pytest_cache
