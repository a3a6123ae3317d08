# Thin wrapper over CMake so users type `make` and `make test`.
#   make                 configure (once) and build into $(BUILD)/
#   make test            build, then run every test (GPU ones skip without a device)
#   make demo            the embedded demo (recipes/demo.mk): real text from the
#                        Debian package fortunes → tiny teacher → held-out PPL
#   make asan            build with ASan+UBSan into build-asan/ and run the tests
#   make deps            install the Debian packages hm needs (as root)
#   make ort             install onnxruntime-node for the ONNX tests (npm)
#   make device-pack     tests/device/pack.sh: what a GPU machine's run needs
#   make clean           remove the build folders
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
ifeq ($(CI),true)
CMAKE_FLAGS += -DHM_WERROR=ON
endif

DEB_PACKAGES = cmake make gcc pkg-config libcjson-dev libxxhash-dev libarchive-dev \
               libutf8proc-dev libcriterion-dev libopenblas-openmp-dev libprotobuf-c-dev \
               protobuf-c-compiler fortunes gnuplot-nox openmpi-bin libopenmpi-dev

.PHONY: all build test asan deps deps-check demo clean ort device-pack
all: build

$(BUILD)/CMakeCache.txt: | deps-check
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)

# On a fresh machine: install the packages when root, otherwise say which.
deps-check:
	@if ! command -v cmake >/dev/null || ! command -v protoc-c >/dev/null \
	    || ! pkg-config --exists libcjson libxxhash libarchive libutf8proc libprotobuf-c 2>/dev/null \
	    || [ ! -e /usr/include/criterion/criterion.h ] || ! ls /usr/include/*/openblas*/cblas.h >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then $(MAKE) --no-print-directory deps; \
	  else echo "hm needs: sudo apt-get install $(DEB_PACKAGES)" >&2; exit 1; fi; fi

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

# One ctest run over every test; the GPU tests (label gpu) run where there is
# a device and are reported "Skipped" elsewhere.
# The ONNX Runtime tests need onnxruntime-node: installed first where npm is,
# otherwise CTest lists them as Skipped and this says how to get them.
test: build
	@if [ ! -d tests/onnx/node_modules/onnxruntime-node ]; then \
	  if command -v npm >/dev/null; then $(MAKE) --no-print-directory ort || \
	    echo "note: npm could not install onnxruntime-node: the ONNX Runtime tests will be Skipped" >&2; \
	  else echo "note: no npm: the ONNX Runtime tests (cli_onnx, test_onnx) will be Skipped; apt-get install nodejs npm, then make ort" >&2; fi; fi
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

ort:
	npm install --prefix tests/onnx --ignore-scripts --no-package-lock --no-audit --no-fund --loglevel=error

device-pack: build
	tests/device/pack.sh $(BUILD)

demo: build
	$(MAKE) --no-print-directory -f recipes/demo.mk BIN=$(BUILD)/bin

asan:
	$(MAKE) test BUILD=build-asan CMAKE_FLAGS="$(CMAKE_FLAGS) -DHM_SANITIZE_ADDRESS=ON -DHM_CUDA=OFF"

deps:
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(DEB_PACKAGES)

clean:
	rm -rf $(BUILD) build-asan demo
