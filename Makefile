# Larder — the commands people run. `make serve` and `make test` are the pair the README promises.
SHELL := /bin/bash
SWIFT ?= swift
DATA ?= data
PORT ?= 8080
CONFIG ?= release

.PHONY: deps build release serve test test-swift test-interop stress bench gc-scale clean

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
