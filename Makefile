# The two entry commands: `make demo` and `make test`. Everything else is CMake.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)

.PHONY: setup configure build demo test p4-test bench sanitize tsan fuzz clean

setup:
	@./scripts/setup.sh

configure: setup
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

demo: build
	@$(BUILD_DIR)/bin/atp demo

# Every test: unit, engine, simulator, library and multi-process tests, then each fuzzer over
# its corpus and for FUZZ_SECONDS more.
test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)
	@$(MAKE) --no-print-directory fuzz

# The P4 programs (docs/p4.md): compile both, fit the TNA one to Tofino 1, replay every switch
# trace through BMv2. Also part of `make test` (ctest p4_compile, then p4_conformance) where the
# tools exist.
p4-test: build
	@./p4/conformance/run.sh $(BUILD_DIR)

bench: build
	@$(BUILD_DIR)/bin/quant_bench

# Every test again under AddressSanitizer + UndefinedBehaviorSanitizer (a separate build),
# but two: each repeats one admission path tens of thousands of times (every job id held; 100,000
# admissions and removals) to find limits, not memory errors, which their first rounds and the
# other controller and admission tests already cover; under the sanitizers they took minutes
# of CI's 30. `make test` runs them. The drawn scenarios' exactness subset (FirstFortySeeds, a
# minute here, tens under the sanitizers) runs the same engines the property test already runs
# under them.
SANITIZE_SKIPS = daemons_integration|p4_compile|p4_conformance|FirstFortySeeds|JobBook.WhenEveryIdAndMulticastGroupIsHeldTheNextJobIsRefused|Admission.AdmissionsAndRemovalsWithoutEndKeepTheSwitchServing
sanitize: setup
	@cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=Debug -DATP_SANITIZE=ON -DATP_PYTHON=OFF -DATP_BENCH=OFF >/dev/null
	@cmake --build build-sanitize -j $(JOBS)
	@cd build-sanitize && ATP_PROPERTY_SEEDS=40 ctest --output-on-failure -j $(JOBS) -E '$(SANITIZE_SKIPS)'

# ThreadSanitizer over the runtime's threaded parts: switch shard threads, Communicator I/O
# threads and the control plane calling in from other threads.
tsan: setup
	@cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DATP_TSAN=ON -DATP_PYTHON=OFF >/dev/null
	@cmake --build build-tsan -j $(JOBS) --target threaded_runtime_test worker_library_test
	@cd build-tsan && TSAN_OPTIONS="halt_on_error=1 suppressions=$(CURDIR)/tests/tsan.supp" ctest --output-on-failure -j $(JOBS) \
	  -R '^(ThreadedRuntime|WorkerLibrary)\.'

# libFuzzer targets (clang): each over its checked-in corpus, then fuzzing FUZZ_SECONDS each.
FUZZ_SECONDS ?= 20
fuzz: setup
	@CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DATP_FUZZ=ON -DATP_FUZZ_SECONDS=$(FUZZ_SECONDS) >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target fuzzers
	@cd build-fuzz && ctest --output-on-failure -j $(JOBS) -L fuzz

clean:
	@rm -rf $(BUILD_DIR)
