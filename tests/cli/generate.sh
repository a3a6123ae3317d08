#!/usr/bin/env bash
# hm-generate command-line promises (contract §6, §8): help, usage errors (exit 2),
# missing files (exit 1, named); the tool chain hm-init → hm-linearize
# --steps 0 → hm-map-ssm → hm-generate for all three mixers (--ids, --json,
# the position limit of the teacher only, --bench); stories260K's greedy
# sample (skipped, visibly, without the shared data). The numeric checks
# (CLI greedy = a step loop, the sampler's distribution) are in
# tests/test_generate.c.
# Env: HM_BIN (tools), HM_SHARED_DATA, HM_TMP (scratch).
set -u
B="$HM_BIN/hm-generate"
T="${HM_TMP:-/tmp}/cli_generate.$$"
rm -rf "$T" && mkdir -p "$T"
trap 'rm -rf "$T"' EXIT
export OMP_NUM_THREADS=2
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
run() {
    "$@" >"$T/out" 2>"$T/err"
    rc=$?
    out=$(cat "$T/out")
    err=$(cat "$T/err")
    if [ $rc -ge 128 ]; then fail "crashed ($rc): $*"; fi
}
expect_usage() {
    run "$B" "$@"
    [ $rc -eq 2 ] || fail "exit $rc (want 2) for: $*"
    [ -z "$out" ] || fail "stdout not empty for: $*"
    echo "$err" | grep -q '^hm-generate: error: ' || fail "no error line for: $*: $err"
}

run "$B" -h
[ $rc -eq 0 ] && echo "$out" | grep -q '^usage: hm-generate' || fail "-h: rc=$rc"
[ -z "$err" ] || fail "-h: stderr not empty"
echo "$out" | grep -q 'splitmix64' || fail "-h does not document the generator"
echo "$out" | grep -q 'no position' || fail "-h does not say students have no position limit"

# the models: a byte-level teacher (max positions 256), its Hedgehog student
# (untrained: --steps 0) and the HedgeMamba mapping
"$HM_BIN/hm-init" --preset tiny --init-std 0.2 -o "$T/teacher.st" -q || fail "hm-init"
printf 'the quick brown fox jumps over the lazy dog\n%.0s' $(seq 40) > "$T/text.txt"
"$HM_BIN/hm-tokenize" --bytes "$T/text.txt" -o "$T/text.tok" -q || fail "hm-tokenize"
"$HM_BIN/hm-linearize" "$T/teacher.st" -o "$T/hedgehog.st" --data "$T/text.tok" --steps 0 \
    --seq-len 16 --batch 1 -q --no-progress || fail "hm-linearize"
"$HM_BIN/hm-map-ssm" "$T/hedgehog.st" -o "$T/hedgemamba.st" -q || fail "hm-map-ssm"

expect_usage
expect_usage --no-such-option "$T/teacher.st"
expect_usage "$T/teacher.st" "$T/teacher.st"
expect_usage "$T/teacher.st" --bytes --temperature x
expect_usage "$T/teacher.st" --bytes --top-p 1.5
expect_usage "$T/teacher.st" --bytes --top-k -1
expect_usage "$T/teacher.st" --bytes --max-new-tokens -3
expect_usage "$T/teacher.st" --prompt-ids 1,a
expect_usage "$T/teacher.st" --prompt a --prompt-ids 1
expect_usage "$T/teacher.st" --bytes --tokenizer x.json
expect_usage "$T/teacher.st" --bytes --ids --json
expect_usage "$T/teacher.st" --bench
expect_usage "$T/teacher.st" --context 8
expect_usage "$T/teacher.st" --bench --context 8 --prompt hi
expect_usage "$T/teacher.st" --prompt hi            # no tokenizer anywhere
expect_usage "$T/teacher.st" --prompt-ids 1 --stop x

run "$B" "$T/no-such-model.st" --bytes
[ $rc -eq 1 ] && echo "$err" | grep -q "cannot read '$T/no-such-model.st'" || fail "missing model: rc=$rc $err"
[ -z "$out" ] || fail "missing model: stdout not empty"
run "$B" "$T/teacher.st" --tokenizer "$T/no-such-tok.json"
[ $rc -eq 1 ] && echo "$err" | grep -q "'$T/no-such-tok.json'" || fail "missing tokenizer: rc=$rc $err"

