# The README's two commands: `make run` and `make test`. Both set everything up first.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test check difftest apptest setup lint unit clean compose-tools

$(STAMP): pyproject.toml
	@command -v $(PY) >/dev/null 2>&1 || PY=python3; \
	  test -x $(BIN)/python || $${PY:-$(PY)} -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

node_modules/.installed: package.json
	npm install --no-audit --no-fund --silent
	touch node_modules/.installed

# Debian packages the tests use: docker-compose validates compose/docker-compose.yml (`config`
# only, no Docker engine needed), kcat is a real application the slow tests run. Installed with
# apt-get when missing and we are root; a test whose tool is missing is skipped.
APT_TOOLS := docker-compose kcat
compose-tools:
	@for tool in $(APT_TOOLS); do command -v $$tool >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get install -y -q $$tool >/dev/null 2>&1 || \
	      { apt-get update -q >/dev/null && apt-get install -y -q $$tool >/dev/null; } || \
	      echo "warning: could not install $$tool; its test will be skipped"; \
	  else echo "note: $$tool missing (install it as root); its test will be skipped"; fi; }; done

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

# The real applications (Kafka Streams, Connect, MirrorMaker 2, the Kafka tools, kcat, franz-go's
# kadm) and the week of compaction with Streams and Connect: slow, not part of make test.
apptest: setup
	$(BIN)/pytest -q -m "slow or not slow" tests/cluster/test_kafka_streams.py tests/cluster/test_kafka_connect.py \
	  tests/cluster/test_mirror_maker.py tests/cluster/test_kafka_tools.py tests/cluster/test_kcat.py \
	  tests/cluster/test_franz_go.py tests/cluster/test_week_in_a_minute_apps.py

clean:
	rm -rf $(VENV) node_modules .mypy_cache .ruff_cache .pytest_cache
