# Thin wrapper over CMake for the README's two commands. Everything real is in CMakeLists.txt.
#   make run    install what is missing, build, start sluiced on 127.0.0.1 (scripts/run.sh)
#   make test   install what is missing, build, run every test: the normal build, then
#               ASan+UBSan, then TSan, then the fuzz targets briefly, then the short fault run
#               (make faults). STRESS=1 make test runs it all with a CPU hog on every core
#               beside it (scripts/stress.sh), as the tests must pass that way too
#   make faults       a few cells of the fault matrix (tests/fault/; docs/reliability.md), each
#                     bounded, about two minutes; needs root (network namespaces)
#   make faults-long  every cell of the matrix, known defects listed as such (about an hour)
#   make soak   the chaos soak (tests/soak/soak.sh) against the normal build, SOAK_SECONDS long
#   make deb    Debian packages in $(DEB_DIR)/ (default build-deb/): a build of its own with
#               Debian's build flags, packed by CPack (packaging/; docs/install.md)
MAKEFLAGS += --no-print-directory
JOBS    ?= $(shell nproc)
BUILD   ?= build
WERROR  ?= $(if $(filter true,$(CI)),ON,OFF)
FUZZ_SECONDS ?= 15
SOAK_SECONDS ?= 300
DEB_DIR ?= build-deb
CMAKE_FLAGS ?=

configure = cmake -S . -B $(1) -DSLUICE_WERROR=$(WERROR) $(2) $(CMAKE_FLAGS) >/dev/null

.PHONY: all build deps test-deps deb-deps run test test-plain test-asan test-tsan test-fuzz soak bench install deb clean faults faults-long

all: build

deps:
	@bash scripts/deps.sh build

test-deps:
	@bash scripts/deps.sh test

deb-deps:
	@bash scripts/deps.sh deb

build: deps
	@$(call configure,$(BUILD),-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_TESTS=OFF)
	@cmake --build $(BUILD) -j$(JOBS)

run: build
	@bash scripts/deps.sh run
	@bash scripts/run.sh $(BUILD)

ifeq ($(STRESS),1)
test:
	@bash scripts/stress.sh $(MAKE) test STRESS=
else
test: test-deps test-plain test-asan test-tsan test-fuzz faults
	@echo "make test: all suites passed"
endif

test-plain:
	@$(call configure,build-test,-DCMAKE_BUILD_TYPE=RelWithDebInfo)
	@cmake --build build-test -j$(JOBS)
	ctest --test-dir build-test --output-on-failure -j$(JOBS)

test-asan:
	@$(call configure,build-asan,-DCMAKE_BUILD_TYPE=Debug -DSLUICE_ASAN=ON -DSLUICE_BENCH=OFF)
	@cmake --build build-asan -j$(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir build-asan --output-on-failure -j$(JOBS) -L 'unit|prop|integration'

test-tsan:
	@$(call configure,build-tsan,-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_TSAN=ON -DSLUICE_BENCH=OFF)
	@cmake --build build-tsan -j$(JOBS)
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  ctest --test-dir build-tsan --output-on-failure -j$(JOBS) -L 'concurrency'

test-fuzz:
	@CC=clang $(call configure,build-fuzz,-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_FUZZ=ON -DSLUICE_BENCH=OFF -DSLUICE_FUZZ_SECONDS=$(FUZZ_SECONDS))
	@cmake --build build-fuzz -j$(JOBS)
	ctest --test-dir build-fuzz --output-on-failure -j$(JOBS) -L fuzz

faults faults-long: test-deps
	@$(call configure,build-test,-DCMAKE_BUILD_TYPE=RelWithDebInfo)
	@cmake --build build-test -j$(JOBS)
	SLUICE_BUILD_DIR=$(CURDIR)/build-test bash tests/fault/faults.sh $(if $(filter faults-long,$@),long,short)

soak: test-deps
	@$(call configure,build-test,-DCMAKE_BUILD_TYPE=RelWithDebInfo)
	@cmake --build build-test -j$(JOBS)
	SLUICE_BUILD_DIR=$(CURDIR)/build-test SLUICE_SOURCE_DIR=$(CURDIR) SOAK_SECONDS=$(SOAK_SECONDS) \
	  bash tests/soak/soak.sh

bench: deps
	@bash bench/run.sh

install: build
	cmake --install $(BUILD)

# Debian's hardening flags (dpkg-buildflags, as a package built by dpkg-buildpackage gets them);
# a prerequisite installs dpkg-dev before this recipe runs them
deb_flag = $(shell DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get $(1))
deb: deb-deps
	@$(call configure,$(DEB_DIR)/build,-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_TESTS=OFF \
	  -DSLUICE_BENCH=OFF "-DCMAKE_C_FLAGS=$(call deb_flag,CFLAGS) $(call deb_flag,CPPFLAGS)" \
	  "-DCMAKE_EXE_LINKER_FLAGS=$(call deb_flag,LDFLAGS)" \
	  "-DCMAKE_SHARED_LINKER_FLAGS=$(call deb_flag,LDFLAGS)" \
	  "-DCMAKE_MODULE_LINKER_FLAGS=$(call deb_flag,LDFLAGS)")
	@cmake --build $(DEB_DIR)/build -j$(JOBS)
	@rm -f $(DEB_DIR)/*.deb
	@cd $(DEB_DIR)/build && cpack --config CPackConfig.cmake -B $(abspath $(DEB_DIR)) >cpack.log 2>&1 || \
	  { cat cpack.log; exit 1; }
	@ls -1 $(DEB_DIR)/*.deb

clean:
	rm -rf build build-test build-asan build-tsan build-fuzz build-bench $(DEB_DIR)
