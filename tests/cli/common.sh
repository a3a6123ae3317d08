#!/usr/bin/env bash
# Conventions every tool shares (contract §6, conventions 6–8): -h → usage on stdout,
# empty stderr, exit 0; --version → exit 0; an unknown option → one error
# line + short usage on stderr, empty stdout, exit 2; a missing input file →
# exit 1 naming the file.
set -u
fail=0
tools=$(ls "$HM_BIN"/hm-* 2>/dev/null)
[ -n "$tools" ] || { echo "no tools in $HM_BIN"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for t in $tools; do
    name=$(basename "$t")
    "$t" -h >"$tmp/out" 2>"$tmp/err"; rc=$?
    if [ $rc -ne 0 ] || ! grep -q "^usage: $name" "$tmp/out" || [ -s "$tmp/err" ]; then
        echo "FAIL $name -h: rc=$rc stderr=$(head -c 200 "$tmp/err")"; fail=1
    fi
    "$t" --help >"$tmp/out2" 2>/dev/null
    cmp -s "$tmp/out" "$tmp/out2" || { echo "FAIL $name --help differs from -h"; fail=1; }
    "$t" --version >"$tmp/out" 2>"$tmp/err"; rc=$?
    if [ $rc -ne 0 ] || ! grep -q "$name" "$tmp/out"; then
        echo "FAIL $name --version: rc=$rc"; fail=1
    fi
    "$t" --no-such-option >"$tmp/out" 2>"$tmp/err"; rc=$?
    if [ $rc -ne 2 ] || [ -s "$tmp/out" ] || ! grep -q "^$name: error: unknown option '--no-such-option'" "$tmp/err"; then
        echo "FAIL $name bad option: rc=$rc stdout=$(head -c 100 "$tmp/out") stderr=$(head -c 200 "$tmp/err")"; fail=1
    fi
    "$t" /nonexistent/hm-missing-input >"$tmp/out" 2>"$tmp/err"; rc=$?
    if [ $rc -ge 128 ]; then echo "FAIL $name crashed on a missing input (rc=$rc)"; fail=1; fi
    if [ $rc -eq 1 ] && ! grep -q "'/nonexistent/hm-missing-input'" "$tmp/err"; then
        echo "FAIL $name: message does not name the missing file: $(head -c 200 "$tmp/err")"; fail=1
    fi
    echo "ok $name"
done
exit $fail
