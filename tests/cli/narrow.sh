#!/usr/bin/env bash
# Narrow frozen weights (SPEC §11, model.h hm_model_load_narrow): hm-eval,
# hm-generate, the --kd-teacher of hm-finetune and a stage-2 trainee's
# frozen embeddings keep a bf16/f16
# checkpoint's layer matrices in that dtype and widen a layer at a time.
# Widening is exact, so every result must equal the fp32 checkpoint of the
# same values bit for bit (logits dumps, greedy ids, a KD run's output), on
# every CPU backend; and the narrow run must really hold less memory (peak
# RSS), or the test would pass with narrow weights never kept.
set -euo pipefail
B="$HM_BIN"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
. "$(dirname "$0")/../support/peak_rss.sh"
head -c 3000 /dev/urandom | base64 > "$T/text.txt"
"$B/hm-tokenize" --bytes "$T/text.txt" -o "$T/text.tok" -q
cat > "$T/neox.json" <<'J'
{"model_type": "gpt_neox", "hidden_size": 512, "num_hidden_layers": 6, "num_attention_heads": 8,
 "intermediate_size": 2048, "vocab_size": 20000, "max_position_embeddings": 512,
 "rotary_pct": 0.25, "use_parallel_residual": true, "layer_norm_eps": 1e-5}
