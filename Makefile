# Thin wrapper over CMake so users type `make` and `make test`.
#   make                 configure (once) and build into $(BUILD)/
#   make test            build, then run every CPU test (ctest -LE gpu)
#   make asan            build with ASan+UBSan into build-asan/ and run the tests
#   make deps            install the Debian packages hm needs (as root)
#   make clean           remove the build folders
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
ifeq ($(CI),true)
CMAKE_FLAGS += -DHM_WERROR=ON
endif

DEB_PACKAGES = cmake make gcc pkg-config libcjson-dev libxxhash-dev libarchive-dev \
               libutf8proc-dev libcriterion-dev libopenblas-openmp-dev

.PHONY: all build test asan deps clean
all: build

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -LE gpu -j$(JOBS)

asan:
	$(MAKE) test BUILD=build-asan CMAKE_FLAGS="$(CMAKE_FLAGS) -DHM_SANITIZE_ADDRESS=ON -DHM_CUDA=OFF"

deps:
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(DEB_PACKAGES)

clean:
	rm -rf $(BUILD) build-asan
