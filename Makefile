# troupe — two commands do all set-up on a fresh Debian 12 machine:
#   make run    install what is missing, build (release), start troupe on its defaults
#   make test   install what is missing, build (release), run every test
# Also: make asan | tsan | soak | fuzz | bench | format | check | build | deps | clean
#       | console-screenshots

SHELL := /bin/bash
.DEFAULT_GOAL := run

JOBS ?= $(shell nproc)
PRESET ?= release
BUILD_DIR := build/$(PRESET)
TROUPE := $(BUILD_DIR)/bin/troupe
# Extra ctest arguments, e.g. make test CTEST_ARGS='-R sse'
CTEST_ARGS ?=

# Debian packages troupe builds and runs with (stack.md). Boost is 1.81 on purpose:
# libboost-dev is 1.74, which lacks what Asio coroutines need on g++ 12.
APT_PACKAGES := build-essential cmake pkg-config ccache clang-format \
  libcaf-dev libmimalloc-dev libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev \
  libsimdjson-dev libcurl4-openssl-dev libssl-dev libsqlite3-dev catch2 libbenchmark-dev \
  libexpected-dev libseccomp-dev libre2-dev bubblewrap libfmt-dev libcli11-dev libtomlplusplus-dev libyaml-cpp-dev \
  libxml2-dev libexpat1-dev \
  curl python3 python3-numpy python3-pandas python3-matplotlib nodejs chromium

# Only `make fuzz` needs these: Debian's clang with libFuzzer (compiler-rt).
FUZZ_PACKAGES := clang-14 libclang-rt-14-dev
# Executions per fuzz target (make fuzz FUZZ_RUNS=100000), or, when FUZZ_TIME is set,
# seconds per target instead.
FUZZ_RUNS ?= 10000000
FUZZ_TIME ?=

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps fuzz-deps npm-deps configure build run test console-screenshots asan tsan soak fuzz fuzz-build bench bench-peers bench-peers-install format \
  format-check check clean

# install_missing(PACKAGES): apt-get installs those of PACKAGES that are not installed
# (no apt at all when every one is present).
define install_missing
	@missing=$$(for p in $(1); do \
	    dpkg-query -W -f='$${Status}\n' "$$p" 2>/dev/null | grep -q 'install ok installed' || echo "$$p"; \
	  done); \
	if [ -n "$$missing" ]; then \
	  echo "installing missing packages:" $$missing; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
endef

## deps: install the Debian packages that are missing (skips apt when all are present)
deps:
	$(call install_missing,$(APT_PACKAGES))

## fuzz-deps: what deps installs, plus clang and libFuzzer for make fuzz
fuzz-deps: deps
	$(call install_missing,$(FUZZ_PACKAGES))

## npm-deps: the npm packages tests use (the official openai client; the MCP conformance
## suite, server-everything, the MCP SDK and Node 22 for the suite; playwright-core for the
## console's browser tests, which drive Debian's chromium), from the registry
## with the committed lock files. npm itself comes with nodesource's nodejs, or from
## Debian's npm package when missing.
OPENAI_CLIENT_DIR := tests/openai-client
MCP_TEST_DIR := tests/mcp
CONSOLE_TEST_DIR := tests/console
npm-deps: deps
	@command -v npm >/dev/null || { $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends npm; }
	@[ $(OPENAI_CLIENT_DIR)/node_modules/.package-lock.json -nt $(OPENAI_CLIENT_DIR)/package-lock.json ] || \
	  npm ci --prefix $(OPENAI_CLIENT_DIR) --no-audit --no-fund --loglevel=error
	@[ $(MCP_TEST_DIR)/node_modules/.package-lock.json -nt $(MCP_TEST_DIR)/package-lock.json ] || \
	  npm ci --prefix $(MCP_TEST_DIR) --no-audit --no-fund --loglevel=error
	@[ $(CONSOLE_TEST_DIR)/node_modules/.package-lock.json -nt $(CONSOLE_TEST_DIR)/package-lock.json ] || \
	  npm ci --prefix $(CONSOLE_TEST_DIR) --no-audit --no-fund --loglevel=error

configure: deps
	@[ -f $(BUILD_DIR)/CMakeCache.txt ] || cmake --preset $(PRESET)