J
cat > "$T/llama.json" <<'J'
{"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 6, "num_attention_heads": 8,
 "num_key_value_heads": 2, "intermediate_size": 1536, "vocab_size": 20000,
 "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "tie_word_embeddings": true}
J
# close A B TOL: two logits dumps (F32 safetensors) agree within TOL as
# max |a - b| / max |b| over every tensor (TOL 0: bit for bit). The fast
# backend's narrow head multiplies tiles of the vocabulary where the fp32 head
# multiplies it whole: OpenBLAS may sum those in another order on another CPU,
# so there the check is 1e-6; ref and checked compute each logit by one loop
# and must agree exactly.
close() {
    python3 - "$@" <<'P'
import array, json, struct, sys
def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        a = array.array("f"); a.frombytes(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
        out[k] = a
    return out
a, b, tol = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
assert a.keys() == b.keys() and a, "tensors differ"
for k in a:
    assert len(a[k]) == len(b[k]), k
    d = max(abs(x - y) for x, y in zip(a[k], b[k]))
    m = max(abs(y) for y in b[k]) or 1.0
    assert d / m <= tol, "%s: %g relative" % (k, d / m)
P
}
for fam in neox llama; do
    for dt in bf16 f16; do
        n="$T/$fam-$dt"
        "$B/hm-init" --config "$T/$fam.json" --dtype $dt --seed 3 -o "$n.safetensors" -q
        # the same values in fp32 (widening is exact)
        "$B/hm-pack" --bytes --dtype f32 "$n.safetensors" -o "$n.b32" -q
        for be in fast ref checked; do
            # ref and checked are slow loops: a few windows are enough there.
            # The head (vocabulary 20000) is widened in 4 tiles of rows, and
            # the fast run's 1024 rows multiply in 2 chunks (model.h)
            w=256 mt=2048 bt=4; [ $be = fast ] || w=16 mt=64 bt=1
            "$B/hm-eval" "$n.safetensors" --data "$T/text.tok" --seq-len $w --max-tokens $mt \
                --batch $bt --backend $be --dump-logits "$n.narrow.$be.st" -q
            "$B/hm-eval" "$n.b32/model.safetensors" --data "$T/text.tok" --seq-len $w \
                --max-tokens $mt --batch $bt --backend $be --dump-logits "$n.f32.$be.st" -q
            tol=0; [ $be = fast ] && tol=1e-6
            if close "$n.narrow.$be.st" "$n.f32.$be.st" $tol; then echo "ok $fam $dt eval $be"
            else echo "FAIL $fam $dt eval $be: logits differ from the fp32 checkpoint's"; fail=1; fi
        done
        g1=$("$B/hm-generate" "$n.safetensors" --prompt-ids 1,2,3 --temperature 0 \
            --max-new-tokens 12 --ids || true)
        g2=$("$B/hm-generate" "$n.b32/model.safetensors" --prompt-ids 1,2,3 --temperature 0 \
            --max-new-tokens 12 --ids || true)
        if [ -n "$g1" ] && [ "$g1" = "$g2" ]; then echo "ok $fam $dt generate"
        else echo "FAIL $fam $dt generate: '$g1' vs '$g2'"; fail=1; fi
        # memory: the narrow run holds the layer matrices at half the bytes
        # (6 layers of ~3 M floats: ~36 MB less at bf16); fp32 pages mapped
        # from the file are released as they are read, in both runs
        p16=$(peak "$B/hm-eval" "$n.safetensors" --data "$T/text.tok" --seq-len 64 -q)
        p32=$(peak "$B/hm-eval" "$n.b32/model.safetensors" --data "$T/text.tok" --seq-len 64 -q)
        if [ $((p32 - p16)) -gt 20000 ]; then echo "ok $fam $dt peak ${p16} KB < ${p32} KB"
        else echo "FAIL $fam $dt peak: narrow ${p16} KB, fp32 ${p32} KB (narrow not kept?)"; fail=1; fi
    done
done
# a bf16 teacher for KD: the same student after training against the fp32
# copy of the teacher, byte for byte (ref: the teacher's tiled head sums each
# logit as its whole head does on every CPU)
n="$T/neox-bf16"
"$B/hm-finetune" "$n.b32/model.safetensors" --data "$T/text.tok" --steps 2 --batch 1 --backend ref \
    --seq-len 32 --kd-teacher "$n.safetensors" --kd-weight 0.5 -o "$T/kd16.st" -q
"$B/hm-finetune" "$n.b32/model.safetensors" --data "$T/text.tok" --steps 2 --batch 1 --backend ref \
    --seq-len 32 --kd-teacher "$n.b32/model.safetensors" --kd-weight 0.5 -o "$T/kd32.st" -q
# the tensor table only (names, shapes, hashes): paths and times differ
if "$B/hm-inspect" --tensors --hash "$T/kd16.st" | sed -n '/^tensors:/,$p' > "$T/h16" &&
   "$B/hm-inspect" --tensors --hash "$T/kd32.st" | sed -n '/^tensors:/,$p' > "$T/h32" &&
   [ "$(wc -l < "$T/h16")" -gt 70 ] && cmp -s "$T/h16" "$T/h32"; then echo "ok kd teacher bf16 = f32"
else echo "FAIL kd teacher: the student trained against the bf16 teacher differs"; fail=1; fi
# stage 1 on a bf16 teacher (the student shares the teacher's tensors,
# hm_model_extend): the same feature maps as from the fp32 copy, and one
# copy of the weights (before: teacher + student, ~2 fp32 models)
"$B/hm-linearize" "$n.safetensors" --data "$T/text.tok" --steps 2 --batch 1 --seq-len 64 \
    -o "$T/lin16.st" -q
"$B/hm-linearize" "$n.b32/model.safetensors" --data "$T/text.tok" --steps 2 --batch 1 \
    --seq-len 64 -o "$T/lin32.st" -q
"$B/hm-inspect" --tensors --hash "$T/lin16.st" | grep "feature_map_" > "$T/f16"
"$B/hm-inspect" --tensors --hash "$T/lin32.st" | grep "feature_map_" > "$T/f32"
if [ "$(wc -l < "$T/f16")" -eq 24 ] && cmp -s "$T/f16" "$T/f32"; then echo "ok linearize bf16 = f32"
else echo "FAIL linearize: feature maps from the bf16 teacher differ"; fail=1; fi
pl=$(peak "$B/hm-linearize" "$n.b32/model.safetensors" --data "$T/text.tok" --steps 1 --batch 1 \
    --seq-len 64 -o "$T/lin32b.st" -q)
pe=$(peak "$B/hm-eval" "$n.b32/model.safetensors" --data "$T/text.tok" --seq-len 64 -q)
# hm-eval + the save's mapped pages (~78 MB); a second fp32 copy adds 78 MB more
if [ $((pl - pe)) -lt 110000 ]; then echo "ok linearize holds one copy: ${pl} KB vs eval ${pe} KB"
else echo "FAIL linearize peak ${pl} KB vs eval ${pe} KB (a second copy?)"; fail=1; fi
# a student of a bf16 teacher (its hedgehog: bf16 teacher matrices, fp32
# feature maps) runs narrow too: the logits of its fp32 copy, in less memory
"$B/hm-pack" --bytes --dtype f32 "$T/lin16.st" -o "$T/lin16.b32" -q
"$B/hm-eval" "$T/lin16.st" --data "$T/text.tok" --seq-len 64 --max-tokens 1024 \
    --dump-logits "$T/hh.narrow.st" -q
"$B/hm-eval" "$T/lin16.b32/model.safetensors" --data "$T/text.tok" --seq-len 64 \
    --max-tokens 1024 --dump-logits "$T/hh.f32.st" -q
ph16=$(peak "$B/hm-eval" "$T/lin16.st" --data "$T/text.tok" --seq-len 64 -q)
ph32=$(peak "$B/hm-eval" "$T/lin16.b32/model.safetensors" --data "$T/text.tok" --seq-len 64 -q)
if close "$T/hh.narrow.st" "$T/hh.f32.st" 1e-6 && [ $((ph32 - ph16)) -gt 20000 ]; then
    echo "ok hedgehog of a bf16 teacher: narrow, the fp32 copy's logits, peak ${ph16} KB < ${ph32} KB"
else echo "FAIL hedgehog of a bf16 teacher: logits differ or peak ${ph16} KB vs ${ph32} KB"; fail=1; fi
# hm-verify mapping of the bf16 pair runs narrow: the same report as the
# fp32 copies', in less memory
"$B/hm-map-ssm" "$T/lin16.st" -o "$T/map16.st" -q
"$B/hm-map-ssm" "$T/lin16.b32/model.safetensors" -o "$T/map32.st" -q
# (ref: each logit one loop, the same bits on every CPU)
V=("$B/hm-verify" mapping --data "$T/text.tok" --seq-len 64 --json --backend ref)
"${V[@]}" "$T/lin16.st" "$T/map16.st" > "$T/v16.json"
"${V[@]}" "$T/lin16.b32/model.safetensors" "$T/map32.st" > "$T/v32.json"
pv16=$(peak "${V[@]}" "$T/lin16.st" "$T/map16.st")
pv32=$(peak "${V[@]}" "$T/lin16.b32/model.safetensors" "$T/map32.st")
if grep -q '"equivalent": true' "$T/v16.json" && cmp -s "$T/v16.json" "$T/v32.json" &&
   [ $((pv32 - pv16)) -gt 20000 ]; then
    echo "ok verify mapping narrow: the fp32 report, peak ${pv16} KB < ${pv32} KB"
else echo "FAIL verify mapping narrow: reports differ or peak ${pv16} KB vs ${pv32} KB"; fail=1; fi
# stage 2 on that bf16 hedgemamba: its frozen embeddings stay narrow
# (hm_model_load_trainee: the lookup widens rows, the head's backward
# [V, 128] column blocks), the rest trains in fp32. On ref and checked the
# student equals the one trained from the fp32 copy byte for byte (each
# input gradient of the head the same one sum over V); on fast (BLAS on
# column blocks) within 1e-4; and the narrow run holds less memory
S2=(--data "$T/text.tok" --steps 2 --batch 1 --seq-len 32 --lr 1e-3 --warmup 1 -q)
for be in ref checked; do
    "$B/hm-finetune" "$T/map16.st" "${S2[@]}" --backend $be -o "$T/s2n.$be.st"
    "$B/hm-finetune" "$T/map32.st" "${S2[@]}" --backend $be -o "$T/s2w.$be.st"
    "$B/hm-inspect" --tensors --hash "$T/s2n.$be.st" | sed -n '/^tensors:/,$p' > "$T/s2n.h"
    "$B/hm-inspect" --tensors --hash "$T/s2w.$be.st" | sed -n '/^tensors:/,$p' > "$T/s2w.h"
    if [ "$(wc -l < "$T/s2n.h")" -gt 70 ] && cmp -s "$T/s2n.h" "$T/s2w.h"; then
        echo "ok stage 2 narrow embeddings $be = f32"
    else echo "FAIL stage 2 narrow embeddings $be: the student differs from the fp32 run's"; fail=1; fi
done
"$B/hm-finetune" "$T/map16.st" "${S2[@]}" --backend fast -o "$T/s2n.fast.st"
"$B/hm-finetune" "$T/map32.st" "${S2[@]}" --backend fast -o "$T/s2w.fast.st"
if close "$T/s2n.fast.st" "$T/s2w.fast.st" 1e-4; then echo "ok stage 2 narrow embeddings fast"
else echo "FAIL stage 2 narrow embeddings fast: the student differs beyond 1e-4"; fail=1; fi
ps16=$(peak "$B/hm-finetune" "$T/map16.st" "${S2[@]}" --backend fast -o "$T/s2p16.st")
ps32=$(peak "$B/hm-finetune" "$T/map32.st" "${S2[@]}" --backend fast -o "$T/s2p32.st")
if [ $((ps32 - ps16)) -gt 20000 ]; then echo "ok stage 2 narrow peak ${ps16} KB < ${ps32} KB"
else echo "FAIL stage 2 narrow peak ${ps16} KB vs ${ps32} KB (embeddings not kept narrow?)"; fail=1; fi
exit $fail
