#!/usr/bin/env bash
# Narrow frozen weights (SPEC §11, model.h hm_model_load_narrow): hm-eval
# and hm-generate keep a bf16/f16 checkpoint's layer matrices in that dtype
# and widen a layer at a time. Widening is exact, so every result must equal
# the fp32 checkpoint of the same values bit for bit (logits dumps, greedy
# ids), on every CPU backend; and the narrow run must really hold less memory
# (peak RSS), or the test would pass with narrow weights never kept. The
# training tools: narrow_train.sh (KD teacher, stage 1, verify mapping) and
# narrow_stage2.sh (a trainee's frozen embeddings); split so that each fits
# the test timeout under ASan.
set -euo pipefail
B="$HM_BIN"
. "$(dirname "$0")/../support/narrow_fixture.sh"
for fam in neox llama; do
    for dt in bf16 f16; do
        n="$T/$fam-$dt"
        narrow_model $fam $dt
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
exit $fail
