# Two commands on a fresh machine: `make serve` runs the broker, `make test` passes the tests.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
PYTEST_ARGS ?=
#: the modules `make native` compiles (tools/native-modules): a change to one rebuilds them
NATIVE_MODULES := $(shell grep -v '^\#' tools/native-modules)

.PHONY: system-packages native serve test lint typecheck bench compare soak roundtrip class-archive txn-soak cleaner-soak quota-soak schema-registry fuzz fuzz-seed clean

$(VENV)/.base-installed: pyproject.toml
	test -x $(PY) || tools/ensure-system-packages python3-venv
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e .
	touch $@

$(VENV)/.dev-installed: pyproject.toml
	test -x $(PY) || tools/ensure-system-packages python3-venv
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[dev]'
	touch $(VENV)/.base-installed $@

## Compile the request path with mypyc (tools/build_native.py): `serve`, `test` and `bench` run
## compiled; the package itself stays plain Python and runs interpreted where this has not run.
native: $(VENV)/.native-built

$(VENV)/.native-built: $(VENV)/.base-installed tools/native-modules tools/build_native.py $(NATIVE_MODULES)
	tools/ensure-system-packages gcc python3-dev
	$(PIP) install -q 'mypy>=1.10' 'setuptools>=68'
	$(PY) tools/build_native.py
	touch $@

## What the tests need that pip cannot install (Java, kcat, Chromium, a font): apt-get, as root.
system-packages:
	tools/ensure-system-packages

## Run the broker on 127.0.0.1:9092 with data under ./data (Ctrl-C stops it cleanly).
serve: $(VENV)/.base-installed $(VENV)/.native-built
	$(VENV)/bin/trio-broker serve --override listeners=PLAINTEXT://127.0.0.1:9092 --override log.dirs=./data

## Run the whole test suite, after installing the system packages it needs.
test: system-packages $(VENV)/.dev-installed $(VENV)/.native-built
	EXPECT_NATIVE_BUILD=1 $(PY) -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)

lint: $(VENV)/.dev-installed
	$(VENV)/bin/ruff check trio_broker tests bench

typecheck: $(VENV)/.dev-installed
	$(VENV)/bin/mypy trio_broker

## Benchmarks (not part of `make test`); figures go to docs/benchmarks.md.
bench: $(VENV)/.dev-installed $(VENV)/.native-built
	$(PY) bench/bench_pipeline.py
	$(PY) bench/bench_stalls.py
	$(PY) bench/bench_growth.py
	$(PY) bench/bench_produce_consume.py
	$(PY) bench/bench_clients.py
	$(PY) bench/bench_codec.py
	$(PY) bench/bench_zero_copy.py
	$(PY) bench/bench_schema_registry.py
	$(PY) bench/bench_scale.py

## The Spark round trips at 1,000,000 rows (the suite runs 100,000): sink -> source, import -> export.
roundtrip: $(VENV)/.dev-installed
	TRIO_BROKER_ROUNDTRIP_ROWS=1000000 $(PY) -m pytest -q -p no:cacheprovider --timeout 1800 tests/spark/test_roundtrip.py

## The Spark class archive's whole cycle with real JVMs (the suite maps the JDK's own archive).
class-archive: $(VENV)/.dev-installed
	CLASS_ARCHIVE_CYCLE=1 $(PY) -m pytest -q -p no:cacheprovider tests/spark/test_class_archive.py

## One broker under every kind of client at once for SOAK_SECONDS (default an hour): RSS,
## descriptors, loop stalls and produce p99 sampled each minute into build/soak/soak.csv, plots
## in docs/img/soak.png, and a verdict (exit 1 on a leak or a p99 drift); docs/reliability.md.
SOAK_SECONDS ?= 3600
soak: $(VENV)/.dev-installed
	SOAK_SECONDS=$(SOAK_SECONDS) $(PY) bench/soak.py --out build/soak --plot docs/img/soak.png

## 20 kill -9 cycles of running transactions (the suite runs 3 of them).
txn-soak: $(VENV)/.dev-installed
	TXN_CRASH_CYCLES=20 $(PY) -m pytest -q -p no:cacheprovider tests/transactions/test_crash_cycles.py

## 20 kill -9 cycles during log cleaning (the suite runs 3 of them).
cleaner-soak: $(VENV)/.dev-installed
	CLEANER_KILL_CYCLES=20 $(PY) -m pytest -q -p no:cacheprovider -s tests/log/test_cleaner_crash.py

## 10,000 records per format (Avro, JSON Schema, Protobuf) through confluent-kafka's serializers
## and the broker's Schema Registry (the suite: 2,000).
schema-registry: $(VENV)/.dev-installed
	SCHEMA_REGISTRY_RECORDS=10000 $(PY) -m pytest -q -p no:cacheprovider tests/schema_registry/test_clients.py

## Client quotas at Kafka's default burst for 20 s, measured over seconds 5-20 (the suite: 6 s).
quota-soak: $(VENV)/.dev-installed
	QUOTA_RUN_S=20 $(PY) -m pytest -q -p no:cacheprovider -s tests/authz/test_quota_throttling.py

## Each fuzz target for FUZZ_SECONDS under atheris, one at a time, then its corpus minimised back
## into fuzz/corpus/<target>/ (a small set of inputs reaching every edge reached; regress-* inputs
## always kept); crashes land in build/fuzz/artifacts/.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= request_frames request_body record_batches consumer_protocol sasl_tokens \
	control_body console_form config_file
FUZZ_LIMITS ?= -rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=10 -max_len=8192
fuzz: $(VENV)/.dev-installed
	@set -e; for t in $(FUZZ_TARGETS); do \
		rm -rf build/fuzz/$$t build/fuzz/$$t.min; mkdir -p build/fuzz/$$t build/fuzz/$$t.min build/fuzz/artifacts; \
		echo "== $$t: $(FUZZ_SECONDS) s"; \
		dict=; test -f fuzz/dicts/$$t.dict && dict=-dict=fuzz/dicts/$$t.dict; \
		$(PY) fuzz/run.py $$t $(FUZZ_LIMITS) $$dict -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
			-artifact_prefix=build/fuzz/artifacts/$$t- build/fuzz/$$t fuzz/corpus/$$t; \
		$(PY) fuzz/run.py $$t $(FUZZ_LIMITS) -use_counters=0 -set_cover_merge=1 build/fuzz/$$t.min fuzz/corpus/$$t build/fuzz/$$t \
			2>build/fuzz/$$t.merge.log; \
		cp fuzz/corpus/$$t/regress-* build/fuzz/$$t.min/ 2>/dev/null || true; \
		test -n "$$(ls build/fuzz/$$t.min)" && { rm -rf fuzz/corpus/$$t; mv build/fuzz/$$t.min fuzz/corpus/$$t; }; \
	done

## Rewrite the seed inputs (valid requests, batches, payloads) into fuzz/corpus/, and the
## dictionaries into fuzz/dicts/.
fuzz-seed: $(VENV)/.dev-installed
	$(PY) fuzz/seed.py

## Each benchmark alternately on BASE (a git revision) and on this checkout, in one run.
BASE ?= fe8d540
compare: $(VENV)/.dev-installed
	$(PY) bench/compare_revisions.py --base $(BASE)

clean:
	test ! -x $(PY) || $(PY) tools/build_native.py --clean
	rm -rf $(VENV) build *.egg-info .pytest_cache