build: configure
	cmake --build --preset $(PRESET) -j $(JOBS)

## run: build and start troupe with its embedded defaults (127.0.0.1:8080, ./var/troupe)
run: build
	$(TROUPE) serve

## test: build and run every test (CI runs this)
test: build npm-deps
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 600 $(CTEST_ARGS)

## console-screenshots: the console's browser tests, writing every page's screenshot to
## docs/console/ (docs/console.md shows them); make test writes them under build/ instead
console-screenshots: build npm-deps
	tests/console/run.sh $(CURDIR)/$(TROUPE) $(CURDIR)/$(BUILD_DIR)/tests/console --screenshots $(CURDIR)/docs/console

## asan: build with AddressSanitizer + UBSan and run every test
asan:
	$(MAKE) test PRESET=asan

## tsan: build the net, actors and integration suites (and the troupe binary their nodes run)
## with ThreadSanitizer (preset tsan) and run them; TSAN_OPTIONS and the suppressions
## (tests/tsan.supp) come from the test preset. The residue soak is left out: it measures
## RSS, which TSan's shadow memory makes meaningless.
TSAN_TARGETS := troupe_net_tests troupe_actors_tests troupe_integration_tests troupe
tsan: deps npm-deps
	@[ -f build/tsan/CMakeCache.txt ] || cmake --preset tsan
	cmake --build --preset tsan -j $(JOBS) --target $(TSAN_TARGETS)
	ctest --preset tsan -j $(JOBS) --timeout 600 $(CTEST_ARGS)

## soak: the residue soak at the issue's scale: 200,000 /v1/chat/completions at
## concurrency 8, RSS at the end within 10% of its value after the first 10,000
## (tests/integration/residue_soak_test.cpp; make test runs it at 10,000)
soak: build
	$(BUILD_DIR)/tests/troupe_integration_tests "[soak][slow]"

## fuzz-build: the libFuzzer targets of fuzz/ (preset fuzz: clang-14, ASan + UBSan)
fuzz-build: fuzz-deps
	@[ -f build/fuzz/CMakeCache.txt ] || cmake --preset fuzz
	cmake --build --preset fuzz -j $(JOBS) --target troupe_fuzz

## fuzz: build the fuzz targets and run each, one at a time, to FUZZ_RUNS executions (or
## for FUZZ_TIME seconds); figures and commands in docs/testing.md. Not part of make test.
fuzz: fuzz-build
	scripts/fuzz.sh $(if $(FUZZ_TIME),--time $(FUZZ_TIME),--runs $(FUZZ_RUNS))

## bench: the micro-benchmarks in full, then the agent scenario on the JS peers and on
## troupe in the same session, side by side as ratios (bench/load/results/agent.json)
bench: build bench-peers
	@for b in $(BUILD_DIR)/bench/troupe_*_bench; do echo "== $$b"; $$b; done
	$(TROUPE) bench --scenario agent --peers $(CURDIR)/bench/peers/results \
	  --out $(CURDIR)/bench/load/results/agent.json

## bench-peers: the agent scenario on the JS peers (bench/peers/README.md), packages from npm;
## OpenClaw (bench/peers/openclaw, ~650 MB) runs on the Node 24 of the npm package `node`,
## installed first so that openclaw's own install scripts run on it
bench-peers: build npm-deps bench-peers-install
	TROUPE=$(CURDIR)/$(TROUPE) bench/peers/run_peers.sh

## bench-peers-install: only the peers' npm packages (make bench-peers runs them too)
bench-peers-install: npm-deps
	npm ci --prefix bench/peers/openai-agents --no-audit --no-fund
	npm ci --prefix bench/peers/langgraph --no-audit --no-fund
	npm ci --prefix bench/peers/openclaw/runtime --no-audit --no-fund
	PATH=$(CURDIR)/bench/peers/openclaw/runtime/node_modules/.bin:$$PATH \
	  npm ci --prefix bench/peers/openclaw --no-audit --no-fund

format:
	git ls-files '*.cpp' '*.hpp' | xargs clang-format -i

format-check:
	git ls-files '*.cpp' '*.hpp' | xargs clang-format --dry-run --Werror

## check: what CI runs, plus the format check
check:
	scripts/local-checks.sh

clean:
	rm -rf build
