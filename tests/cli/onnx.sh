#!/usr/bin/env bash
# onnx.sh — ONNX export from the command line (contract §9): preset teachers of
# both families (hm-init tiny, llama-tiny) → a short stage 1 (hm-linearize) →
# hedgehog; → the naive HedgeMamba baseline (hm-map-ssm --init random: A = −1,
# random conv taps, gate, Δ) → hedgemamba; each exported with the test helper
# hm-onnx-export (build/tests) and run in ONNX Runtime by tests/onnx/run_ort.mjs
# against hm-eval --dump-logits: whole sequences, token by token, prefill +
# chunk + steps, within 1e-4 relative. A teacher is refused (exit 1, naming
# the file). Without node or onnxruntime-node the ONNX Runtime part prints
# SKIP and passes (HM_REQUIRE_ORT=1, as CI sets it, makes that a failure).
# Env: HM_BIN, HM_TEST_BIN, HM_SRC, HM_TMP.
set -u
T="${HM_TMP:-/tmp}/cli_onnx.$$"
rm -rf "$T" && mkdir -p "$T"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { "$@" >"$T/out" 2>"$T/err" || { fail "exit $?: $* :: $(cat "$T/err")"; return 1; }; }
B="$HM_BIN"
X="$HM_TEST_BIN/hm-onnx-export"

"$X" -h >"$T/out" 2>"$T/err" && grep -q '^usage: hm-onnx-export' "$T/out" && [ ! -s "$T/err" ] ||
    fail "hm-onnx-export -h"
"$X" >/dev/null 2>"$T/err"; [ $? -eq 2 ] || fail "hm-onnx-export without arguments: not exit 2"

ok "$B/hm-tokenize" --bytes "$HM_SRC/README.md" -o "$T/text.tok"
ok "$B/hm-init" --preset tiny -o "$T/neox.st"
ok "$B/hm-init" --preset llama-tiny -o "$T/llama.st"

"$X" "$T/neox.st" -o "$T/teacher.onnx" >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 1 ] && grep -q "'$T/neox.st'" "$T/err" && grep -q "students" "$T/err" ||
    fail "exporting a teacher: exit $rc, $(cat "$T/err")"
[ ! -e "$T/teacher.onnx" ] || fail "a refused export left '$T/teacher.onnx'"

have_ort=1
if ! command -v node >/dev/null; then
    have_ort=0
    echo "SKIP: node is not installed: ONNX Runtime checks skipped (apt-get install nodejs npm)"
fi
for fam in neox llama; do
    ok "$B/hm-linearize" "$T/$fam.st" -o "$T/$fam-hedgehog.st" --data "$T/text.tok" --steps 3 \
        --batch 2 --seq-len 32 --lr 3e-2 || continue
    ok "$B/hm-map-ssm" "$T/$fam-hedgehog.st" -o "$T/$fam-hedgemamba.st" --init random --seed 5 ||
        continue
    for mix in hedgehog hedgemamba; do
        s="$T/$fam-$mix"
        ok "$X" "$s.st" -o "$s.onnx" --json || continue
        grep -q '"arch": "'$mix'"' "$T/out" || fail "$fam-$mix: --json: $(cat "$T/out")"
        [ $have_ort -eq 1 ] || continue
        ok "$B/hm-eval" "$s.st" --data "$T/text.tok" --seq-len 24 --max-tokens 73 \
            --dump-logits "$s.logits.st" || continue
        node "$HM_SRC/tests/onnx/run_ort.mjs" --model "$s.onnx" --tokens "$T/text.tok" \
            --ref "$s.logits.st" --tol 1e-4 >"$T/ort" 2>&1
        rc=$?
        cat "$T/ort"
        if [ $rc -eq 77 ]; then
            [ -z "${HM_REQUIRE_ORT:-}" ] || fail "HM_REQUIRE_ORT is set but onnxruntime-node is missing"
            have_ort=0
        elif [ $rc -ne 0 ]; then
            fail "$fam-$mix: ONNX Runtime differs from hm (exit $rc)"
        fi
    done
done
rm -rf "$T"
[ $fails -eq 0 ] || { echo "onnx.sh: $fails failure(s)"; exit 1; }
echo "onnx.sh: ok"
