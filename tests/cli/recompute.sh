#!/usr/bin/env bash
# recompute.sh — hm-finetune --recompute (trainer.h: activation
# checkpointing). The backward reruns each layer's forward from its saved
# input into one shared set of activations, so:
# - the trained model is the run without --recompute's, byte for byte, for
#   both families and every mixer (softmax, hedgehog, hedgemamba), on ref,
#   checked and fast, with a KD teacher too;
# - the plan's activations shrink to about one layer's, and the measured peak
#   falls with them (or the test would pass with nothing recomputed);
# - stage 1b (--align) refuses it (exit 2).
# Env: HM_BIN, HM_TMP.
set -u
B="$HM_BIN"
T=$(mktemp -d "${HM_TMP:-/tmp}/cli_recompute.XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { "$@" >"$T/out" 2>"$T/err" || { fail "exit $?: $* :: $(cat "$T/err")"; return 1; }; }
. "$(dirname "$0")/../support/peak_rss.sh"
# the tensor table of a checkpoint (names, shapes, hashes): paths differ
table() { "$B/hm-inspect" --tensors --hash "$1" | sed -n '/^tensors:/,$p'; }

head -c 20000 /dev/urandom | base64 > "$T/text.txt"
ok "$B/hm-tokenize" --bytes "$T/text.txt" -o "$T/text.tok"
cat > "$T/neox.json" <<'J'
{"model_type": "gpt_neox", "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4,
 "intermediate_size": 256, "vocab_size": 300, "max_position_embeddings": 256,
 "rotary_pct": 0.25, "use_parallel_residual": true, "layer_norm_eps": 1e-5}
J
cat > "$T/llama.json" <<'J'
{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4,
 "num_key_value_heads": 2, "intermediate_size": 160, "vocab_size": 300,
 "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "tie_word_embeddings": false}
J
RUN=(--data "$T/text.tok" --steps 2 --batch 2 --seq-len 32 --lr 1e-3 --warmup 1 --seed 5 -q)
for fam in neox llama; do
    ok "$B/hm-init" --config "$T/$fam.json" --seed 2 -o "$T/$fam.st"
    ok "$B/hm-linearize" "$T/$fam.st" --data "$T/text.tok" --steps 2 --batch 1 --seq-len 32 \
        -o "$T/$fam.hh.st" -q
    ok "$B/hm-map-ssm" "$T/$fam.hh.st" -o "$T/$fam.hm.st" -q
    for mix in st hh.st hm.st; do
        for be in ref checked fast; do
            n="$T/$fam.$mix.$be"
            ok "$B/hm-finetune" "$T/$fam.$mix" "${RUN[@]}" --backend $be -o "$n.keep.st" || continue
            ok "$B/hm-finetune" "$T/$fam.$mix" "${RUN[@]}" --backend $be --recompute \
                -o "$n.re.st" || continue
            table "$n.keep.st" > "$n.keep"
            table "$n.re.st" > "$n.re"
            if [ "$(wc -l < "$n.keep")" -gt 20 ] && cmp -s "$n.keep" "$n.re"; then
                echo "ok $fam $mix $be: --recompute = without"
            else fail "$fam $mix $be: --recompute trained another model"; fi
        done
    done
    # with a KD teacher (the teacher's forward runs beside the trainee's)
    K=(--kd-teacher "$T/$fam.st" --kd-weight 0.5 --backend fast)
    ok "$B/hm-finetune" "$T/$fam.hm.st" "${RUN[@]}" "${K[@]}" -o "$T/$fam.kd.keep.st" &&
    ok "$B/hm-finetune" "$T/$fam.hm.st" "${RUN[@]}" "${K[@]}" --recompute -o "$T/$fam.kd.re.st" &&
    if cmp -s <(table "$T/$fam.kd.keep.st") <(table "$T/$fam.kd.re.st"); then
        echo "ok $fam KD: --recompute = without"
    else fail "$fam KD: --recompute trained another model"; fi
done

# memory: 12 layers at 4 x 512 rows, where the activations are most of a run
cat > "$T/deep.json" <<'J'
{"model_type": "gpt_neox", "hidden_size": 256, "num_hidden_layers": 12, "num_attention_heads": 4,
 "intermediate_size": 1024, "vocab_size": 300, "max_position_embeddings": 512,
 "rotary_pct": 0.25, "use_parallel_residual": true, "layer_norm_eps": 1e-5}
J
ok "$B/hm-init" --config "$T/deep.json" -o "$T/deep.st"
D=("$B/hm-finetune" "$T/deep.st" --data "$T/text.tok" --steps 1 --batch 4 --seq-len 512 -q -f)
act() { "${D[@]}" "$@" -o "$T/plan.st" --dry-run --json |
    python3 -c 'import json, sys; j = json.load(sys.stdin); m = j["memory_bytes"]
print(int(m["activations"]), int(m["total"]))'; }
read -r a0 t0 < <(act)
read -r a1 t1 < <(act --recompute)
# 12 layers' activations → 1 layer's (+ the inputs h of the other 11)
if [ -n "${a1:-}" ] && [ "$a1" -lt $((a0 / 3)) ]; then
    echo "ok plan: activations $a0 -> $a1 bytes"
else fail "plan: activations ${a0:-?} -> ${a1:-?} bytes with --recompute"; fi
p0=$(peak "${D[@]}" -o "$T/m0.st")
p1=$(peak "${D[@]}" --recompute -o "$T/m1.st")
# the plan's saving (KB), of which most must show in the peak
save=$(( (a0 - a1) / 1024 ))
if [ -n "$p0" ] && [ -n "$p1" ] && [ $((p0 - p1)) -gt $((save / 2)) ]; then
    echo "ok peak ${p0} KB -> ${p1} KB (plan: -${save} KB)"
else fail "peak ${p0:-?} KB -> ${p1:-?} KB, the plan saves ${save} KB"; fi
# the plan holds within 10 % of the measured peak with --recompute too
case "$(ldd "$B/hm-finetune")" in
*libasan*) echo "skip plan vs peak under ASan" ;;
*) python3 - "$t1" "$p1" <<'P' || fail "plan $t1 B vs measured ${p1} KB with --recompute"
import sys
plan, kb = float(sys.argv[1]), float(sys.argv[2]) * 1024
assert abs(plan - kb) <= 0.10 * kb, (plan, kb)
print("ok plan %.1f MB vs measured %.1f MB" % (plan / 1e6, kb / 1e6))
P
;;
esac

# stage 1b keeps each mixer's activations: nothing to recompute
"$B/hm-finetune" "$T/neox.hh.st" "${RUN[@]}" --align "$T/neox.st" --recompute \
    -o "$T/al.st" >"$T/out" 2>"$T/err"
rc=$?
if [ $rc -eq 2 ] && grep -q -- "--recompute" "$T/err" && [ ! -e "$T/al.st" ]; then
    echo "ok --align --recompute refused"
else fail "--align --recompute: exit $rc, $(cat "$T/err")"; fi
exit $((fails > 0))
