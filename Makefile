# The two entry commands: `make demo` and `make test`. Everything else is CMake.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)

.PHONY: setup configure build demo test bench sanitize clean

setup:
	@./scripts/setup.sh

configure: setup
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

demo: build
	@$(BUILD_DIR)/bin/atp demo

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

bench: build
	@$(BUILD_DIR)/bin/quant_bench

# Every test again under AddressSanitizer + UndefinedBehaviorSanitizer (a separate build).
sanitize: setup
	@cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=Debug -DATP_SANITIZE=ON >/dev/null
	@cmake --build build-sanitize -j $(JOBS)
	@cd build-sanitize && ATP_PROPERTY_SEEDS=40 ctest --output-on-failure -j $(JOBS) -E daemons_integration

clean:
	@rm -rf $(BUILD_DIR)
