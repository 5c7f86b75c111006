# Larder — the commands people run. `make serve` and `make test` are the pair the README promises.
SHELL := /bin/bash
SWIFT ?= swift
DATA ?= data
PORT ?= 8080
CONFIG ?= release

.PHONY: deps build release serve test test-swift test-interop bench clean

deps:
	@scripts/deps.sh

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release --product larder

# Runs the service on ./data with storage.rules.example.
serve: release
	@scripts/serve.sh "$(DATA)" "$(PORT)"

# Installs what is missing, builds, and runs every test: Swift suites, then interop tests with real clients.
test: deps
	$(SWIFT) build --build-tests
	$(MAKE) --no-print-directory test-swift test-interop

test-swift:
	$(SWIFT) test --skip-build

test-interop:
	@if ls tests/interop/test_*.py >/dev/null 2>&1; then \
	  LARDER_BIN=$$($(SWIFT) build --show-bin-path)/larder .venv/bin/python -m pytest -q tests/interop; \
	else echo "no interop tests yet"; fi

bench: deps
	$(SWIFT) build -c release --product larder
	Benchmarks/run.sh

clean:
	rm -rf .build .venv
