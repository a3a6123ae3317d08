#!/usr/bin/env bash
# pack.sh — hm-pack bundles through the real pipeline (contract §5 "Bundles",
# docs/bundle.md): hm-init teachers (tiny, llama-tiny), hm-linearize and
# hm-map-ssm students, each packed in every format → hm-verify bundle (0) →
# hm-inspect → hm-eval on the bundle (the same PPL) → hm-verify logits with
# tolerance 0 against the checkpoint's --dump-logits → hm-generate on the
# bundle (its tokenizer) gives the checkpoint's greedy and seeded sampled
# ids; the model card shows
# the chain tool by tool with its losses; packing twice gives the same
# bytes; a tampered bundle gives 1 naming the member; refusals.
# Env: HM_BIN, HM_TMP.
set -u
T="${HM_TMP:-/tmp}/cli_pack.$$"
rm -rf "$T" && mkdir -p "$T"
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { "$@" >"$T/out" 2>"$T/err" || { fail "exit $?: $* :: $(cat "$T/err")"; return 1; }; }
B="$HM_BIN"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}" # ctest runs tests side by side

# byte-level training text (no shared data needed)
for i in $(seq 1 24); do
    echo "line $i: the quick brown fox jumps over the lazy dog; bundles carry their checksums."
done >"$T/text.txt"
ok "$B/hm-tokenize" --bytes "$T/text.txt" -o "$T/train.tok"

ok "$B/hm-init" --preset tiny -o "$T/neox.st"
ok "$B/hm-init" --preset llama-tiny -o "$T/llama.st"
for f in neox llama; do
    ok "$B/hm-linearize" "$T/$f.st" -o "$T/$f-hedgehog.st" --data "$T/train.tok" --steps 2 \
        --batch 2 --seq-len 32
    ok "$B/hm-map-ssm" "$T/$f-hedgehog.st" -o "$T/$f-hedgemamba.st"
done

ppl() { sed -n 's/.*"ppl": *\([0-9.e+-]*\).*/\1/p' "$T/out"; }

for m in neox neox-hedgehog neox-hedgemamba llama llama-hedgehog llama-hedgemamba; do
    ok "$B/hm-eval" "$T/$m.st" --data "$T/train.tok" --seq-len 32 --max-tokens 128 --json \
        --dump-logits "$T/$m.ref.st" || continue
    want=$(ppl)
    # greedy and seeded sampling from the checkpoint (its tokenizer given)
    gen=(--prompt "line 3: the" --max-new-tokens 24 --ignore-eot)
    ok "$B/hm-generate" "$T/$m.st" --bytes "${gen[@]}" --temperature 0 --ids || continue
    want_greedy=$(cat "$T/out")
    [ "$(echo "$want_greedy" | wc -w)" -eq 24 ] || fail "$m: greedy gave '$want_greedy'"
    # (ids, not text: a random model emits invalid UTF-8, which the bundle's
    # tokenizer.json decodes as HuggingFace does, to U+FFFD, and --bytes raw)
    ok "$B/hm-generate" "$T/$m.st" --bytes "${gen[@]}" --temperature 0.8 --top-k 20 --seed 7 \
        --ids || continue
    want_text=$(cat "$T/out")
    for fmt in dir tar tar.gz tar.xz tar.zst zip; do
        out="$T/$m.bundle.$fmt"
        ok "$B/hm-pack" "$T/$m.st" -o "$out" --bytes --format "$fmt" || continue
        "$B/hm-verify" bundle "$out" >"$T/out" 2>&1 || fail "$m $fmt: hm-verify bundle: $(cat "$T/out")"
        ok "$B/hm-inspect" "$out"
        grep -q "^bundle:      $fmt, 5 files" "$T/out" || fail "$m $fmt: hm-inspect shows no bundle"
        ok "$B/hm-eval" "$out" --data "$T/train.tok" --seq-len 32 --max-tokens 128 --json
        [ "$(ppl)" = "$want" ] || fail "$m $fmt: PPL $(ppl) on the bundle, $want on the checkpoint"
        "$B/hm-verify" logits "$out" --reference "$T/$m.ref.st" --data "$T/train.tok" \
            --tolerance 0 >"$T/out" 2>&1 || fail "$m $fmt: logits differ: $(cat "$T/out")"
        # generation from the bundle (its own tokenizer) = from the checkpoint
        ok "$B/hm-generate" "$out" "${gen[@]}" --temperature 0 --ids &&
            [ "$(cat "$T/out")" = "$want_greedy" ] ||
            fail "$m $fmt: greedy from the bundle '$(cat "$T/out")' != checkpoint '$want_greedy'"
        ok "$B/hm-generate" "$out" "${gen[@]}" --temperature 0.8 --top-k 20 --seed 7 --ids &&
            [ "$(cat "$T/out")" = "$want_text" ] ||
            fail "$m $fmt: sampled ids from the bundle differ from the checkpoint's"
    done
done

# the model card: the chain with arguments, the training losses
card="$T/neox-hedgemamba.bundle.dir/README.md"
grep -q '^hm-linearize .*--steps 2' "$card" || fail "card: no hm-linearize command line"
grep -q '^hm-map-ssm ' "$card" || fail "card: no hm-map-ssm step"
grep -q '^hm-pack .*--bytes --format dir' "$card" || fail "card: no hm-pack step"
grep -q '| hm-linearize | 128 | .*(mean 1 - cos over layers)' "$card" || fail "card: no hm-linearize tokens/loss row"
grep -q '| arch | `hedgemamba` |' "$card" || fail "card: no arch"
grep -q '"model_type":	"hedgemamba"' "$T/neox-hedgemamba.bundle.dir/config.json" ||
    fail "config.json: model_type is not hedgemamba"

# deterministic: the same input and flags give the same bytes
for fmt in tar.gz zip; do
    ok "$B/hm-pack" "$T/llama-hedgehog.st" -o "$T/again.$fmt" --bytes
    cmp -s "$T/again.$fmt" "$T/llama-hedgehog.bundle.$fmt" || fail "$fmt: a second pack differs"
done

# tampering: one flipped byte in a copy → exit 1 naming the member
cp -r "$T/llama.bundle.dir" "$T/tampered"
printf 'X' | dd of="$T/tampered/config.json" bs=1 seek=20 conv=notrunc 2>/dev/null
"$B/hm-verify" bundle "$T/tampered" >"$T/out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "'config.json'" "$T/out" || fail "tampered config.json: exit $rc $(cat "$T/out")"
"$B/hm-verify" bundle "$T/neox.st" >"$T/out" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "a checkpoint is no bundle: exit $rc (want 2)"

# refusals
"$B/hm-pack" "$T/neox.st" -o "$T/neox.bundle.zip" --bytes >"$T/out" 2>&1
[ $? -eq 1 ] && grep -q "exists" "$T/out" || fail "an existing output was not refused"
"$B/hm-pack" "$T/neox.st" -o "$T/x.zip" --format tar --bytes >"$T/out" 2>&1
[ $? -eq 2 ] || fail "--format contradicting the suffix is not a usage error"
"$B/hm-pack" "$T/neox.st" -o "$T/x.tar" >"$T/out" 2>&1
[ $? -eq 1 ] && grep -q -- "--tokenizer" "$T/out" || fail "no tokenizer: $(cat "$T/out")"
[ ! -e "$T/x.tar" ] || fail "a failed pack left its output"

[ $fails -eq 0 ] || { echo "pack.sh: $fails failure(s)"; exit 1; }
echo "pack.sh: ok"
