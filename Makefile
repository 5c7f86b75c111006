# Larder — the commands people run. `make serve` and `make test` are the pair the README promises.
SHELL := /bin/bash
SWIFT ?= swift
DATA ?= data
PORT ?= 8080
CONFIG ?= release

.PHONY: deps build release serve test test-swift test-swift-postgres test-interop stress bench gc-scale clean

deps:
	@scripts/deps.sh

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release --product larder

# Runs the service on ./data with storage.rules.example.
serve: release
	@scripts/serve.sh "$(DATA)" "$(PORT)"

# Installs what is missing, builds, and runs every test: Swift suites (on SQLite, then the
# catalog-dependent ones again on PostgreSQL), then interop tests with real clients.
test: deps
	$(SWIFT) build --build-tests
	$(MAKE) --no-print-directory test-swift test-swift-postgres test-interop

test-swift:
	$(SWIFT) test --skip-build

# The catalog-dependent suites a second time with the catalog on a throw-away PostgreSQL on
# loopback (scripts/pg.sh; every store in a fresh schema), stopped however the run ends.
# Without the server binaries it says SKIPPED loudly and passes.
PG_TEST_DIR ?= /tmp/larder-test-pg
PG_TEST_PORT ?= 15433
PG_SUITES ?= LarderTests|LarderServerTests|LarderCLITests|LarderClientTests
test-swift-postgres:
	@url=$$(scripts/pg.sh start "$(PG_TEST_DIR)" "$(PG_TEST_PORT)"); rc=$$?; \
	if [ $$rc = 3 ]; then \
	  echo "*** SKIPPED: the PostgreSQL pass (no PostgreSQL server binaries; apt-get install postgresql) ***"; exit 0; \
	elif [ $$rc != 0 ]; then exit $$rc; fi; \
	trap 'scripts/pg.sh stop "$(PG_TEST_DIR)"' EXIT; \
	echo "PostgreSQL pass: LARDER_TEST_CATALOG=$$url"; \
	LARDER_TEST_CATALOG="$$url" $(SWIFT) test --skip-build --filter '$(PG_SUITES)'

test-interop:
	LARDER_BIN=$$($(SWIFT) build --show-bin-path)/larder .venv/bin/python -m pytest -q -rs interop

# The full stress scenarios (a few minutes); writes stress/results/latest.md. Short forms run in `make test`.
stress: deps
	$(SWIFT) build --product larder
	LARDER_BIN=$$($(SWIFT) build --show-bin-path)/larder .venv/bin/python -m stress.run

bench: deps
	$(SWIFT) build -c release --product larder
	Benchmarks/run.sh

# Garbage collection on a generated store of N blobs (default 1 000 000, 10 % orphans).
GC_SCALE_DIR ?= /tmp/larder-gc-scale
gc-scale: release
	rm -rf "$(GC_SCALE_DIR)"
	python3 Benchmarks/gc-scale/generate.py "$(GC_SCALE_DIR)" $${N:-1000000}
	command -v /usr/bin/time >/dev/null || apt-get install -y -qq time >/dev/null
	/usr/bin/time -v "$$($(SWIFT) build -c release --show-bin-path)/larder" gc --grace 1h --json --data "$(GC_SCALE_DIR)"

clean:
	rm -rf .build .venv
