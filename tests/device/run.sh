#!/usr/bin/env bash
# run.sh — the one prepared command for a GPU machine (tests/device/README.md):
#
#   tests/device/run.sh fast|full|rehearse
#
# From the repository root, with device-pack/ (tests/device/pack.sh, run on
# the build machine) carried beside it. Unpacks it, points the loader at its
# libraries and CUDA's, sets HM_REQUIRE_CUDA=1 (a skipped GPU test is a
# failure), then:
#   fast      the op tests on cuda against ref; tests/cli/cuda.sh; the op
#             tests under compute-sanitizer memcheck and racecheck
#   full      fast, then the GPU benchmarks (bench_train on cuda; the rest
#             of issue 31's benchmarks are not written yet: reported
#             "missing", and full fails)
#   rehearse  no GPU: the same unpack, library paths, tools starting, the op
#             tests and cuda.sh failing *because* cuda is required (each
#             reported "needs a GPU", never "passed"), the JSON written
# Writes $OUT/summary.json and $OUT/log.txt ($OUT: the device call's folder;
# default ./device-out). Exit 0 when every step that ran passed (rehearse:
# when the plumbing works). Env: OUT, PACK (device-pack), HM_DEVICE_ROOT,
# JOBS, STEP_TIMEOUT.
set -uo pipefail
MODE=${1:-fast}
case $MODE in fast|full|rehearse) ;; *) echo "usage: tests/device/run.sh fast|full|rehearse" >&2; exit 2 ;; esac
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PACK=${PACK:-$SRC/device-pack}
OUT=${OUT:-$SRC/device-out}
if [ -n "${HM_DEVICE_ROOT:-}" ]; then ROOT=$HM_DEVICE_ROOT
else ROOT=$(mktemp -d /tmp/hm-device.XXXXXX); trap 'rm -rf "$ROOT"' EXIT; fi
JOBS=${JOBS:-$(nproc)}
mkdir -p "$OUT" "$ROOT"
LOG="$OUT/log.txt"; STEPS="$ROOT/steps.tsv"
: >"$LOG"; : >"$STEPS"
say() { echo "$*" | tee -a "$LOG"; }
# step NAME STATUS DETAIL: one row of summary.json's "steps"
step() { printf '%s\t%s\t%s\n' "$1" "$2" "$(echo "$3" | tr '\t\n' '  ' | cut -c1-400)" >>"$STEPS"; say "[$2] $1: $3"; }
# run_logged NAME SECONDS CMD...: CMD's output into the log; its exit status
run_logged() {
    local name=$1 t=$2; shift 2
    say "--- $name: $*"
    timeout "$t" "$@" >"$ROOT/$name.out" 2>&1; local rc=$?
    tail -c 20000 "$ROOT/$name.out" >>"$LOG"
    return $rc
}

# ---- 1. unpack, library paths ------------------------------------------------
[ -r "$PACK/hm-device.tar.xz" ] || { step unpack fail "no '$PACK/hm-device.tar.xz': run tests/device/pack.sh here first and carry device-pack"; MODE_FAILED=1; }
if [ -z "${MODE_FAILED:-}" ] && tar -C "$ROOT" -xJf "$PACK/hm-device.tar.xz"; then
    step unpack pass "$(head -1 "$ROOT/MANIFEST.txt")"
else
    step unpack fail "cannot unpack '$PACK/hm-device.tar.xz'"
fi
BIN="$ROOT/build/bin"; TESTS="$ROOT/build/tests"
# CUDA's runtime and cuBLAS: the machine's toolkit, else PyTorch's wheels
cudalib=""
for d in ${CUDA_HOME:+$CUDA_HOME/lib64} /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda-*/lib64 \
         /usr/local/cuda-*/lib /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -e "$d/libcublas.so.13" ] && { cudalib=$d; break; }
done
if [ -z "$cudalib" ]; then
    f=$(python3 -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null)
    f=$(find "${f:-/nonexistent}" -name 'libcublas.so.13' 2>/dev/null | head -1)
    [ -n "$f" ] && cudalib=$(dirname "$f"):$(dirname "$(find "$(dirname "$(dirname "$f")")/.." -name 'libcudart.so.13' | head -1)")
