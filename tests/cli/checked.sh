#!/usr/bin/env bash
# checked.sh — the model-level pipeline on the `checked` backend (contract
# §10): every tensor placed through the backend, or the run stops. Stage 1,
# stage 2 on a mapped HedgeMamba, a teacher fine-tune with --grad-accum,
# --stop-after + --resume, evaluation and generation (the softmax teacher's
# KV cache grown past its first 64 rows, the Hedgehog and HedgeMamba states;
# chunked prefill, batched samples, --stop, --prompt-ids, --bench) run on
# `checked` for both families, and their outputs equal the `ref` backend's
# bit for bit (checked computes ref's ops on its guarded memory); hm-verify
# mapping and recurrent run on it too, and a packed bundle evaluates and
# generates on it.
# Env: HM_BIN, HM_TMP.
set -u
B="$HM_BIN"
T="${HM_TMP:-/tmp}/cli_checked.$$"
rm -rf "$T" && mkdir -p "$T"
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { "$@" >"$T/out" 2>"$T/err" || { fail "exit $?: $* :: $(tail -c 600 "$T/err")"; return 1; }; }
# the tensor bytes of a safetensors file (after its 8-byte length and header)
data() { local h; h=$(od -An -tu8 -N8 "$1" | tr -d ' '); tail -c +$((9 + h)) "$1" | md5sum; }
same() { [ "$(data "$1")" = "$(data "$2")" ] || fail "$1 and $2 differ"; }

for i in $(seq 1 300); do echo "the quick brown fox $i jumps over the lazy dog"; done >"$T/text.txt"
ok "$B/hm-tokenize" --bytes "$T/text.txt" -o "$T/train.tok" -q
ok "$B/hm-init" --preset tiny -o "$T/neox.st" --seed 1 -q
ok "$B/hm-init" --preset llama-tiny -o "$T/llama.st" --seed 2 -q
RUN=(--data "$T/train.tok" --batch 2 --seq-len 32 --seed 3 --no-progress -q)
for fam in neox llama; do
    for be in ref checked; do
        o="$T/$fam.$be"
        ok "$B/hm-finetune" "$T/$fam.st" -o "$o.ft.st" "${RUN[@]}" --steps 3 --grad-accum 2 \
            --lr 1e-3 --warmup 1 --backend "$be"
        ok "$B/hm-finetune" "$T/$fam.st" -o "$o.rs.st" "${RUN[@]}" --steps 4 --lr 1e-3 \
            --warmup 1 --backend "$be" --stop-after 2
        ok "$B/hm-finetune" "$T/$fam.st" -o "$o.rs.st" "${RUN[@]}" --steps 4 --lr 1e-3 \
            --warmup 1 --backend "$be" --resume
        ok "$B/hm-linearize" "$T/$fam.st" -o "$o.lin.st" "${RUN[@]}" --steps 2 --lr 1e-2 \
            --backend "$be"
        ok "$B/hm-map-ssm" "$o.lin.st" -o "$o.map.st" -q
        ok "$B/hm-finetune" "$o.map.st" -o "$o.hm.st" "${RUN[@]}" --steps 2 --lr 1e-3 \
            --warmup 1 --backend "$be"
        ok "$B/hm-eval" "$o.hm.st" --data "$T/train.tok" --seq-len 32 --backend "$be" \
            --no-progress && cp "$T/out" "$o.eval.txt"
    done
    for f in ft rs lin hm; do
        same "$T/$fam.ref.$f.st" "$T/$fam.checked.$f.st"
    done
    cmp -s "$T/$fam.ref.eval.txt" "$T/$fam.checked.eval.txt" || fail "$fam: eval differs"
    # generation from the teacher (softmax, KV cache), the Hedgehog student and
    # the HedgeMamba student: a 49-byte prompt in chunks of 5 plus 40 new
    # tokens crosses the KV cache's first 64 rows
    P="the quick brown fox jumps over the lazy dog, and "
    for m in "$T/$fam.ref.ft.st" "$T/$fam.ref.lin.st" "$T/$fam.ref.hm.st"; do
        for be in ref checked; do
            G=("$B/hm-generate" "$m" --backend "$be")
            ok "${G[@]}" --bytes --prompt "$P" --temperature 0 --max-new-tokens 40 \
                --ignore-eot --ids --prefill-chunk 5 && cp "$T/out" "$m.$be.greedy"
            ok "${G[@]}" --bytes --prompt "$P" --temperature 1 --seed 4 --samples 3 --batch 2 \
                --max-new-tokens 30 --stop "e" --stop "o " --prefill-chunk 16 &&
                cp "$T/out" "$m.$be.samples"
            ok "${G[@]}" --prompt-ids 1,100,101,102,103 --temperature 0 --max-new-tokens 20 \
                --ignore-eot && cp "$T/out" "$m.$be.ids"
        done
        for k in greedy samples ids; do
            [ -s "$m.ref.$k" ] || fail "$m: no $k output"
            cmp -s "$m.ref.$k" "$m.checked.$k" || fail "$m: generate ($k) differs"
        done
        ok "$B/hm-generate" "$m" --backend checked --bench --context 70 --batch 2 \
            --shared-prompt --decode-tokens 3 --prefill-chunk 32 --json
    done
    # the checks hm-verify answers, on checked: the mapping is exact, the
    # recurrent form equals the chunked one (students and the KV-cache teacher)
    ok "$B/hm-verify" mapping "$T/$fam.checked.lin.st" "$T/$fam.checked.map.st" \
        --random-tokens 48 --backend checked
    for m in ft lin hm; do
        ok "$B/hm-verify" recurrent "$T/$fam.checked.$m.st" --random-tokens 40 --backend checked
    done
    # the student packed (hm-pack runs no ops), then evaluated and generated
    # from as a bundle on both backends
    ok "$B/hm-pack" "$T/$fam.checked.hm.st" --bytes -o "$T/$fam.bundle" -q
    for be in ref checked; do
        ok "$B/hm-eval" "$T/$fam.bundle" --data "$T/train.tok" --seq-len 32 --backend "$be" \
            --no-progress && cp "$T/out" "$T/$fam.bundle.$be.eval"
        ok "$B/hm-generate" "$T/$fam.bundle" --backend "$be" --prompt "the quick" \
            --temperature 0 --max-new-tokens 20 --ids && cp "$T/out" "$T/$fam.bundle.$be.gen"
    done
    for k in eval gen; do
        [ -s "$T/$fam.bundle.ref.$k" ] || fail "$fam: no bundle $k output"
        cmp -s "$T/$fam.bundle.ref.$k" "$T/$fam.bundle.checked.$k" || fail "$fam: bundle $k differs"
    done
    echo "ok $fam"
done
[ $fails -eq 0 ] || { echo "checked.sh: $fails failure(s)"; exit 1; }
echo "checked.sh: ok"
