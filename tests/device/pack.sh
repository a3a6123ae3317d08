#!/usr/bin/env bash
# pack.sh — prepares what tests/device/run.sh needs on a bare GPU machine
# (tests/device/README.md), here, from a build made here:
#
#   tests/device/pack.sh [BUILD]          (default: build; PACK=device-pack)
#
# writes PACK/hm-device.tar.xz (the one carried file) and PACK/MANIFEST.txt:
#   build/bin, build/lib (libhm_cuda.so), build/tests (the test binaries),
#   build/bench    BUILD's, debug info stripped, layout kept (a tool finds
#                  lib/libhm_cuda.so as ../lib from its bin/)
#   lib/           the shared libraries they need that a bare machine lacks,
#                  from Debian's packages: `apt-get download` + `dpkg -x`,
#                  never installed; glibc, libstdc++ and libgcc_s stay the
#                  machine's, and so do libcudart and libcublas (its CUDA 13)
#   data/          stories260K and its tokenizer (../shared does not travel)
# Fails, saying why, if a package cannot be downloaded or the pack exceeds
# PACK_MAX_MB (60). Env: PACK, PACK_MAX_MB, HM_SHARED_DATA.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
PACK=${PACK:-device-pack}
MAX_MB=${PACK_MAX_MB:-60}
DATA=${HM_SHARED_DATA:-../shared/data}
die() { echo "pack.sh: error: $*" >&2; exit 1; }
[ -x "$BUILD/bin/hm-finetune" ] || die "no tools in '$BUILD/bin': build first (make build)"
[ -d "$BUILD/tests" ] || die "no '$BUILD/tests'"
rm -rf "$PACK" && mkdir -p "$PACK"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/build" "$stage/lib" "$stage/data" "$stage/debs"

# 1. the build: executables and shared objects, stripped of debug info
for d in bin lib tests bench; do
    [ -d "$BUILD/$d" ] || continue
    mkdir -p "$stage/build/$d"
    find "$BUILD/$d" -maxdepth 1 -type f -perm -u+x | while read -r f; do
        strip --strip-debug -o "$stage/build/$d/$(basename "$f")" "$f" 2>/dev/null ||
            cp "$f" "$stage/build/$d/"
    done
done

# 2. the libraries: every library the loader resolves for them, but the
# C library's, libstdc++, libgcc_s and CUDA's own; by Debian package
skip='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcudart|libcublas|libcublasLt|libcuda)\.'
libs=$(find "$stage/build" -type f -perm -u+x -exec ldd {} \; 2>/dev/null |
       awk '$2 == "=>" && $3 ~ /^\// { print $1 " " $3 }' | sort -u)
pkgs=""
while read -r name path; do
    [ -n "$name" ] || continue
    [[ $name =~ $skip ]] && continue
    real=$(readlink -f "$path")
    pkg=$(dpkg -S "$real" 2>/dev/null || dpkg -S "*/$(basename "$real")" 2>/dev/null || true)
    pkg=${pkg%%:*}
    [ -n "$pkg" ] || die "no Debian package holds '$real' (needed as $name)"
    pkgs="$pkgs $pkg"
    echo "$name $pkg" >>"$stage/libs.txt"
done <<<"$libs"
pkgs=$(echo "$pkgs" | tr ' ' '\n' | sed '/^$/d' | sort -u)
(cd "$stage/debs" && apt-get download $pkgs >/dev/null 2>"$stage/apt.err") ||
    die "apt-get download failed: $(tail -3 "$stage/apt.err")"
for deb in "$stage"/debs/*.deb; do
    dpkg -x "$deb" "$stage/root"
done
# the .so files the build needs, from the unpacked packages (flat: one
# LD_LIBRARY_PATH entry); OpenBLAS's openmp variant sits in a subfolder
while read -r name pkg; do
    f=$(find "$stage/root" -name "$name" \( -type f -o -type l \) | head -1)
    [ -n "$f" ] || die "'$name' is not in package $pkg as downloaded"
    cp -L "$f" "$stage/lib/$name"
done <"$stage/libs.txt"

# 3. the data the GPU tests read
for f in llama2c_stories260K.bin llama2c_tok512.bin; do
    [ -r "$DATA/$f" ] || die "no '$DATA/$f' (set HM_SHARED_DATA)"
    cp "$DATA/$f" "$stage/data/"
done

{
    echo "hm device pack, $(date -u +%Y-%m-%dT%H:%M:%SZ), from '$BUILD' at $(git rev-parse --short HEAD 2>/dev/null)"
    echo "packages:"
    for deb in "$stage"/debs/*.deb; do echo "  $(basename "$deb")"; done
    echo "libraries:"
    sed 's/^/  /' "$stage/libs.txt"
} >"$PACK/MANIFEST.txt"
cp "$PACK/MANIFEST.txt" "$stage/MANIFEST.txt"
XZ_OPT=${XZ_OPT:--T0 -6} tar -C "$stage" -cJf "$PACK/hm-device.tar.xz" build lib data MANIFEST.txt
mb=$(( $(du -sk "$PACK" | cut -f1) / 1024 ))
[ "$mb" -le "$MAX_MB" ] || die "'$PACK' is $mb MiB, more than $MAX_MB MiB"
echo "pack.sh: wrote '$PACK/hm-device.tar.xz' ($mb MiB; $(echo "$pkgs" | wc -l) packages)"
