#!/bin/bash
# hm-eval command-line promises (SPEC §6): help, usage errors, missing files,
# and --batch B printing what B = 1 prints. The numeric checks (PPL = exp(mean
# NLL) recomputed from --dump-logits, window semantics, --max-tokens, batched
# NLLs per window for every family × mixer) are in tests/test_eval.c.
set -u
BIN=${HM_BIN:?}/hm-eval
TMP=${HM_TMP:-/tmp}/cli-eval.$$
mkdir -p "$TMP"
trap 'rm -rf "$TMP"' EXIT
fail=0
check() { if ! eval "$2"; then echo "FAIL: $1" >&2; fail=1; fi; }

"$BIN" -h >"$TMP/out" 2>"$TMP/err"; rc=$?
check "-h exits 0" '[ $rc -eq 0 ]'
check "-h prints usage on stdout" 'grep -q "^usage: hm-eval" "$TMP/out"'
check "-h leaves stderr empty" '[ ! -s "$TMP/err" ]'

"$BIN" --help >"$TMP/out" 2>"$TMP/err"; rc=$?
check "--help exits 0" '[ $rc -eq 0 ] && grep -q -- "--dump-logits" "$TMP/out"'

"$BIN" --bogus >"$TMP/out" 2>"$TMP/err"; rc=$?
check "bad option exits 2" '[ $rc -eq 2 ]'
check "bad option names it" 'grep -q "hm-eval: error: unknown option .--bogus." "$TMP/err"'
check "bad option prints short usage" 'grep -q "^usage:" "$TMP/err"'
check "bad option: nothing on stdout" '[ ! -s "$TMP/out" ]'

"$BIN" "$TMP/model" --data x.tok --seq-len abc >"$TMP/out" 2>"$TMP/err"; rc=$?
check "bad number exits 2" '[ $rc -eq 2 ] && grep -q -- "--seq-len" "$TMP/err"'

"$BIN" >"$TMP/out" 2>"$TMP/err"; rc=$?
check "no checkpoint exits 2" '[ $rc -eq 2 ]'

"$BIN" "$TMP/no-such-model" --data "$TMP/x.tok" --seq-len 8 >"$TMP/out" 2>"$TMP/err"; rc=$?
check "missing checkpoint exits 1" '[ $rc -eq 1 ]'
check "missing checkpoint is named" 'grep -q "hm-eval: error: cannot read .*no-such-model" "$TMP/err"'
check "missing checkpoint: nothing on stdout" '[ ! -s "$TMP/out" ]'

"$BIN" --version >"$TMP/out" 2>"$TMP/err"; rc=$?
check "--version exits 0" '[ $rc -eq 0 ] && grep -q "hm-eval" "$TMP/out"'

# --batch: the same report for any B (7 windows of 32: batches of 3 end with a
# partial one). Weights at std 0.5 so that each window's NLL differs.
TOOLS=${HM_BIN:?}
"$TOOLS/hm-init" --preset tiny --init-std 0.5 --seed 3 -o "$TMP/m.safetensors" -q
awk 'BEGIN { s = 7; for (i = 0; i < 7 * 32 + 5; i++) { s = (s * 1103515245 + 12345) % 2147483648;
             printf "%d ", s % 257 } }' >"$TMP/ids.txt"
"$TOOLS/hm-tokenize" --ids-in --vocab-size 257 "$TMP/ids.txt" -o "$TMP/t.tok" -q
ev() { "$BIN" "$TMP/m.safetensors" --data "$TMP/t.tok" --seq-len 32 --no-progress "$@"; }
ev --batch 1 >"$TMP/b1" 2>"$TMP/err"; rc=$?
check "--batch 1 exits 0" '[ $rc -eq 0 ] && grep -q "^ppl: " "$TMP/b1" && grep -q "^windows: 7 " "$TMP/b1"'
ev --batch 3 >"$TMP/b3" 2>"$TMP/err"; rc=$?
check "--batch 3 exits 0" '[ $rc -eq 0 ]'
check "--batch 3 prints what --batch 1 prints" 'cmp -s "$TMP/b1" "$TMP/b3" || { diff "$TMP/b1" "$TMP/b3" >&2; false; }'
ev >"$TMP/bd" 2>"$TMP/err"
check "the default batch prints what --batch 1 prints" 'cmp -s "$TMP/b1" "$TMP/bd"'
# the ref backend is exact: even the JSON digits agree (tokens_per_s aside)
ev --backend ref --json --batch 1 | sed 's/, "tokens_per_s": [^,}]*//' >"$TMP/j1"
ev --backend ref --json --batch 3 | sed 's/, "tokens_per_s": [^,}]*//' >"$TMP/j3"
check "ref --json is the same for --batch 1 and 3" 'grep -q "\"windows\": 7" "$TMP/j1" && cmp -s "$TMP/j1" "$TMP/j3"'
ev --batch 0 >"$TMP/out" 2>"$TMP/err"; rc=$?
check "--batch 0 exits 2" '[ $rc -eq 2 ] && grep -q -- "--batch" "$TMP/err"'
"$BIN" "$TMP/m.safetensors" --mc x --bytes --batch 2 >"$TMP/out" 2>"$TMP/err"; rc=$?
check "--batch without --data exits 2" '[ $rc -eq 2 ]'
# hm-verify logits batches the windows as hm-eval does (by default, and with
# the same --batch), so a dump checks at tolerance 0. Windows of 16: one
# window's products take the few-rows path, three windows' take sgemm, so
# batches of 1 and 3 differ in the last bits (the negative check below).
ev16() { "$BIN" "$TMP/m.safetensors" --data "$TMP/t.tok" --seq-len 16 --no-progress "$@"; }
ev16 --batch 3 --dump-logits "$TMP/l3.st" >/dev/null 2>&1
ev16 --dump-logits "$TMP/ld.st" >/dev/null 2>&1
vl() { "$TOOLS/hm-verify" logits "$TMP/m.safetensors" --data "$TMP/t.tok" "$@"; }
vl --reference "$TMP/l3.st" --batch 3 --tolerance 0 >"$TMP/out" 2>&1; rc=$?
check "hm-verify logits --batch 3 = hm-eval --batch 3 dump, to the bit" '[ $rc -eq 0 ]'
vl --reference "$TMP/ld.st" --tolerance 0 >"$TMP/out" 2>&1; rc=$?
check "hm-verify logits default batch = hm-eval default dump, to the bit" '[ $rc -eq 0 ]'
vl --reference "$TMP/l3.st" --batch 1 --tolerance 0 >"$TMP/out" 2>&1; rc=$?
check "--batch 1 against a --batch 3 dump differs in the last bits (exit 1)" '[ $rc -eq 1 ]'
vl --reference "$TMP/l3.st" --batch 1 >"$TMP/out" 2>&1; rc=$?
check "... and is within the default tolerance" '[ $rc -eq 0 ]'

exit $fail
