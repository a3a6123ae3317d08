#!/usr/bin/env bash
# tokenize.sh — CLI promises of hm-tokenize (contract §6).
# Env: HM_BIN (tools), HM_SHARED_DATA, HM_TMP (scratch).
set -u
B="$HM_BIN/hm-tokenize"
TOK="$HM_SHARED_DATA/gpt-neox-20b_tokenizer.json"
T="${HM_TMP:-/tmp}/cli_tokenize.$$"
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

# -h: usage on stdout, nothing on stderr, exit 0
run "$B" -h
[ $rc -eq 0 ] || fail "-h exit $rc"
echo "$out" | grep -q '^usage: hm-tokenize' || fail "-h: no usage on stdout"
[ -z "$err" ] || fail "-h: stderr not empty: $err"

# bad usage: exit 2
run "$B" --no-such-option x; [ $rc -eq 2 ] || fail "bad option exit $rc"
run "$B" --bytes; [ $rc -eq 2 ] || fail "no input exit $rc"
run "$B" --bytes "$T/x" ; [ $rc -eq 2 ] || fail "no output exit $rc"
run "$B" --bytes --val-fraction 2 x -o y; [ $rc -eq 2 ] || fail "bad fraction exit $rc"

# --print-ids
printf 'Hello world' > "$T/hello.txt"
run "$B" --tokenizer "$TOK" --print-ids "$T/hello.txt"
[ $rc -eq 0 ] && [ "$out" = "[12092, 1533]" ] || fail "print-ids: rc=$rc out=$out"
run sh -c "printf 'The quick<|endoftext|>  x' | '$B' --tokenizer '$TOK' --print-ids -"
[ "$out" = "[510, 3158, 0, 50276, 89]" ] || fail "print-ids stdin: $out"
run sh -c "printf 'ab' | '$B' --bytes --print-ids -"
[ "$out" = "[97, 98]" ] || fail "print-ids bytes: $out"

# --ids-in / --decode round trip
printf '[510, 3158, 0,\n 50276 89]' > "$T/ids.json"
run "$B" --ids-in --vocab-size 50304 "$T/ids.json" -o "$T/ids.tok"
[ $rc -eq 0 ] || fail "ids-in: rc=$rc $err"
run "$B" --tokenizer "$TOK" --decode "$T/ids.tok"
[ "$out" = "The quick<|endoftext|>  x" ] || fail "decode: '$out'"
run "$B" --tokenizer "$TOK" --ids-in --decode "$T/ids.json"
[ "$out" = "The quick<|endoftext|>  x" ] || fail "ids-in decode: '$out'"
run "$B" --ids-in "$T/ids.json" -o "$T/novocab.tok"
[ $rc -eq 2 ] || fail "ids-in without vocab: exit $rc"
run "$B" --ids-in --vocab-size 100 "$T/ids.json" -o "$T/small.tok"
[ $rc -eq 1 ] || fail "ids-in id >= vocab: exit $rc"
[ ! -e "$T/small.tok" ] || fail "partial output left for ids >= vocab"

# encode + decode of a real text is the NFC text back
run "$B" --tokenizer "$TOK" "$HM_SHARED_DATA/cs336_german.txt" -o "$T/de.tok"
[ $rc -eq 0 ] || fail "encode: $err"
run "$B" --tokenizer "$TOK" --decode "$T/de.tok" -o "$T/de.txt"
printf '<|endoftext|>' > "$T/eot"
cat "$HM_SHARED_DATA/cs336_german.txt" "$T/eot" | cmp -s - "$T/de.txt" || fail "encode/decode text differs"

