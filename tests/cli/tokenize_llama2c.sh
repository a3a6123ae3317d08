#!/usr/bin/env bash
# tokenize_llama2c.sh — hm-tokenize with a llama2.c tokenizer.bin (contract §1b, §6):
# --print-ids (with and without --bos), token files whose documents start
# with BOS, --decode round trips, usage errors, malformed tokenizer files.
# Env: HM_BIN (tools), HM_SHARED_DATA, HM_TMP (scratch).
set -u
B="$HM_BIN/hm-tokenize"
TOK="$HM_SHARED_DATA/llama2c_tok512.bin"
if [ ! -r "$TOK" ]; then
    echo "SKIP: shared data '$TOK' is absent"
    exit 0
fi
T="${HM_TMP:-/tmp}/cli_tokenize_llama2c.$$"
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
# u32 / u16 little-endian at a byte offset of a file
u32() { od -A n -t u4 -j "$2" -N 4 "$1" | tr -d ' '; }
u16() { od -A n -t u2 -j "$2" -N 2 "$1" | tr -d ' '; }

# the help documents the tokenizer and --bos
run "$B" -h
echo "$out" | grep -q 'tokenizer.bin' || fail "-h does not mention tokenizer.bin"
echo "$out" | grep -q -- '--bos' || fail "-h does not mention --bos"

# --print-ids: ids 403 407 261 378 (checked against a separate Python
# transcription of run.c encode); --bos puts 1 first; "" gives [] or [1]
printf 'Once upon a time' > "$T/once.txt"
run "$B" --tokenizer "$TOK" --print-ids "$T/once.txt"
[ $rc -eq 0 ] && [ "$out" = "[403, 407, 261, 378]" ] || fail "print-ids: rc=$rc out=$out $err"
run "$B" --tokenizer "$TOK" --print-ids --bos "$T/once.txt"
[ "$out" = "[1, 403, 407, 261, 378]" ] || fail "print-ids --bos: $out"
: > "$T/empty.txt"
run "$B" --tokenizer "$TOK" --print-ids --bos "$T/empty.txt"
[ "$out" = "[1]" ] || fail "print-ids --bos of '': $out"
run "$B" --tokenizer "$TOK" --print-ids "$T/empty.txt"
[ "$out" = "[]" ] || fail "print-ids of '': $out"
# an emoji: the dummy prefix, then each byte + 3
run sh -c "printf '\360\237\230\200' | '$B' --tokenizer '$TOK' --print-ids -"
[ "$out" = "[410, 243, 162, 155, 131]" ] || fail "print-ids emoji: $out"

# a token file: BOS first, vocabulary 512 in the header, BOS in its separator
# field, and --decode gives the text back exactly (one document)
SAMPLE="$HM_SHARED_DATA/cs336_tinystories_sample.txt"
run "$B" --tokenizer "$TOK" --bos "$SAMPLE" -o "$T/ts.tok" --json
[ $rc -eq 0 ] || fail "encode: rc=$rc $err"
[ "$(u32 "$T/ts.tok" 16)" = 512 ] || fail "header vocabulary $(u32 "$T/ts.tok" 16), want 512"
[ "$(u32 "$T/ts.tok" 40)" = 1 ] || fail "header separator $(u32 "$T/ts.tok" 40), want BOS 1"
[ "$(u16 "$T/ts.tok" 48)" = 1 ] || fail "first token $(u16 "$T/ts.tok" 48), want BOS 1"
ntok=$(echo "$out" | sed 's/.*"tokens": \([0-9]*\).*/\1/')
last=$(u16 "$T/ts.tok" $((48 + 2 * (ntok - 1))))
[ "$last" != 2 ] || fail "a document ends with EOS; encode must not append it"
run "$B" --tokenizer "$TOK" --decode "$T/ts.tok" -o "$T/ts.txt"
cmp -s "$SAMPLE" "$T/ts.txt" || fail "decode(encode(sample)) differs from the sample"
# BOS is implied for a llama2.c tokenizer: the same file without --bos
run "$B" --tokenizer "$TOK" "$SAMPLE" -o "$T/ts2.tok"
cmp -s "$T/ts.tok" "$T/ts2.tok" || fail "token file differs without --bos"

# several documents: each starts with BOS; decoding concatenates them
printf '{"text":"Lily saw a cat."}\n{"text":"  Two spaces, caf\\u00e9 \\u4e2d."}\n{"text":"Tom\\tran\\nhome."}\n' > "$T/docs.jsonl"
run "$B" --tokenizer "$TOK" --bos "$T/docs.jsonl" -o "$T/docs.tok" --json
[ $rc -eq 0 ] || fail "jsonl encode: rc=$rc $err"
n=$(echo "$out" | sed 's/.*"tokens": \([0-9]*\).*/\1/')
nbos=$(od -A n -t u2 -j 48 -N $((2 * n)) -v "$T/docs.tok" | tr -s ' ' '\n' | grep -c '^1$')
[ "$nbos" = 3 ] || fail "$nbos BOS in a file of 3 documents"
run "$B" --tokenizer "$TOK" --decode "$T/docs.tok"
want=$(printf 'Lily saw a cat.  Two spaces, caf\303\251 \344\270\255.Tom\tran\nhome.')
[ "$out" = "$want" ] || fail "decode of 3 documents: '$out'"

