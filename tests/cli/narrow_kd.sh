#!/usr/bin/env bash
# A KD teacher shares the student's narrow embeddings (model.h
# hm_model_load_teacher): a stage-2 student distilled from its own bf16
# teacher keeps embeddings byte-identical to the teacher's, so the teacher
# borrows them instead of holding a second copy. The result must equal the
# run against the teacher's fp32 copy (nothing to share there) byte for byte
# on ref, and the run must hold less memory than against a teacher of the
# same shapes whose embeddings differ (another seed), or the test would pass
# with nothing shared.
set -euo pipefail
B="$HM_BIN"
. "$(dirname "$0")/../support/narrow_fixture.sh"
narrow_model neox bf16
n="$T/neox-bf16"
"$B/hm-init" --config "$T/neox.json" --dtype bf16 --seed 4 -o "$T/other.safetensors" -q
"$B/hm-linearize" "$n.safetensors" --data "$T/text.tok" --steps 1 --batch 1 --seq-len 64 \
    -o "$T/lin16.st" -q
"$B/hm-map-ssm" "$T/lin16.st" -o "$T/map16.st" -q
KD=(--data "$T/text.tok" --steps 2 --batch 1 --seq-len 32 --lr 1e-3 --warmup 1 --kd-weight 0.5 -q)
"$B/hm-finetune" "$T/map16.st" "${KD[@]}" --backend ref --kd-teacher "$n.safetensors" \
    -o "$T/kd.shared.st"
"$B/hm-finetune" "$T/map16.st" "${KD[@]}" --backend ref --kd-teacher "$n.b32/model.safetensors" \
    -o "$T/kd.f32.st"
"$B/hm-inspect" --tensors --hash "$T/kd.shared.st" | sed -n '/^tensors:/,$p' > "$T/h1"
"$B/hm-inspect" --tensors --hash "$T/kd.f32.st" | sed -n '/^tensors:/,$p' > "$T/h2"
if [ "$(wc -l < "$T/h1")" -gt 70 ] && cmp -s "$T/h1" "$T/h2"; then
    echo "ok KD from the teacher sharing the student's embeddings = from its fp32 copy"
else echo "FAIL KD with shared embeddings: the student differs from the fp32 teacher's run"; fail=1; fi
# embed_in and embed_out (untied), 20000 x 512 bf16 each: ~41 MB shared
pa=$(peak "$B/hm-finetune" "$T/map16.st" "${KD[@]}" --kd-teacher "$n.safetensors" -o "$T/pa.st")
pb=$(peak "$B/hm-finetune" "$T/map16.st" "${KD[@]}" --kd-teacher "$T/other.safetensors" \
    -o "$T/pb.st")
if [ $((pb - pa)) -gt 30000 ]; then echo "ok shared embeddings: peak ${pa} KB < ${pb} KB"
else echo "FAIL shared embeddings: peak ${pa} KB vs ${pb} KB with another teacher"; fail=1; fi
exit $fail