# --val-fraction: whole documents; train + val tokens = total
for i in $(seq 1 60); do printf '{"text":"document number %d with words"}\n' $i; done > "$T/docs.jsonl"
run "$B" --tokenizer "$TOK" "$T/docs.jsonl" -o "$T/all.tok" --json
total=$(echo "$out" | sed 's/.*"tokens": \([0-9]*\).*/\1/')
run "$B" --tokenizer "$TOK" "$T/docs.jsonl" -o "$T/train.tok" --val-fraction 0.3 --seed 7 --json
[ $rc -eq 0 ] || fail "val split: $err"
[ -e "$T/train.val.tok" ] || fail "no default val output train.val.tok"
tr=$(echo "$out" | sed 's/.*"tokens": \([0-9]*\).*/\1/')
vt=$(echo "$out" | sed 's/.*"val_tokens": \([0-9]*\).*/\1/')
vd=$(echo "$out" | sed 's/.*"val_documents": \([0-9]*\).*/\1/')
[ "$tr" = "$total" ] || fail "split changed the token total: $tr vs $total"
[ "$vd" -gt 5 ] && [ "$vd" -lt 35 ] || fail "val documents $vd of 60 for fraction 0.3"
run "$B" --tokenizer "$TOK" --decode "$T/train.val.tok"
ndocs=$(echo "$out" | grep -o '<|endoftext|>' | wc -l)
[ "$ndocs" = "$vd" ] || fail "val file holds $ndocs documents, summary says $vd"
echo "$out" | grep -q '^document number [0-9]* with words<|endoftext|>' || fail "val documents not whole"
run "$B" --tokenizer "$TOK" --decode "$T/train.tok"
nt=$(echo "$out" | grep -o '<|endoftext|>' | wc -l)
[ $((nt + ndocs)) -eq 60 ] || fail "train $nt + val $ndocs != 60 documents"
# same seed, same split
run "$B" --tokenizer "$TOK" "$T/docs.jsonl" -o "$T/train2.tok" --val-fraction 0.3 --seed 7
cmp -s "$T/train.val.tok" "$T/train2.val.tok" || fail "split not deterministic"

# refuses to overwrite without -f; -f replaces
run "$B" --bytes "$T/hello.txt" -o "$T/all.tok"
[ $rc -eq 1 ] || fail "overwrite without -f: exit $rc"
echo "$err" | grep -q "all.tok" || fail "overwrite message lacks the path: $err"
run "$B" --bytes "$T/hello.txt" -o "$T/all.tok" -f
[ $rc -eq 0 ] || fail "-f: exit $rc $err"

# failures: exit 1 naming the path
run "$B" --bytes "$T/missing.txt" -o "$T/m.tok"
[ $rc -eq 1 ] && echo "$err" | grep -q "cannot read '$T/missing.txt'" || fail "missing: rc=$rc $err"
printf 'ok \xff bad' > "$T/bad.txt"
run "$B" --tokenizer "$TOK" "$T/bad.txt" -o "$T/bad.tok"
[ $rc -eq 1 ] && echo "$err" | grep -q "bad.txt'.*UTF-8" || fail "invalid UTF-8: rc=$rc $err"
[ ! -e "$T/bad.tok" ] || fail "output left after a failure"
run "$B" --tokenizer "$TOK" --decode "$T/hello.txt"
[ $rc -eq 1 ] && echo "$err" | grep -q "hello.txt" || fail "decode of a non-token file: rc=$rc $err"
run "$B" --tokenizer "$T/hello.txt" "$T/hello.txt" -o "$T/h.tok"
[ $rc -eq 1 ] || fail "bad tokenizer file: exit $rc"
run "$B" --bytes "$T/hello.txt" -o "$T/hello.txt" -f
[ $rc -eq 1 ] || fail "output = input accepted"

# -o - writes a token file to stdout
"$B" --bytes "$T/hello.txt" -o - > "$T/stdout.tok" 2>"$T/err"
run "$B" --bytes --decode "$T/stdout.tok"
[ "$out" = "Hello world<|endoftext|>" ] || fail "-o - : '$out'"

# ---- round 3: compressions, trailing tar data, jsonl U+0000, atomic pairs, true errnos ----
# no input makes hm run a program: fake decompressors first in PATH leave a
# marker when run; external-only compressions are refused by name, the
# in-process ones decode
mkdir -p "$T/fake"
for p in grzip lrzip lzop lz4 zstd unzstd gzip gunzip bzip2 xz unxz lzma lzip uudecode compress; do
    printf '#!/bin/sh\ntouch "%s/marker.%s"\ncat >/dev/null\n' "$T" "$p" > "$T/fake/$p"
    chmod +x "$T/fake/$p"
