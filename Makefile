# The two commands of the README: `make run` and `make test`. Everything else is a helper.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.bench-installed

.PHONY: run test lint bench install browser hosts wrk

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

# The benchmarks' own extra (DBOS, the peer of figures 5 and 6; pyinstrument): not needed to test.
$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[test,bench]'
	touch $(BENCH_STAMP)

install: $(STAMP)

# Debian's Chromium for the dashboard's browser tests (browser downloads are not possible here).
browser:
	@command -v chromium >/dev/null || { \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium >/dev/null; \
		else echo "chromium missing: the browser tests will be skipped (sudo apt-get install chromium)"; fi; }

# Debian's PgBouncer, iproute2 and PostgreSQL for the multi-host tests (tests/multihost: PgBouncer,
# test hosts in network namespaces, which need root, and the failover tests' Patroni cluster, whose
# Patroni comes with the test extra); without them those tests are skipped.
hosts:
	@command -v pgbouncer >/dev/null && command -v ip >/dev/null && ls /usr/lib/postgresql/*/bin/pg_rewind >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq pgbouncer iproute2 postgresql >/dev/null; \
		else echo "pgbouncer, iproute2 or postgresql missing: the multi-host tests will be skipped (sudo apt-get install pgbouncer iproute2 postgresql)"; fi; }

run: install
	$(BIN)/mantle migrate --no-input
	$(BIN)/python manage.py collectstatic --no-input --verbosity 0
	$(BIN)/mantle seed-demo
	$(BIN)/mantle serve

test: install browser hosts
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	MANTLE_CONFIG=tests/mantle.yaml $(BIN)/mypy
	MANTLE_CONFIG=tests/mantle.yaml $(BIN)/pytest

# Debian's wrk, figure 2's load generator; without it figure 2 fails (and so does `make bench`).
wrk:
	@command -v wrk >/dev/null || { \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq wrk >/dev/null; \
		else echo "wrk missing: figure 2 will fail (sudo apt-get install wrk)"; fi; }

bench: $(BENCH_STAMP) wrk hosts
	$(BIN)/python -m bench
