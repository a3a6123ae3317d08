#!/usr/bin/env bash
# import.sh — CLI promises of hm-import (contract §6): help, usage errors (exit 2),
# a real llama2.c import (skipped, visibly, without the shared data), a tiny
# synthetic one, overwrite rules, failures naming the file with nothing left.
# Env: HM_BIN (tools), HM_SHARED_DATA, HM_TMP (scratch).
set -u
B="$HM_BIN/hm-import"
STORIES="$HM_SHARED_DATA/llama2c_stories260K.bin"
T="${HM_TMP:-/tmp}/cli_import.$$"
rm -rf "$T" && mkdir -p "$T"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# run CMD...: sets rc, out, err; fails on a crash (signal)
run() {
    "$@" >"$T/out" 2>"$T/err"
    rc=$?
    out=$(cat "$T/out")
    err=$(cat "$T/err")
    if [ $rc -ge 128 ]; then fail "crashed ($rc): $*"; fi
}
# expect_usage ARGS...: exit 2, one error line + usage on stderr, empty stdout
expect_usage() {
    run "$B" "$@"
    [ $rc -eq 2 ] || fail "exit $rc (want 2) for: $*"
    [ -z "$out" ] || fail "stdout not empty for: $*"
    echo "$err" | grep -q '^hm-import: error: ' || fail "no error line for: $*: $err"
}

# a tiny llama2.c file: dim 4, hidden 4, 1 layer, 2 heads, 1 kv head, vocab 3
# (tied), seq_len 2 → 28 header bytes + 124 zero floats
i32() { printf "\\x$(printf %02x "$1")\\x00\\x00\\x00"; }
{ for v in 4 4 1 2 1 3 2; do i32 $v; done; head -c 496 /dev/zero; } > "$T/tiny.bin"
[ "$(wc -c < "$T/tiny.bin")" = 524 ] || fail "tiny.bin has the wrong size"

# -h / --help: usage on stdout naming the subcommand form, nothing on stderr
run "$B" -h
[ $rc -eq 0 ] || fail "-h exit $rc"
echo "$out" | grep -q '^usage: hm-import' || fail "-h: no usage on stdout"
echo "$out" | grep -q 'hm-import llama2c MODEL.bin -o OUT' || fail "-h: no llama2c form"
[ -z "$err" ] || fail "-h: stderr not empty: $err"
run "$B" --help; [ $rc -eq 0 ] || fail "--help exit $rc"

# bad usage: exit 2
expect_usage
expect_usage --no-such-option
expect_usage nosuchformat "$T/tiny.bin" -o "$T/x.st"
echo "$err" | grep -q "unknown format 'nosuchformat'" || fail "unknown format message: $err"
expect_usage llama2c
expect_usage llama2c "$T/tiny.bin"
expect_usage llama2c "$T/tiny.bin" extra -o "$T/x.st"
expect_usage llama2c - -o "$T/x.st"
expect_usage llama2c "$T/tiny.bin" -o
[ ! -e "$T/x.st" ] || fail "usage error wrote an output"

# the tiny synthetic import, its -n dry run and -o -
run "$B" llama2c "$T/tiny.bin" -o "$T/tiny.st"
[ $rc -eq 0 ] && [ -s "$T/tiny.st" ] || fail "tiny import: rc=$rc $err"
[ -z "$out" ] || fail "tiny import: stdout not empty: $out"
run "$HM_BIN/hm-inspect" --json "$T/tiny.st"
[ $rc -eq 0 ] && echo "$out" | grep -q '"llama"' || fail "hm-inspect of the import: rc=$rc $err"
run "$B" -n llama2c "$T/tiny.bin"
[ $rc -eq 0 ] && echo "$out" | grep -q 'would write 11 tensors' || fail "-n: rc=$rc '$out' $err"
"$B" llama2c "$T/tiny.bin" -o - > "$T/stdout.st" 2>"$T/err"
[ -s "$T/stdout.st" ] && [ ! -s "$T/err" ] || fail "-o -: empty output or messages: $(cat "$T/err")"
run "$HM_BIN/hm-inspect" "$T/stdout.st"
[ $rc -eq 0 ] || fail "-o - output unreadable: $err"

# refuses to overwrite without -f (file untouched); -f replaces; -o = input refused
cp "$T/tiny.st" "$T/before.st"
run "$B" llama2c "$T/tiny.bin" -o "$T/tiny.st"
[ $rc -eq 1 ] || fail "overwrite without -f: exit $rc"
echo "$err" | grep -q "'$T/tiny.st'.*exists" || fail "overwrite message: $err"
cmp -s "$T/tiny.st" "$T/before.st" || fail "output changed without -f"
run "$B" llama2c "$T/tiny.bin" -o "$T/tiny.st" -f
[ $rc -eq 0 ] || fail "-f: exit $rc $err"
cp "$T/tiny.bin" "$T/tiny-copy.bin"
run "$B" llama2c "$T/tiny.bin" -o "$T/tiny.bin" -f
[ $rc -eq 1 ] && echo "$err" | grep -q 'is the input' || fail "-o = input: rc=$rc $err"
cmp -s "$T/tiny.bin" "$T/tiny-copy.bin" || fail "the input was modified"

# failures: exit 1 naming the file, no output
head -c 500 "$T/tiny.bin" > "$T/cut.bin"
run "$B" llama2c "$T/cut.bin" -o "$T/cut.st"
want="^hm-import: error: cannot read '$T/cut.bin': .*24 bytes missing"
[ $rc -eq 1 ] && echo "$err" | grep -q "$want" ||
    fail "truncated: rc=$rc $err"
[ ! -e "$T/cut.st" ] || fail "output left after a failure"
run "$B" llama2c "$T/missing.bin" -o "$T/m.st"
[ $rc -eq 1 ] && echo "$err" | grep -q "cannot read '$T/missing.bin'" || fail "missing: rc=$rc $err"
run "$B" llama2c "$T" -o "$T/d.st"
[ $rc -eq 1 ] && echo "$err" | grep -q "is a directory" || fail "directory input: rc=$rc $err"

# the real pretrained checkpoint
if [ -r "$STORIES" ]; then
    run "$B" --json llama2c "$STORIES" -o "$T/stories.st"
    [ $rc -eq 0 ] || fail "stories260K import: rc=$rc $err"
    echo "$out" | grep -q '"tensors":47' && echo "$out" | grep -q '"parameters":260032' &&
        echo "$out" | grep -q '"tie_word_embeddings":true' || fail "stories260K --json: $out"
    run "$B" llama2c "$STORIES" -o "$T/stories.st"
    [ $rc -eq 1 ] || fail "stories260K overwrite without -f: exit $rc"
else
    echo "SKIP: $STORIES is absent: the real-checkpoint import was not run"
fi

# no temp files left anywhere
left=$(find "$T" -name '*.tmp.*' | wc -l)
[ "$left" = 0 ] || fail "temp files left: $(find "$T" -name '*.tmp.*')"

rm -rf "$T"
[ $fails -eq 0 ] && echo "ok hm-import" || echo "$fails failures"
exit $((fails > 0))
