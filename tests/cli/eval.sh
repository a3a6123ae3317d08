#!/bin/bash
# hm-eval command-line promises (SPEC §6): help, usage errors, missing files.
# The numeric checks (PPL = exp(mean NLL) recomputed from --dump-logits,
# window semantics, --max-tokens) are in tests/test_eval.c.
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

exit $fail
