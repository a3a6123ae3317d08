#!/usr/bin/env bash
# Narrow frozen weights in training tools (SPEC §11; the eval and generate
# checks are narrow.sh, stage 2 narrow_stage2.sh): a bf16 KD teacher, stage 1
# on a bf16 teacher, its student evaluated and its mapping verified narrow.
set -euo pipefail
B="$HM_BIN"
. "$(dirname "$0")/../support/narrow_fixture.sh"
narrow_model neox bf16
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
V=("$B/hm-verify" mapping --data "$T/text.tok" --seq-len 64 --json --backend ref --max-windows 2)
"${V[@]}" "$T/lin16.st" "$T/map16.st" > "$T/v16.json"
"${V[@]}" "$T/lin16.b32/model.safetensors" "$T/map32.st" > "$T/v32.json"
pv16=$(peak "${V[@]}" "$T/lin16.st" "$T/map16.st")
pv32=$(peak "${V[@]}" "$T/lin16.b32/model.safetensors" "$T/map32.st")
if grep -q '"equivalent": true' "$T/v16.json" && cmp -s "$T/v16.json" "$T/v32.json" &&
   [ $((pv32 - pv16)) -gt 20000 ]; then
    echo "ok verify mapping narrow: the fp32 report, peak ${pv16} KB < ${pv32} KB"
else echo "FAIL verify mapping narrow: reports differ or peak ${pv16} KB vs ${pv32} KB"; fail=1; fi
exit $fail