for m in teacher hedgehog hedgemamba; do
    M="$T/$m.st"
    g="--bytes --prompt the --temperature 0 --max-new-tokens 20 --ignore-eot"
    run "$B" "$M" $g --ids
    [ $rc -eq 0 ] || fail "$m --ids: rc=$rc $err"
    ids=$out
    [ "$(echo "$ids" | wc -w)" = 20 ] || fail "$m: --ids printed '$ids'"
    echo "$ids" | grep -qE '^[0-9]+( [0-9]+)*$' || fail "$m: --ids format '$ids'"
    # the same prompt as ids (t h e = 116 104 101) gives the same tokens
    run "$B" "$M" --prompt-ids 116,104,101 --temperature 0 --max-new-tokens 20 --ignore-eot
    [ "$out" = "$ids" ] || fail "$m: --prompt-ids gave '$out', --prompt '$ids'"
    # the model from stdin
    "$B" - $g --ids < "$M" > "$T/stdin.out" 2>"$T/err" || fail "$m from stdin: $(cat "$T/err")"
    [ "$(cat "$T/stdin.out")" = "$ids" ] || fail "$m from stdin differs"
    run "$B" "$M" $g --json
    [ $rc -eq 0 ] || fail "$m --json: rc=$rc"
    [ "$(echo "$out" | wc -l)" = 1 ] || fail "$m --json is not one line"
    want="\"new_ids\": [$(echo "$ids" | sed 's/ /, /g')]"
    echo "$out" | grep -qF "$want" || fail "$m --json new_ids: $out"
    echo "$out" | grep -qF '"prompt_ids": [116, 104, 101]' || fail "$m --json prompt_ids: $out"
    echo "$out" | grep -qF '"stop_reason": "max_new_tokens"' || fail "$m --json stop_reason"
    echo "$out" | grep -qF '"tokens": 20' || fail "$m --json tokens"
    # the position limit: 3 + 254 > 256 is refused by the teacher only
    run "$B" "$M" $g --max-new-tokens 254 --ids
    if [ $m = teacher ]; then
        [ $rc -eq 1 ] && echo "$err" | grep -q "position limit" || fail "teacher limit: rc=$rc $err"
        echo "$err" | grep -q "'$M'" || fail "teacher limit: the message does not name the file"
    else
        [ $rc -eq 0 ] && [ "$(echo "$out" | wc -w)" = 254 ] || fail "$m: no position limit: rc=$rc"
    fi
    run "$B" --bench --context 200 --batch 2 --decode-tokens 8 --threads 2 --json "$M"
    [ $rc -eq 0 ] || fail "$m --bench: rc=$rc $err"
    for k in prefill_tokens_per_s decode_tokens_per_s peak_rss_bytes state_bytes; do
        echo "$out" | grep -qE "\"$k\": [0-9.e+]*[1-9]" || fail "$m --bench: $k in $out"
    done
    echo "$out" | grep -qF '"context": 200, "batch": 2' || fail "$m --bench: context/batch in $out"
done

# stories260K: the documented llama2.c greedy sample (run -t 0.0, 256 steps)
STORIES="$HM_SHARED_DATA/llama2c_stories260K.bin"
TOK="$HM_SHARED_DATA/llama2c_tok512.bin"
if [ -f "$STORIES" ] && [ -f "$TOK" ]; then
    "$HM_BIN/hm-import" llama2c "$STORIES" -o "$T/stories.st" -q 2>/dev/null || fail "hm-import"
    run "$B" "$T/stories.st" --tokenizer "$TOK" --temperature 0 --max-new-tokens 256
    head -c -1 "$HM_SRC/tests/data/stories260K_greedy.txt" > "$T/want.txt"
    cmp -s "$T/out" "$T/want.txt" || fail "stories260K greedy differs from llama2.c's sample"
    run "$B" "$T/stories.st" --tokenizer "$TOK" --temperature 0 --stop Lily
    [ "$out" = "Once upon a time, there was a little girl named " ] || fail "--stop Lily: '$out'"
    # a bundle carries its tokenizer: no --tokenizer needed
    if [ -x "$HM_BIN/hm-pack" ]; then
        "$HM_BIN/hm-pack" "$T/stories.st" --tokenizer "$TOK" -o "$T/stories.tar" -q 2>/dev/null ||
            fail "hm-pack"
        run "$B" "$T/stories.tar" --temperature 0 --max-new-tokens 256
        cmp -s "$T/out" "$T/want.txt" || fail "stories260K from a bundle: rc=$rc $err"
    fi
else
    echo "SKIP: stories260K checks (no shared data at $HM_SHARED_DATA)"
fi

# ---- round 3: one set of sampling ranges (usage errors exit 2); a full stdout said truly ----
for a in "--temperature 1e-300" "--temperature 1e-31" "--temperature 2e30" "--temperature -1" \
    "--top-p 0" "--top-p 1.5" "--top-p -0.5" "--top-k -1" "--top-k 3000000000" \
    "--max-new-tokens -1"; do
    # shellcheck disable=SC2086
    expect_usage "$T/teacher.st" --bytes --prompt hi $a
done
run "$B" "$T/teacher.st" --bytes --prompt hi --temperature 1e-30 --max-new-tokens 2
[ $rc -eq 0 ] || fail "--temperature 1e-30 (the documented minimum): rc=$rc $err"
for mode in "" --ids --json; do
    # shellcheck disable=SC2086
    "$B" "$T/teacher.st" --bytes --prompt hi --max-new-tokens 4 $mode > /dev/full 2>"$T/err"
    rc=$?
    [ $rc -eq 1 ] && grep -q "cannot write '-': No space left on device" "$T/err" ||
        fail "> /dev/full $mode: rc=$rc $(cat "$T/err")"
done

[ $fails -eq 0 ] && echo "ok hm-generate" || echo "$fails failures"
exit $((fails > 0))
