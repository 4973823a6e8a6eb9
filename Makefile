# gpuhub — one entry point for people and CI.
#   make run    install what is missing, build, start `gpuhub serve` on an embedded SQLite database
#   make test   install what is missing (test tools too), build, run every test
#   make build  build/gpuhub            make bench  Google Benchmark programs in bench/
SHELL := /bin/bash
BUILD_DIR ?= build
FUZZ_DIR ?= build-fuzz
JOBS ?= $(shell nproc)
LISTEN ?= 127.0.0.1:8080
DB ?= sqlite:gpuhub.db
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1

CMAKE_FLAGS := -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER_LAUNCHER=ccache

.PHONY: all deps test-deps configure build build-all run test unit-test fuzz bench clean format

all: build

deps:
	@bash scripts/install-deps.sh

test-deps:
	@bash scripts/install-deps.sh --with-test-tools

configure: deps
	@cmake -S . -B $(BUILD_DIR) $(CMAKE_FLAGS) >/dev/null

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS) --target gpuhub

run: build
	@bash scripts/run.sh $(BUILD_DIR)/gpuhub "$(LISTEN)" "$(DB)"

build-all: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# Unit tests only (no PostgreSQL, no browser): the quick loop while coding.
unit-test: build-all
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) -LE integration

fuzz: deps
	@cmake -S . -B $(FUZZ_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
	  -DGPUHUB_BUILD_TESTS=OFF -DGPUHUB_BUILD_BENCH=OFF -DGPUHUB_BUILD_FUZZ=ON >/dev/null
	cmake --build $(FUZZ_DIR) -j $(JOBS) --target fuzz_all
	bash tests/fuzz/run.sh $(FUZZ_DIR)

test: test-deps build-all
	bash scripts/test.sh $(BUILD_DIR)
	$(MAKE) --no-print-directory fuzz
	@echo "make test: all tests passed"

bench: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)
	bash bench/run.sh $(BUILD_DIR)

format:
	find src bench tests -name '*.h' -o -name '*.cc' | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR) $(FUZZ_DIR)