# --print-ids output fed back through --ids-in --decode
printf 'caf\303\251 \360\237\230\200\n  x' > "$T/rt.txt"
run "$B" --tokenizer "$TOK" --print-ids --bos "$T/rt.txt"
echo "$out" > "$T/rt.json"
run "$B" --tokenizer "$TOK" --ids-in --decode "$T/rt.json" -o "$T/rt.out"
cmp -s "$T/rt.txt" "$T/rt.out" || fail "print-ids/ids-in --decode round trip differs"
# --ids-in into a token file with this tokenizer: vocabulary 512, BOS separator
run "$B" --tokenizer "$TOK" --ids-in "$T/rt.json" -o "$T/rt.tok"
[ $rc -eq 0 ] && [ "$(u32 "$T/rt.tok" 16)" = 512 ] && [ "$(u32 "$T/rt.tok" 40)" = 1 ] ||
    fail "ids-in token file: rc=$rc $err"
run "$B" --tokenizer "$TOK" --decode "$T/rt.tok" -o "$T/rt2.out"
cmp -s "$T/rt.txt" "$T/rt2.out" || fail "ids-in token file does not decode to the text"

# usage errors: exit 2
run "$B" --bytes --bos --print-ids "$T/once.txt"
[ $rc -eq 2 ] && echo "$err" | grep -q 'BOS' || fail "--bos with --bytes: rc=$rc $err"
if [ -r "$HM_SHARED_DATA/gpt-neox-20b_tokenizer.json" ]; then
    run "$B" --tokenizer "$HM_SHARED_DATA/gpt-neox-20b_tokenizer.json" --bos "$T/once.txt" -o "$T/n.tok"
    [ $rc -eq 2 ] || fail "--bos with a tokenizer.json: exit $rc"
fi
run "$B" --tokenizer "$TOK" --eot-id 2 "$T/once.txt" -o "$T/e.tok"
[ $rc -eq 2 ] || fail "--eot-id with a llama2.c tokenizer: exit $rc"
run "$B" --tokenizer "$TOK" --bos --decode "$T/ts.tok"
[ $rc -eq 2 ] || fail "--bos with --decode: exit $rc"

# invalid UTF-8 input: exit 1 naming the input, no output left
printf 'ok \377 bad' > "$T/bad.txt"
run "$B" --tokenizer "$TOK" "$T/bad.txt" -o "$T/bad.tok"
[ $rc -eq 1 ] && echo "$err" | grep -q "bad.txt'.*UTF-8" || fail "invalid UTF-8: rc=$rc $err"
[ ! -e "$T/bad.tok" ] || fail "output left after a failure"

# malformed tokenizer.bin: exit 1, the message names the file and the cause
head -c 1000 "$TOK" > "$T/cut.bin"
{ cat "$TOK"; printf 'xyz'; } > "$T/trailing.bin"
{ printf '\007\000\000\000\000\000\000\000\377\377\377\377'; tail -c +13 "$TOK"; } > "$T/neg.bin"
{ printf '\377\377\377\177'; tail -c +5 "$TOK"; } > "$T/max.bin"
for f in cut trailing neg max; do
    run "$B" --tokenizer "$T/$f.bin" --print-ids "$T/once.txt"
    [ $rc -eq 1 ] && echo "$err" | grep -q "cannot read '$T/$f.bin': " ||
        fail "malformed $f.bin: rc=$rc $err"
    [ -z "$out" ] || fail "malformed $f.bin: stdout not empty"
done
run "$B" --tokenizer "$T/cut.bin" --print-ids "$T/once.txt"
echo "$err" | grep -q 'truncated' || fail "cut.bin: $err"
run "$B" --tokenizer "$T/trailing.bin" --print-ids "$T/once.txt"
echo "$err" | grep -q 'trailing' || fail "trailing.bin: $err"
run "$B" --tokenizer "$T/neg.bin" --print-ids "$T/once.txt"
echo "$err" | grep -q 'negative length' || fail "neg.bin: $err"
run "$B" --tokenizer "$T/max.bin" --print-ids "$T/once.txt"
echo "$err" | grep -q 'max_token_length' || fail "max.bin: $err"

left=$(find "$T" -name '*.tmp.*' | wc -l)
[ "$left" = 0 ] || fail "temp files left: $(find "$T" -name '*.tmp.*')"

rm -rf "$T"
if [ $fails -ne 0 ]; then echo "$fails failure(s)"; exit 1; fi
echo "all hm-tokenize llama2.c CLI checks passed"