fi
export LD_LIBRARY_PATH="$ROOT/lib${cudalib:+:$cudalib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
missing=$(for f in "$BIN"/* "$TESTS"/* "$ROOT"/build/lib/*.so; do [ -f "$f" ] && ldd "$f" 2>/dev/null | grep "not found" | sed "s|^|$(basename "$f"): |"; done | sort -u)
# and resolves from the pack, not from this machine (what rehearse must show)
sys_re='^(linux-vdso|libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcudart|libcublas|libcublasLt|libcuda)\.'
outside=$(for f in "$BIN"/* "$TESTS"/* "$ROOT"/build/lib/*.so; do [ -f "$f" ] && ldd "$f" 2>/dev/null; done |
    awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u | grep -Ev "$sys_re" | grep -v " $ROOT/lib/")
[ -z "$outside" ] || missing="$missing resolved outside the pack: $(echo "$outside" | head -3 | tr '\n' ' ')"
if [ -z "$missing" ]; then step libraries pass "every library resolves (CUDA from ${cudalib:-nowhere})"
else step libraries fail "$(echo "$missing" | head -5)"; fi
bad=""
for t in "$BIN"/hm-*; do "$t" --version >/dev/null 2>&1 || bad="$bad $(basename "$t")"; done
if [ -z "$bad" ]; then step tools pass "$(ls "$BIN" | wc -l) tools start"; else step tools fail "do not start:$bad"; fi
if run_logged device_select 60 "$TESTS/test_device_select" --jobs 2; then step device_select pass "local-rank device selection and teardown order"
else step device_select fail "test_device_select failed (see log.txt)"; fi

# ---- 2. versions ---------------------------------------------------------------
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
nvccv=$(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' | head -1)
cudart=$(ldd "$ROOT/build/lib/libhm_cuda.so" 2>/dev/null | awk '/libcudart/ {print $3}')
cc=$(readelf -p .comment "$BIN/hm-finetune" 2>/dev/null | grep -o 'GCC: .*' | head -1)
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
say "gpu: ${gpu:-none}; nvcc: ${nvccv:-none}; cudart: ${cudart:-not found}; built by: $cc"

# ---- 3. the op tests on cuda against ref ------------------------------------------
export HM_REQUIRE_CUDA=1
OPS="test_kernels_cpu test_kernels_family test_kernels_train test_linattn test_ssm test_stage1_loss test_backward"
for t in $OPS; do
    [ -x "$TESTS/$t" ] || { step "op:$t" fail "not in the pack"; continue; }
    HM_TEST_BACKENDS=ref,cuda run_logged "op_$t" "${STEP_TIMEOUT:-300}" "$TESTS/$t" --jobs "$JOBS" \
        --json="$ROOT/op_$t.json"
    rc=$?
    if [ $rc -eq 0 ]; then step "op:$t" pass "$(grep -o 'Synthesis.*' "$ROOT/op_$t.out" | tail -1)"
    elif [ "$MODE" = rehearse ] && grep -q "backend 'cuda' is required" "$ROOT/op_$t.out"; then
        step "op:$t" "needs a GPU" "fails as it must without one: $(grep -o "backend 'cuda' is required.*" "$ROOT/op_$t.out" | head -1)"
    else step "op:$t" fail "exit $rc: $(grep -E '^\[----\]' "$ROOT/op_$t.out" | head -3)"; fi
done

# ---- 4. whole models: tests/cli/cuda.sh ------------------------------------------
HM_BIN="$BIN" HM_TMP="$ROOT/tmp" HM_SHARED_DATA="$ROOT/data" HM_SRC="$SRC" \
    run_logged cli_cuda "${STEP_TIMEOUT:-300}" bash "$SRC/tests/cli/cuda.sh"
rc=$?
if [ $rc -eq 0 ]; then step cli_cuda pass "every whole-model check"
elif [ "$MODE" = rehearse ] && grep -q "HM_REQUIRE_CUDA is set but cuda cannot be used" "$ROOT/cli_cuda.out"; then
    step cli_cuda "needs a GPU" "$(grep -o 'cuda cannot be used.*' "$ROOT/cli_cuda.out" | head -1)"
else
    step cli_cuda fail "exit $rc"
    grep '^FAIL' "$ROOT/cli_cuda.out" | head -40 | while read -r l; do step "model:${l:6:60}" fail "$l"; done
fi

# ---- 5. compute-sanitizer on the op tests ----------------------------------------
for tool in memcheck racecheck; do
    if [ -z "$sanitizer" ]; then step "sanitizer:$tool" "needs a GPU" "compute-sanitizer is not installed here"; continue; fi
    if [ "$MODE" = rehearse ]; then step "sanitizer:$tool" "needs a GPU" "$sanitizer found; not run without a device"; continue; fi
    for t in test_kernels_cpu test_linattn; do
        HM_TEST_BACKENDS=cuda run_logged "san_${tool}_$t" "${STEP_TIMEOUT:-240}" "$sanitizer" --tool "$tool" \
            --error-exitcode 99 "$TESTS/$t" --jobs 1
        rc=$?
        n=$(grep -o 'ERROR SUMMARY: [0-9]* error' "$ROOT/san_${tool}_$t.out" | awk '{ s += $3 } END { print s + 0 }')
        if [ $rc -eq 0 ]; then step "sanitizer:$tool:$t" pass "errors ${n:-0}"
        elif [ $rc -eq 124 ]; then step "sanitizer:$tool:$t" fail "timed out"
        elif grep -qi "not supported\|device not supported" "$ROOT/san_${tool}_$t.out"; then
            step "sanitizer:$tool:$t" refused "$(grep -i 'not supported' "$ROOT/san_${tool}_$t.out" | head -1)"
        else step "sanitizer:$tool:$t" fail "exit $rc, errors ${n:-?}"; fi
    done
done

# ---- 6. benchmarks ------------------------------------------------------------------
# training tokens/s of teacher, Hedgehog and HedgeMamba on the GPU
# (bench_train --backend cuda, Pythia-160m shape, F = p); rehearse: each
# must fail for want of the GPU. Not written yet: F = 2p, the Pythia-1B
# shape, the PyTorch GPU peer, the same-run cuBLAS peak (MFU) and decoding
# at 4k/16k: reported "missing", so full fails until they exist.
if [ "$MODE" = full ] || [ "$MODE" = rehearse ]; then
    for mixer in softmax hedgehog hedgemamba; do
        run_logged "bench_$mixer" "${STEP_TIMEOUT:-300}" "$ROOT/build/bench/bench_train" --shape 160m \
            --mixer $mixer --seq 1024 --batch 8 --steps 5 --threads "$JOBS" --backend cuda --json
        rc=$?
        fig=$(grep '^{' "$ROOT/bench_$mixer.out" | tail -1)
        if [ $rc -eq 0 ] && [ -n "$fig" ]; then step "bench:train:$mixer" pass "$fig"
        elif [ "$MODE" = rehearse ] && [ $rc -eq 2 ] && grep -q "bad --backend" "$ROOT/bench_$mixer.out"; then
            step "bench:train:$mixer" "needs a GPU" "bench_train --backend cuda refused without a device"
        else step "bench:train:$mixer" fail "exit $rc: $(tail -2 "$ROOT/bench_$mixer.out")"; fi
    done
    [ "$MODE" = full ] && step benchmarks:rest fail "missing: F = 2p, Pythia-1B, the PyTorch GPU peer, cuBLAS peak (MFU), decoding 4k/16k"
fi

# ---- summary ------------------------------------------------------------------------
python3 - "$STEPS" "$OUT/summary.json" "$MODE" "${gpu:-}" "${nvccv:-}" "${cudart:-}" "$cc" <<'PY'
import json, sys
steps = [dict(zip(("name", "status", "detail"), l.rstrip("\n").split("\t", 2)))
         for l in open(sys.argv[1]) if l.strip()]
counts = {}
for s in steps:
    counts[s["status"]] = counts.get(s["status"], 0) + 1
ok = not any(s["status"] == "fail" for s in steps)
json.dump({"version": 1, "mode": sys.argv[3], "ok": ok, "counts": counts,
           "gpu": sys.argv[4] or None, "nvcc": sys.argv[5] or None,
           "cudart": sys.argv[6] or None, "compiler": sys.argv[7] or None,
           "steps": steps}, open(sys.argv[2], "w"), indent=1)
print("summary: %s %s" % ("ok" if ok else "FAILED", counts))
sys.exit(0 if ok else 1)
PY
rc=$?
tail -1 "$OUT/summary.json" >/dev/null
say "run.sh $MODE: exit $rc (summary: $OUT/summary.json)"
exit $rc
