# The few commands a person needs. Each target builds the virtual environment it uses.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# A crashed xdist worker (a test killed by pytest-timeout's thread method) ends the run instead of being
# replaced: a replacement can leave the group scheduler of tests/heavy.py waiting forever for the lost group.
PYTEST_ARGS ?= -n 2 --max-worker-restart=0

.PHONY: install demo ui defs test test-all test-slow coverage client-envs prerequisites lint docs bench bench-env fixtures bench-spark-env interop test-delta-spark reference-tests fuzz soak emulators clean

# torch 2.13.0 (CPU) goes in first, from local disk, so nothing pulls a multi-GB CUDA build.
# constraints.txt holds known-good versions, so pip resolves in seconds instead of backtracking.
$(STAMP): pyproject.toml constraints.txt setup.py mds_core/order/shuffle/_fisher_yates.c
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]' -c constraints.txt
	touch $@

install: $(STAMP)

# Dagster runs in the project root with DAGSTER_HOME there, so the top-level dagster.yaml is the instance
# configuration (and Dagster finds no other one to warn about); it keeps runs, events and schedules in
# .dagster_home/. DAGSTER_DISABLE_TELEMETRY stops the telemetry thread that makes empty logs/ and
# .logs_queue/ folders in DAGSTER_HOME even with telemetry off. Tables and shard sets go to data/.
DAGSTER_HOME ?= $(CURDIR)
MDS_DATA_DIR ?= $(CURDIR)/data
DAGSTER_ENV  := DAGSTER_HOME=$(DAGSTER_HOME) DAGSTER_DISABLE_TELEMETRY=1 MDS_DATA_DIR=$(MDS_DATA_DIR)
UI_PORT      ?= 3000

# The whole pipeline on the embedded digits: the last three days, each a run of digits_daily launched through the
# instance's queue (a daemon serves it meanwhile), smoke-tested and published; prints the checks' results and the versions.
demo: install
	$(DAGSTER_ENV) $(PY) -m pipelines.demo

# The Dagster UI (webserver and daemon) on http://127.0.0.1:$(UI_PORT): `dg dev`, which loads the project
# [tool.dg] in pyproject.toml declares. It runs with the project's .venv activated (dg warns when the active
# environment is not the project's); it checks the component files (pipelines/defs/*/defs.yaml) first.
# `make demo` writes its dataset's registry (digits, starting on the first day it converts) to DEMO_REGISTRY; `make ui`
# loads that one when it is there and MDS_DATASETS is not set, so the UI's partitions are the demo's days.
DEMO_REGISTRY := $(MDS_DATA_DIR)/demo-datasets.yaml
ui: install
	$(DAGSTER_ENV) $(PY) -m pipelines.instance $(DAGSTER_HOME)
	VIRTUAL_ENV=$(CURDIR)/$(VENV) PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(DAGSTER_ENV) \
		MDS_DATASETS="$${MDS_DATASETS:-$$(test -f $(DEMO_REGISTRY) && echo $(DEMO_REGISTRY))}" \
		$(VENV)/bin/dg dev -h 127.0.0.1 -p $(UI_PORT)

# The code location's component files checked and its definitions listed, as `dg` does in the project's .venv,
# the list narrow enough for 80 columns.
defs: install
	VIRTUAL_ENV=$(CURDIR)/$(VENV) PATH="$(CURDIR)/$(VENV)/bin:$$PATH" \
		sh -c 'dg check yaml && dg list defs --columns key,group,kinds'

# System prerequisites first (Java 17+, a C compiler with Python headers, Chromium and chromedriver):
# a missing one is named with the package to install, before minutes of installs. Then the static gates
# (make lint), the documentation site (strict), and the suite without what is slow and unique, with
# coverage. A skipped test fails the run (--fail-on-skip): every path it names is one we claim to test.
# A test that hangs fails alone after 300 s (pytest-timeout, set in pyproject.toml), not the whole run.
PYTEST_GATE  := --fail-on-skip --durations=15
COVERAGE     := --cov=mds_core --cov=pipelines --cov-report=
test: prerequisites install bench-env emulators lint docs
	$(PY) -m pytest $(PYTEST_ARGS) $(PYTEST_GATE) $(COVERAGE) -m "not slow and not timing and not delta_spark"
	$(PY) -m coverage report --fail-under=$(COVERAGE_FLOOR_TEST)

# Everything: `make test`, then what is slow and unique (tests marked `slow`: the webserver's history, the
# standalone cluster, kill loops over S3, the reference's own suite), then the tests marked `timing` alone,
# because they compare measured wall times with a model and other tests' load would be measured too.
test-all: test test-slow coverage

test-slow: install bench-env emulators client-envs
	$(PY) -m pytest $(PYTEST_ARGS) $(PYTEST_GATE) $(COVERAGE) --cov-append -m "slow and not timing and not delta_spark"
	$(PY) -m pytest -p no:xdist --timeout-method=signal $(PYTEST_GATE) -m timing

