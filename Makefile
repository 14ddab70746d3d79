# The two commands of the README: `make run` and `make test`. Everything else is a helper.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.run-installed
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.bench-installed

.DEFAULT_GOAL := help
.PHONY: help run test lint bench install browser hosts wrk

help:
	@echo "make run      set up (.venv, embedded PostgreSQL, migrations, demo data), then serve"
	@echo "              the web app, the API and the workers on 127.0.0.1:8000 until Ctrl-C"
	@echo "make test     install the test tools, then lint, type-check and run the whole suite"
	@echo "make lint     ruff and mypy only"
	@echo "make install  the .venv with the test tools, nothing run"
	@echo "make bench    the benchmarks (bench/RESULTS.md; long)"
	@echo "After make run: $(BIN)/mantle --help, or . $(BIN)/activate and then mantle --help"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# What running needs, and no more (no test tools).
$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $(RUN_STAMP)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

# The benchmarks' own extra (DBOS, the peer of figures 5 and 6; Prefect, the peer of figure 10;
# pyinstrument): not needed to test.
$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[test,bench]'
	touch $(BENCH_STAMP)

install: $(STAMP)

# Debian's Chromium for the dashboard's browser tests (browser downloads are not possible here).
browser:
	@command -v chromium >/dev/null || { \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium >/dev/null; \
		else echo "chromium missing: the browser tests will be skipped (sudo apt-get install chromium)"; fi; }

# Debian's PgBouncer, iproute2, PostgreSQL and HAProxy for the multi-host tests (tests/multihost:
# PgBouncer, test hosts in network namespaces, which need root, and the failover tests' Patroni
# cluster, whose Patroni comes with the test extra, and HAProxy following its leader); without
# them those tests are skipped.
hosts:
	@command -v pgbouncer >/dev/null && command -v ip >/dev/null && command -v haproxy >/dev/null && ls /usr/lib/postgresql/*/bin/pg_rewind >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq pgbouncer iproute2 postgresql haproxy >/dev/null; \
		else echo "pgbouncer, iproute2, postgresql or haproxy missing: the multi-host tests will be skipped (sudo apt-get install pgbouncer iproute2 postgresql haproxy)"; fi; }

run: $(RUN_STAMP)
	$(BIN)/mantle migrate --no-input
	$(BIN)/python manage.py collectstatic --no-input --verbosity 0
	$(BIN)/mantle seed-demo
	@echo "The command line: $(BIN)/mantle --help (or . $(BIN)/activate, then mantle --help)"
	$(BIN)/mantle serve

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	MANTLE_CONFIG=tests/mantle.yaml $(BIN)/mypy

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
