# sonde: `make help` lists the targets.
.DEFAULT_GOAL := build
SHELL := /bin/bash
JOBS ?= $(shell nproc)
BUILD ?= build
TEST_BUILD ?= build/test
FUZZ_BUILD ?= build/fuzz
BENCH_BUILD ?= build/bench
FUZZ_SECONDS ?= 20
CMAKE_GEN := -G Ninja

SOURCES = $(shell git ls-files '*.cpp' '*.h' '*.c' 2>/dev/null | grep -v '^bpf/vmlinux')

.PHONY: help deps build test-build test unit-test fuzz e2e chart chart-test crds image image-test run bench fmt fmt-check tidy lint clean

help:
	@echo "make deps       install the Debian packages (root, idempotent)"
	@echo "make build      build $(BUILD)/bin/sonde-agent and $(BUILD)/bin/sonde-operator"
	@echo "make test       ASan+UBSan build, unit + kernel (bpf) tests, fuzzers, e2e, format, clang-tidy"
	@echo "make unit-test  | make fuzz | make e2e | make chart-test   the parts of make test"
	@echo "make chart      package the Helm chart into $(BUILD)/chart (helm package)"
	@echo "make crds       generate crds/, the chart's CRDs and their test tables from crds/src/"
	@echo "make image      container image localhost/sonde:<chart appVersion> (podman or docker)"
	@echo "make image-test build the image and run it as the chart does (part of make test)"
	@echo "make run        the agent standalone on this host with a demo workload"
	@echo "make bench      benchmarks (results in bench/RESULTS.md)"
	@echo "make fmt        clang-format the sources; make lint: format check + clang-tidy"

deps:
	@scripts/install-deps.sh
	@scripts/install-helm.sh
	@scripts/install-test-nodes.sh
	@scripts/install-test-go-binaries.sh

build:
	cmake -S . -B $(BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSONDE_BUILD_TESTS=OFF
	cmake --build $(BUILD) -j $(JOBS)

# The test build keeps sanitizers on; tests labelled `bpf` need root and the real kernel. The
# e2e tests run its binaries too, so `make test` compiles everything once.
test-build:
	cmake -S . -B $(TEST_BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug -DSONDE_SANITIZE=ON
	cmake --build $(TEST_BUILD) -j $(JOBS)

unit-test: test-build
	@scripts/run-ctest.sh $(TEST_BUILD)

fuzz:
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug \
	  -DSONDE_BUILD_FUZZ=ON -DSONDE_BUILD_TESTS=OFF
	@targets=$$(cut -d= -f1 $(FUZZ_BUILD)/fuzz-targets.txt | sed '/^$$/d'); \
	if [ -n "$$targets" ]; then cmake --build $(FUZZ_BUILD) -j $(JOBS) --target $$targets; fi
	@scripts/run-fuzzers.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

e2e: test-build
	@scripts/run-e2e.sh $(TEST_BUILD)

# The packaged chart, build/chart/sonde-<version>.tgz, once its version is the project's.
chart:
	@scripts/chart-version.sh
	helm package charts/sonde -d $(BUILD)/chart

# The CRDs in crds/ and charts/sonde/crds/, the fake API server's instrumentation rule and the
# C++ registry's list to check are generated from crds/src/ (scripts/gen-crds.py). `make test`
# fails while one is stale (ctest crd_generated, chart-test).
crds:
	@python3 scripts/gen-crds.py

# The Helm chart: lint, render, invariants, CRDs in sync, dashboards, promtool rule tests.
chart-test:
	@scripts/chart-test.sh

# The unit and kernel tests, e2e tests and the format check run one after the other, each
# timed. Beside them, at the lowest priority (SCHED_IDLE: the CPU only when nothing else wants
# it; scripts/test-beside.sh), what measures no time: the image build, the fuzzers, clang-tidy
# and the chart's checks; their output is printed at the end.
# The image's tests need a container engine (`make deps` installs podman; without one they are
# skipped) and run last, on the image built beside. A failing step stops the rest.
TEST_STEPS = unit-test e2e fmt-check
test: test-build
	@rm -f $(TEST_BUILD)/flaky.txt
	@t0=$$(date +%s); setsid chrt --idle 0 nice -n 19 scripts/test-beside.sh $(TEST_BUILD) >$(TEST_BUILD)/beside.out 2>&1 & beside=$$!; \
	for step in $(TEST_STEPS); do start=$$(date +%s); \
	  if ! $(MAKE) --no-print-directory $$step; then kill -- -$$beside 2>/dev/null; \
	    echo "make test: $$step failed"; exit 1; fi; \
	  echo "make test: $$step took $$(( $$(date +%s) - start )) s"; done; \
	start=$$(date +%s); wait $$beside; rc=$$?; cat $(TEST_BUILD)/beside.out; \
	echo "make test: waited $$(( $$(date +%s) - start )) s for the steps beside"; \
	if [ -s $(TEST_BUILD)/image.ref ]; then \
	  SONDE_IMAGE=$$(cat $(TEST_BUILD)/image.ref) e2e/image/image_test.sh || rc=1; fi; \
	if [ -s $(TEST_BUILD)/flaky.txt ]; then echo "=== flaky tests (failed once, passed on retry) and leaked processes:"; \
	  cat $(TEST_BUILD)/flaky.txt; fi; \
	echo "make test: the tests took $$(( $$(date +%s) - t0 )) s after the build"; \
	if [ $$rc -ne 0 ]; then echo "make test: FAILED (see the FAILED lines above)"; fi; exit $$rc

image:
	@scripts/image.sh

image-test:
	@e2e/image/image_test.sh

run: build
	@scripts/run-standalone.sh $(BUILD)

bench:
	cmake -S . -B $(BENCH_BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Release -DSONDE_BUILD_BENCH=ON \
	  -DSONDE_BUILD_TESTS=OFF
	cmake --build $(BENCH_BUILD) -j $(JOBS)
	@for s in bench/*/run.sh; do [ -x "$$s" ] && "$$s" $(BENCH_BUILD) || exit 1; done

fmt:
	clang-format -i $(SOURCES)

fmt-check:
	@clang-format --dry-run -Werror $(SOURCES) && echo "fmt-check: clean"

# clang-tidy (.clang-tidy: warnings are errors) on the product's sources, with the test build's
# compile commands; tests, fuzzers and benchmarks are checked by running them. A file found clean
# is remembered by the hash of what clang-tidy reads (scripts/tidy.py), so only changed files
# cost a run.
TIDY_SOURCES = $(shell git ls-files '*.cpp' 2>/dev/null | grep -v -e '^bench/' -e '/fuzz/' -e '/tests/' -e '/testing/')
tidy: test-build
	@scripts/tidy.py $(TEST_BUILD) $(JOBS) $(TIDY_SOURCES)

lint: fmt-check tidy

clean:
	rm -rf build
