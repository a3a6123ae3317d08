#!/usr/bin/env bash
# skip_as_77.sh BINARY ARGS... — runs a Criterion binary; a failure stays its
# exit status, a clean run that printed an "HM-SKIP:" line exits 77 (CTest's
# SKIP_RETURN_CODE: reported Skipped, naming what did not run).
set -u
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$@" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
[ "$rc" -ne 0 ] && exit "$rc"
if grep -q '^HM-SKIP:' "$out"; then
    echo "skipped: $(grep '^HM-SKIP:' "$out" | sort -u | wc -l) check(s) did not run; make ort installs onnxruntime-node"
    exit 77
fi
exit 0