# Line coverage of mds_core and pipelines in the test processes (not in Spark's, DataLoader workers' or
# servers' subprocesses); the floors were set from the first measurement (docs/development.md).
COVERAGE_FLOOR_TEST ?= 92
COVERAGE_FLOOR_ALL  ?= 92
coverage:
	$(PY) -m coverage report --fail-under=$(COVERAGE_FLOOR_ALL) | tail -1

# The Databricks Connect clients (16.1 on Python 3.11, 17.3 on Python 3.12) and the `databricks` extra alone,
# each in its own environment under .cache/clients (tests/clients/setup_envs.sh); the slow tier uses them.
client-envs:
	bash tests/clients/setup_envs.sh

prerequisites:
	@PYTHON=$(PYTHON) bash scripts/check_prerequisites.sh

# Azurite (the Azure Blob emulator of tests/storage/test_stores.py), from npm into .cache/; once.
emulators: install
	$(PY) -m testsupport.emulators install

# The static gates: ruff's linter and formatter, mypy (strict on mds_core and pipelines, basic with the
# bodies of untyped functions checked on tests, testsupport and benchmarks) and the
# import layers of docs/architecture.md (import-linter; contracts in pyproject.toml).
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

# The documentation site, built into site/ in strict mode: a broken link or anchor fails.
docs: install
	$(PY) -m mkdocs build --strict --quiet

# The benchmark environment holds the reference (mosaicml-streaming 0.13.0, numpy<2.2) and litdata.
bench-env:
	bash benchmarks/setup_env.sh

# Golden fixtures: regenerate with the reference into FIXTURES_OUT (default a new temp dir), compare with tests/fixtures; FIXTURES_WRITE=1 replaces them.
fixtures: bench-env
	benchmarks/.venv/bin/python -m tools.golden check $(if $(FIXTURES_OUT),--out $(FIXTURES_OUT)) $(if $(FIXTURES_WRITE),--write)

# Interoperability alone: the reference reads what our writer writes (tests/test_interop.py).
interop: install bench-env
	$(PY) -m pytest $(PYTEST_ARGS) tests/test_interop.py

# Spark with Delta Lake against delta-rs on the same table versions (tests/delta_spark). Spark fetches Delta's
# jars from Maven, which CI cannot reach: run it where Maven is reachable (DELTA_SPARK_PACKAGE picks the build).
test-delta-spark: install
	$(PY) -m pytest -p no:xdist -m delta_spark tests/delta_spark

# The reference's own test suite (from its sdist on PyPI, cached in .cache/) against the reference, then against
# mds_core through a shim: prints both counts of the public-API tests and every failure grouped by its reason
# (docs/differences.md, "The reference's own tests"). Both runs at once, one process each: about 35 minutes, or
# 15 once the reference's result is cached.
reference-tests: install bench-env
	$(PY) tools/reference_tests/run.py

# The fuzzing campaign (docs/development.md, "Fuzzing"): 100,000 mutated inputs per target (index.json,
# datasets opened over damaged indexes, shards, every encoding, compressed shards, state dicts, manifests,
# verify's detection; `dataset` runs a fifth of them), then hostile inputs (decompression bombs, symlinked
# caches, hostile shard sets and run config), one process per core; half an hour or more on two cores.
# Not part of `make test`, which runs a slice of it (tests/fuzz/test_fuzz_slice.py).
FUZZ_INPUTS ?= 100000
fuzz: install
	$(PY) -m tests.fuzz.run --inputs $(FUZZ_INPUTS)

# The soak (docs/operations.md, "Soak test"), not part of `make test`: 2 ranks x 4 DataLoader workers read a
# pinned shard-set version from a local S3 server through a proxy that fails 5% of GETs, under a cache_limit,
# while a writer commits new versions, for SOAK_MINUTES; then every epoch is checked exactly-once, the cache
# against its limit, and each process's RSS, fds and threads for growth. Report in soak-report/ (JSON, text,
# CSV, PNG); exits non-zero if a check fails. tests/soak/test_soak_short.py runs a small one in make test-all.
SOAK_MINUTES ?= 10
soak: install
	$(PY) -m tests.soak.soak --minutes $(SOAK_MINUTES) --out soak-report

# The benchmarks, side by side with the reference where there is one, as benchmarks/RESULTS.md was measured (about
# 80 minutes; see docs/benchmarks.md). bench_disk.py (larger than RAM) is run by hand.
bench: install bench-env bench-spark-env
	benchmarks/.venv/bin/python benchmarks/bench_format.py --out benchmarks/results-latest.md
	benchmarks/.venv/bin/python benchmarks/bench_streaming.py --out benchmarks/results-streaming-latest.md
	benchmarks/.venv/bin/python benchmarks/bench_schedule.py
	$(PY) benchmarks/bench_spark.py --scenarios local
	$(PY) benchmarks/bench_plan.py
	$(PY) benchmarks/bench_torch_distributor.py

# The reference's Spark converter needs pyspark 3.5: a third environment, benchmarks/.venv-spark35.
bench-spark-env:
	bash benchmarks/setup_spark_env.sh

clean:
	rm -rf $(VENV) benchmarks/.venv benchmarks/.venv-spark35 data .pytest_cache .hypothesis site
