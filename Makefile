# txnbench: benchmark and chaos-test Apache Pulsar transactions.
# `make` lists the targets. `make bench` and `make test` are all a newcomer needs.

PYTHON   ?= python3
VENV     ?= .venv
BIN      := $(VENV)/bin
STAMP    := $(VENV)/.installed
DURATION ?=
RUN      ?=
TARGET   ?=
SCENARIO ?=
USERS    ?=
BUGS     ?=
TXN_PATH ?=
PULSAR_VERSION ?=
PULSAR_LOCK ?=
FROM ?=
PYTEST_ARGS ?=

# Where the environment sets PYTHONDONTWRITEBYTECODE, the targets cache Python's bytecode all the
# same, under .txnbench/pycache (outside the source tree; `make clean` removes it): without a cache
# every process they start compiles the project's sources again (pytest workers, embedded servers,
# `txnbench` subcommands, hundreds in `make test`) and each pytest worker rewrites every test
# file's asserts (collecting 23.5 s against 8.2 s). tests/cluster: 8% less CPU (docs/results.md,
# `#2026-12-02-pycache`). Elsewhere Python's own __pycache__ folders are left as they are.
ifneq ($(PYTHONDONTWRITEBYTECODE),)
export PYTHONPYCACHEPREFIX := $(abspath .txnbench/pycache)
export PYTHONDONTWRITEBYTECODE :=
endif

matrix_args = $(if $(DURATION),--duration $(DURATION),) $(if $(TARGET),--target $(TARGET),) $(if $(SCENARIO),--scenario $(SCENARIO),)

.DEFAULT_GOAL := help
.PHONY: help setup test test-cpu test-cluster test-pulsar test-proxy-real test-oxia-real test-slow test-docker bench chaos sweep peer fidelity selftest report report-picture lint clean distclean check-java

# `make test`'s pytest workers: three process-test groups (two embedded-cluster, one real Pulsar),
# each on one worker at a time, every other test file on any (tests/conftest.py, xdist_group_of)
TEST_WORKERS ?= 3

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  make %-13s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo "  variables: DURATION=S (main phase seconds), TARGET=embedded|pulsar|compose, SCENARIO=name (bench/chaos/sweep), USERS=4,16,48 (sweep), RUN=DIR (report, report-picture), PYTEST_ARGS=..."

check-java: ## check for Java 17+ (PySpark needs it)
	@.ci/check-java

$(STAMP): pyproject.toml
	@.ci/check-java
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "txnbench needs Python 3.11+; found " + sys.version.split()[0] + ". Set PYTHON=/path/to/python3.11")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "installing txnbench and its dependencies into $(VENV) (first time: a few minutes)"
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@$(BIN)/python -m pip install --quiet -e '.[test,dev]'
	@# the real Oxia client; its runtime deps are in pyproject.toml (why --no-deps: see there)
	@$(BIN)/python -m pip install --quiet --no-deps 'oxia==0.2.1'
	@touch $(STAMP)

setup: $(STAMP) ## create .venv and install everything (checks Java 17+)

test: $(STAMP) ## run the test suite (unit, spark, cluster; skips docker and slow); TEST_WORKERS=0 runs it in one process
	$(BIN)/python -m pytest -m "not slow and not docker" $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup) $(PYTEST_ARGS)

test-cpu: $(STAMP) ## make test with each test's CPU recorded, then where it went (tools/bench/suite_cpu.py, results/suite-cpu/)
	rm -rf results/suite-cpu
	$(MAKE) test PYTEST_ARGS="-p tools.bench.suite_cpu $(PYTEST_ARGS)"
	$(BIN)/python -m tools.bench.suite_cpu results/suite-cpu

test-cluster: $(STAMP) ## run only the tests that start embedded-cluster processes
	$(BIN)/python -m pytest -m "cluster and not slow" $(PYTEST_ARGS)

test-pulsar: $(STAMP) ## run only the tests that start real Apache Pulsar (jars from Maven Central, cached)
	$(BIN)/python -m pytest -m "pulsar and not slow" $(PYTEST_ARGS)

test-proxy-real: $(STAMP) ## the fault proxy's API suite against ours and the real Toxiproxy (built with Go on first use)
	TXNBENCH_PROXY_UNDER_TEST=ours,toxiproxy $(BIN)/python -m pytest tests/unit/proxy $(PYTEST_ARGS)

test-oxia-real: $(STAMP) ## the oxia client suite against our store and the real Oxia (built with Go on first use)
	TXNBENCH_OXIA_UNDER_TEST=ours,real $(BIN)/python -m pytest tests/cluster/test_oxia_client.py tests/cluster/test_real_oxia_wal_race.py $(PYTEST_ARGS)

test-slow: $(STAMP) ## run the slow tests (long chaos, large histories)
	$(BIN)/python -m pytest -m slow $(PYTEST_ARGS)

test-docker: $(STAMP) ## run the tests that need a Docker engine
	$(BIN)/python -m pytest -m docker $(PYTEST_ARGS)

bench: $(STAMP) ## benchmark v4, v4-batched and v5 on the embedded cluster; report under results/
	$(BIN)/txnbench bench $(matrix_args)

