# Larder — the commands people run. `make serve` and `make test` are the pair the README promises.
SHELL := /bin/bash
SWIFT ?= swift
DATA ?= data
PORT ?= 8080
CONFIG ?= release

.PHONY: deps build release serve test test-swift test-swift-postgres test-swift-s3 test-interop test-embedded stress bench bench-observe bench-commits gc-scale clean

# Everything the tests need (PostgreSQL, OpenStack Swift, Chromium, Node, .venv, …).
deps:
	@scripts/deps.sh

# Only what building and running the server needs: the C libraries' -dev packages.
.PHONY: deps-serve
deps-serve:
	@scripts/deps.sh serve

build: deps-serve
	$(SWIFT) build

release: deps-serve
	$(SWIFT) build -c release --product larder

# Runs the service on $(DATA) (default ./data) with storage.rules.example, on $(PORT) (default
# 8080): `make serve PORT=9000 DATA=/srv/larder`. The binary is .build/release/larder.
serve: release
	@scripts/serve.sh "$(DATA)" "$(PORT)"

# Installs what is missing, builds, and runs every test: Swift suites (on SQLite, then the
# catalog-dependent ones again on PostgreSQL), then interop tests with real clients.
test: deps
	$(SWIFT) build --build-tests
	$(MAKE) --no-print-directory test-swift test-swift-postgres test-swift-s3 test-interop test-embedded

test-swift:
	$(SWIFT) test --skip-build

# The catalog-dependent suites a second time with the catalog on a throw-away PostgreSQL on
# loopback (scripts/pg.sh; every store in a fresh schema), stopped however the run ends.
# Without the server binaries it says SKIPPED loudly and passes.
PG_TEST_DIR ?= /tmp/larder-test-pg
PG_TEST_PORT ?= 15433
PG_SUITES ?= LarderTests|LarderServerTests|LarderCLITests|LarderClientTests|LarderImagesTests
test-swift-postgres:
	@url=$$(scripts/pg.sh start "$(PG_TEST_DIR)" "$(PG_TEST_PORT)"); rc=$$?; \
	if [ $$rc = 3 ]; then \
	  echo "*** SKIPPED: the PostgreSQL pass (no PostgreSQL server binaries; apt-get install postgresql) ***"; exit 0; \
	elif [ $$rc != 0 ]; then exit $$rc; fi; \
	trap 'scripts/pg.sh stop "$(PG_TEST_DIR)"' EXIT; \
	echo "PostgreSQL pass: LARDER_TEST_CATALOG=$$url"; \
	LARDER_TEST_CATALOG="$$url" $(SWIFT) test --skip-build --filter '$(PG_SUITES)'

# The suites that move blobs (the object, Range, tus and Firebase protocols, the backend
# contract, the PUT/DELETE race, three `larder serve` nodes) with the catalog on PostgreSQL and
# the blobs in OpenStack Swift's S3 API, both throw-away on loopback (every store in a fresh
# schema and key prefix). Without either engine it says SKIPPED loudly and passes.
S3_TEST_DIR ?= /tmp/larder-test-s3
S3_TEST_PORT ?= 15500
S3_PG_TEST_DIR ?= /tmp/larder-test-s3-pg
S3_PG_TEST_PORT ?= 15434
S3_SUITES ?= GCDryRunTests|UploadRowReadTests|StoreIdentityTests|KeyedWriteTests|KeyedWriteNodeTests|ObjectEndpointTests|ImageVariantDownloadTests|ImageVariantPolicyTests|VariantCacheTests|RangeAndConditionalTests|CachedDownloadTests|TusConformanceTests|FirebaseResumableUploadTests|FirebaseMultipartUploadTests|GcsClientWireTests|LarderS3Tests|MultiNodeTests|S3FailureAnswerTests|S3StreamingDownloadTests|S3CommandTests|BackupCommandTests|S3BackupDestinationTests
test-swift-s3:
	@if ! command -v swift-proxy-server >/dev/null; then \
	  echo "*** SKIPPED: the S3 pass (no OpenStack Swift; scripts/deps.sh installs swift-proxy swift-account swift-container swift-object memcached) ***"; exit 0; fi; \
	pg=$$(scripts/pg.sh start "$(S3_PG_TEST_DIR)" "$(S3_PG_TEST_PORT)"); rc=$$?; \
	if [ $$rc = 3 ]; then \
	  echo "*** SKIPPED: the S3 pass (no PostgreSQL server binaries; apt-get install postgresql) ***"; exit 0; \
	elif [ $$rc != 0 ]; then exit $$rc; fi; \
	trap 'scripts/pg.sh stop "$(S3_PG_TEST_DIR)"; scripts/swift-s3.sh stop "$(S3_TEST_DIR)"' EXIT; \
	s3=$$(scripts/swift-s3.sh start "$(S3_TEST_DIR)" "$(S3_TEST_PORT)" larder-test) || exit $$?; \
	echo "S3 pass: LARDER_TEST_CATALOG=$$pg LARDER_TEST_BLOBS=$$s3"; \
	LARDER_TEST_CATALOG="$$pg" LARDER_TEST_BLOBS="$$s3" LARDER_TEST_S3="$$s3" \
	  AWS_ACCESS_KEY_ID=test:tester AWS_SECRET_ACCESS_KEY=testing \
	  $(SWIFT) test --skip-build --filter '$(S3_SUITES)'

# An app outside the package that uses the `Larder` product alone builds, runs and links neither
# libpq nor libcurl; the `Larder` target depends on no PostgreSQL, S3 or curl module.
test-embedded:
	scripts/embedded-app-check.sh

test-interop:
	LARDER_BIN=$$($(SWIFT) build --show-bin-path)/larder .venv/bin/python -m pytest -q -rs interop

# The full stress scenarios (a few minutes); writes stress/results/latest.md. Short forms run in `make test`.
stress: deps
	$(SWIFT) build --product larder
	LARDER_BIN=$$($(SWIFT) build --show-bin-path)/larder .venv/bin/python -m stress.run

bench: deps
	$(SWIFT) build -c release --product larder
	Benchmarks/run.sh
	Benchmarks/model-observe/run.sh
	Benchmarks/catalog-commit/run.sh
	Benchmarks/events/run.sh
	Benchmarks/backup/run.sh

# Alone: cross-process observation latency on SQLite, p50/p99 over 1,000 commits.
bench-observe: deps
	Benchmarks/model-observe/run.sh

# Alone: catalog commits/s of serial 4 KiB uploads through the library, on SQLite (and on
# PostgreSQL with BENCH_COMMITS_PG=postgres://…).
bench-commits: deps
	Benchmarks/catalog-commit/run.sh "$${BENCH_COMMITS_PG:-}"

# Garbage collection on a generated store of N blobs (default 1 000 000, 10 % orphans).
GC_SCALE_DIR ?= /tmp/larder-gc-scale
# Prints each run's time and peak RSS, and checks the dry run reported what gc then did;
# GC_SCALE_VERIFY=1 also times a full verify (Benchmarks/gc-scale/run.sh).
gc-scale: release
	Benchmarks/gc-scale/run.sh "$(GC_SCALE_DIR)" $${N:-1000000}

clean:
	rm -rf .build .venv
