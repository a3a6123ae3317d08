#!/usr/bin/env bash
# llama_recipe.sh — the whole recipe on a really pretrained llama teacher
# (llama2.c stories260K, ../shared/data), short: hm-import → hm-tokenize
# (llama2.c tokenizer, BOS-framed documents) → hm-eval → hm-linearize →
# hm-map-ssm → hm-verify mapping (0), a perturbed mapping (naive baseline:
# 1), hm-verify recurrent on teacher (KV cache) and students → hm-finetune →
# hm-eval. Also a preset llama teacher with hm-init and hm-inspect.
# Skips visibly without the shared data (the preset part always runs).
# Env: HM_BIN, HM_SHARED_DATA, HM_TMP.
set -u
T="${HM_TMP:-/tmp}/cli_llama_recipe.$$"
rm -rf "$T" && mkdir -p "$T"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { "$@" >"$T/out" 2>"$T/err" || { fail "exit $?: $* :: $(cat "$T/err")"; return 1; }; }
B="$HM_BIN"

# a preset llama teacher (GQA, tied): inspect names the family and counts
ok "$B/hm-init" --preset llama-tiny -o "$T/init.st"
ok "$B/hm-inspect" "$T/init.st"
grep -q 'arch:        llama' "$T/out" || fail "hm-inspect: no llama arch"
grep -q 'kv heads 4 (GQA 2:1)' "$T/out" || fail "hm-inspect: no GQA line"
grep -q '260,032' "$T/out" || fail "hm-inspect: llama-tiny is not 260,032 parameters"
ok "$B/hm-inspect" --json "$T/init.st"
grep -q '"family":[[:space:]]*"llama"' "$T/out" || fail "hm-inspect --json: no family"

MODEL="$HM_SHARED_DATA/llama2c_stories260K.bin"
TOK="$HM_SHARED_DATA/llama2c_tok512.bin"
TEXT="$HM_SHARED_DATA/tinyshakespeare_input.txt"
STORIES="$HM_SHARED_DATA/cs336_tinystories_sample.txt"
if [ ! -r "$MODEL" ] || [ ! -r "$TOK" ] || [ ! -r "$STORIES" ]; then
    echo "SKIP: no shared data at $HM_SHARED_DATA (the stories260K recipe)"
    rm -rf "$T"
    [ $fails -eq 0 ] && exit 0 || exit 1
fi
ok "$B/hm-import" llama2c "$MODEL" -o "$T/teacher.st"
ok "$B/hm-tokenize" --tokenizer "$TOK" "$STORIES" -o "$T/train.tok"
ok "$B/hm-eval" "$T/teacher.st" --data "$T/train.tok" --seq-len 64 --json
ppl=$(sed -n 's/.*"ppl": *\([0-9.]*\).*/\1/p' "$T/out")
awk -v p="$ppl" 'BEGIN { exit !(p > 1 && p < 20) }' ||
    fail "teacher PPL on TinyStories '$ppl' is not that of a trained model (1..20)"
ok "$B/hm-linearize" "$T/teacher.st" -o "$T/hedgehog.st" --data "$T/train.tok" --steps 20 \
    --batch 4 --seq-len 64 --lr 3e-2
ok "$B/hm-map-ssm" "$T/hedgehog.st" -o "$T/hedgemamba.st"
"$B/hm-verify" mapping "$T/hedgehog.st" "$T/hedgemamba.st" --data "$T/train.tok" \
    --seq-len 64 >"$T/out" 2>&1
rc=$?
[ $rc -eq 0 ] || fail "hm-verify mapping (GQA llama student) exit $rc: $(cat "$T/out")"
ok "$B/hm-map-ssm" "$T/hedgehog.st" -o "$T/naive.st" --init random
"$B/hm-verify" mapping "$T/hedgehog.st" "$T/naive.st" --data "$T/train.tok" --seq-len 64 \
    >"$T/out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "hm-verify mapping on a perturbed mapping: exit $rc (want 1)"
for m in teacher hedgehog hedgemamba; do
    "$B/hm-verify" recurrent "$T/$m.st" --data "$T/train.tok" --seq-len 100 >"$T/out" 2>&1
    rc=$?
    [ $rc -eq 0 ] || fail "hm-verify recurrent $m exit $rc: $(cat "$T/out")"
done
ok "$B/hm-finetune" "$T/hedgemamba.st" -o "$T/ft.st" --data "$T/train.tok" --steps 10 \
    --batch 4 --seq-len 64 --lr 1e-3
ok "$B/hm-eval" "$T/ft.st" --data "$T/train.tok" --seq-len 64
ok "$B/hm-inspect" "$T/ft.st"
grep -q 'arch:        hedgemamba' "$T/out" || fail "hm-inspect: fine-tuned student arch"
grep -q 'family llama' "$T/out" || fail "hm-inspect: fine-tuned student family"
rm -rf "$T"
[ $fails -eq 0 ] || { echo "llama_recipe.sh: $fails failure(s)"; exit 1; }
echo "llama_recipe.sh: ok"