done
printf 'LRZI\0\6xxxxxxxxxxxxxxxxxxxxxx' > "$T/lrz.txt"
printf 'GRZipII\0\2\4:)xxxxxxxxxxxxxxx' > "$T/grz.txt"
printf '\x89LZO\0\r\n\x1a\nxxxxxxxxxxxxxx' > "$T/lzo.txt"
for f in lrz grz lzo; do
    PATH="$T/fake:$PATH" run "$B" --bytes "$T/$f.txt" -o "$T/$f.tok"
    [ $rc -eq 1 ] && echo "$err" | grep -q "external program" || fail "$f: rc=$rc $err"
    tar cf "$T/$f.tar" -C "$T" "$f.txt"
    gzip -c "$T/$f.txt" > "$T/$f.txt.gz"
    PATH="$T/fake:$PATH" run "$B" --bytes "$T/$f.txt.gz" -o "$T/$f.tok"
    [ $rc -eq 1 ] && echo "$err" | grep -q "external program" || fail "$f.gz: rc=$rc $err"
done
echo "hello compressed" > "$T/c.txt"
gzip -k "$T/c.txt"; bzip2 -k "$T/c.txt"; xz -k "$T/c.txt"
cp "$T/c.txt.gz" "$T/cgz.txt"
for f in c.txt.gz c.txt.bz2 c.txt.xz cgz.txt; do
    PATH="$T/fake:$PATH" run "$B" --bytes "$T/$f" -o "$T/c.tok" -f
    [ $rc -eq 0 ] || fail "$f: rc=$rc $err"
    run "$B" --bytes --decode "$T/c.tok"
    [ "$out" = "hello compressed
<|endoftext|>" ] || fail "$f decodes to '$out'"
done
if command -v zstd >/dev/null; then
    zstd -q -c "$T/c.txt" > "$T/c.txt.zst"
    PATH="$T/fake:$PATH" run "$B" --bytes "$T/c.txt.zst" -o "$T/c.tok" -f
    [ $rc -eq 0 ] || fail "zstd (libarchive links libzstd): rc=$rc $err"
fi
ls "$T"/marker.* >/dev/null 2>&1 && fail "an external program ran: $(ls "$T"/marker.*)"

# data after a tar's end-of-archive marker is refused, not dropped
mkdir -p "$T/tars"
for i in 1 2 3; do echo "doc a$i" > "$T/tars/a$i.txt"; done
for i in 1 2 3 4 5; do echo "doc b$i" > "$T/tars/b$i.txt"; done
(cd "$T/tars" && tar cf a.tar a?.txt && tar cf b.tar b?.txt && cat a.tar b.tar > ab.tar &&
    gzip -k ab.tar && cp a.tar pad.tar && head -c 4096 /dev/zero >> pad.tar &&
    tar cf outer.tar ab.tar.gz)
run "$B" --bytes "$T/tars/a.tar" -o "$T/ta.tok" --json
[ $rc -eq 0 ] && echo "$out" | grep -q '"documents": 3' || fail "a.tar: rc=$rc $out $err"
run "$B" --bytes "$T/tars/pad.tar" -o "$T/tp.tok" --json
[ $rc -eq 0 ] && echo "$out" | grep -q '"documents": 3' || fail "zero padding refused: rc=$rc $err"
for f in ab.tar ab.tar.gz outer.tar; do
    run "$B" --bytes "$T/tars/$f" -o "$T/tab.tok"
    [ $rc -eq 1 ] && echo "$err" | grep -q "after the tar's end-of-archive" || fail "$f: rc=$rc $err"
    [ ! -e "$T/tab.tok" ] || fail "$f: output left"
done
run "$B" --bytes - -o "$T/tab.tok" < "$T/tars/ab.tar"
[ $rc -eq 1 ] && echo "$err" | grep -q "after the tar's end-of-archive" || fail "ab.tar on stdin: rc=$rc $err"
cat "$T/tars/ab.tar" | "$B" --bytes - -o "$T/tab.tok" 2>"$T/err"
[ $? -eq 1 ] && grep -q "after the tar's end-of-archive" "$T/err" || fail "ab.tar through a pipe: $(cat "$T/err")"

# a jsonl "text" holding \u0000 is kept whole, NUL included (Python's json does)
printf '{"meta": {"text": "x", "a": [1, "\\u0000"]}, "text": "ab\\u0000cd\\u00e9\\n"}\n{"text": "z"}\n' > "$T/nul.jsonl"
run "$B" --bytes "$T/nul.jsonl" -o "$T/nul.tok" --json
[ $rc -eq 0 ] && echo "$out" | grep -q '"bytes": 9,' || fail "jsonl NUL: rc=$rc $out $err"
"$B" --bytes --decode "$T/nul.tok" >"$T/out" 2>"$T/err"
printf 'ab\0cd\xc3\xa9\n<|endoftext|>z<|endoftext|>' | cmp -s - "$T/out" || fail "jsonl NUL decodes to: $(xxd "$T/out" | head -3)"

# --val-fraction: both outputs or neither
for i in $(seq 1 40); do echo "document $i" > "$T/tars/d$i.txt"; done
(cd "$T/tars" && tar cf docs.tar d*.txt)
rm -f "$T/tr.tok"
"$B" --bytes "$T/tars/docs.tar" -o "$T/tr.tok" --val-fraction 0.5 --val-output - > /dev/full 2>"$T/err"
rc=$?
[ $rc -eq 1 ] && grep -q "No space left on device" "$T/err" || fail "val to /dev/full: rc=$rc $(cat "$T/err")"
[ ! -e "$T/tr.tok" ] || fail "the training output was committed without its validation output"
echo old > "$T/tr.tok"
"$B" --bytes "$T/tars/docs.tar" -o "$T/tr.tok" -f --val-fraction 0.5 --val-output - > /dev/full 2>"$T/err"
echo old | cmp -s - "$T/tr.tok" || fail "-f: the replaced training output was not restored"
run "$B" --bytes "$T/tars/docs.tar" -o "$T/tr2.tok" --val-fraction 0.5
[ $rc -eq 0 ] && [ -s "$T/tr2.tok" ] && [ -s "$T/tr2.val.tok" ] || fail "val pair: rc=$rc $err"

# empty, writerless and closed stdin say what they are (no stale errno)
run "$B" --bytes - -o "$T/e.tok" < /dev/null
[ $rc -eq 1 ] && echo "$err" | grep -q "cannot read '-': empty input" || fail "empty stdin: $err"
mkfifo "$T/nowriter.fifo"
run "$B" --bytes "$T/nowriter.fifo" -o "$T/e.tok"
[ $rc -eq 1 ] && echo "$err" | grep -q "empty input" || fail "FIFO without a writer: $err"
"$B" --bytes - -o "$T/e.tok" <&- >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 1 ] && grep -q "cannot read '-': stdin is closed" "$T/err" || fail "closed stdin: rc=$rc $(cat "$T/err")"
[ ! -e "$T/e.tok" ] || fail "closed stdin: output written"
grep -q "multibyte" "$T/err" && fail "stale errno: $(cat "$T/err")"
"$B" --bytes --print-ids - <&- >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 1 ] && grep -q "cannot read '-': stdin is closed" "$T/err" || fail "--print-ids, closed stdin: rc=$rc $(cat "$T/err")"

# no temp files left anywhere
left=$(find "$T" -name '*.tmp.*' | wc -l)
[ "$left" = 0 ] || fail "temp files left: $(find "$T" -name '*.tmp.*')"

rm -rf "$T"
if [ $fails -ne 0 ]; then echo "$fails failure(s)"; exit 1; fi
echo "all hm-tokenize CLI checks passed"