# The pulsar target's heals take longer (a JVM broker restarts and loads in 30-60 s, an embedded one
# in about 2 s): chaos.yaml's timeline then runs about 300 s late, and with its 480 s the last 20 of
# 75 fault windows never ran (targets/pulsar/README.md, "Coverage"). DURATION overrides it.
PULSAR_CHAOS_DURATION ?= 800
# For chaos.yaml only: another scenario's length is part of its plan (chaos-sessions' last cut spans the
# load's end), so `make chaos TARGET=pulsar SCENARIO=chaos-sessions` keeps the scenario's own.
pulsar_chaos_duration = $(if $(and $(filter pulsar,$(TARGET)),$(if $(DURATION),,1),$(if $(filter-out chaos,$(SCENARIO)),,1)),--duration $(PULSAR_CHAOS_DURATION),)

chaos: $(STAMP) ## chaos matrix: each path under faults, recovery-code coverage measured (pulsar: JaCoCo); fails when any verdict is invalid
	$(BIN)/txnbench chaos $(if $(filter compose external,$(TARGET)),,--coverage) $(matrix_args) $(pulsar_chaos_duration)

sweep: $(STAMP) ## concurrency sweep: every path at USERS=4,16,48 users; sweep report under results/
	$(BIN)/txnbench sweep $(matrix_args) $(if $(USERS),--users $(USERS),)

peer: $(STAMP) ## pulsar-perf transaction and txnbench on one real Pulsar cluster: make peer TXN_PATH=v4 PULSAR_VERSION=4.0.8 LOAD_CPUS=1
	$(BIN)/txnbench peer $(or $(SCENARIO),atomic-produce) --path $(or $(TXN_PATH),v4) $(if $(PULSAR_VERSION),--pulsar-version $(PULSAR_VERSION),) $(if $(DURATION),--duration $(DURATION),) $(if $(LOAD_CPUS),--load-cpus $(LOAD_CPUS),)

fidelity: $(STAMP) ## bench, failover, chaos on embedded and real Pulsar side by side (PULSAR_LOCK=FILE per matrix; FROM="dirs" reuses)
	$(BIN)/txnbench fidelity $(if $(DURATION),--duration $(DURATION),) $(if $(PULSAR_LOCK),--pulsar-lock $(PULSAR_LOCK),) $(if $(FROM),--from $(FROM),)

selftest: $(STAMP) ## run every planted bug with the scenario meant to catch it, then under chaos.yaml alone (docs/selftest.md); fails on a tuned miss
	$(BIN)/txnbench selftest --with-chaos $(if $(DURATION),--duration $(DURATION),) $(if $(BUGS),--bugs $(BUGS),)

report: $(STAMP) ## rebuild reports: make report RUN=results/<run or matrix>
	@test -n "$(RUN)" || { echo "make report needs RUN=results/<run_id>; the newest runs are:"; ls -1dt results/*/ 2>/dev/null | head -5; exit 2; }
	$(BIN)/txnbench report $(RUN)

# The README's picture: the top of a matrix's compare.html, rendered by headless Chromium.
PICTURE      ?= docs/report-picture.png
PICTURE_SIZE ?= 1280,1640
report-picture: ## render the README's picture: make report-picture RUN=results/<matrix> (needs Chromium)
	@test -n "$(RUN)" && test -f "$(RUN)/compare.html" || { echo "make report-picture needs RUN=results/<matrix> (a folder with compare.html); the newest are:"; ls -1dt results/*/compare.html 2>/dev/null | head -5; exit 2; }
	@browser=$$(command -v chromium || command -v chromium-browser || command -v google-chrome) || { echo "make report-picture needs Chromium (Debian: apt-get install chromium)"; exit 2; }; \
	profile=$$(mktemp -d); \
	"$$browser" --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
	  --disable-sync --no-first-run --hide-scrollbars --user-data-dir="$$profile" --window-size=$(PICTURE_SIZE) \
	  --screenshot="$(abspath $(PICTURE))" "file://$(abspath $(RUN))/compare.html" >/dev/null 2>&1; \
	rc=$$?; rm -rf "$$profile"; test $$rc -eq 0 && test -s "$(PICTURE)" || { echo "Chromium failed to render $(RUN)/compare.html (exit $$rc)"; exit 1; }; \
	echo "wrote $(PICTURE) from $(RUN)/compare.html"

lint: $(STAMP) ## ruff, mypy and the import layers (lint-imports; contracts in pyproject.toml)
	$(BIN)/ruff check orchestrator targets harness workloads faults faultproxy embedded analysis tools tests
	$(BIN)/mypy orchestrator targets harness workloads faults faultproxy embedded analysis tools tests
	$(BIN)/lint-imports --no-cache

clean: ## stop a running embedded cluster and remove caches (keeps results/ and .venv)
	@if [ -x $(BIN)/txnbench ] && [ -f .txnbench/cluster/state.json ]; then $(BIN)/txnbench cluster down || true; fi
	rm -rf .pytest_cache .mypy_cache .ruff_cache build dist *.egg-info spark-warehouse metastore_db derby.log .txnbench/pycache
	find . -name __pycache__ -type d -not -path './$(VENV)/*' -prune -exec rm -rf {} +

distclean: clean ## also remove .venv (results/ stays)
	rm -rf $(VENV)
