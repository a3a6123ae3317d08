#!/usr/bin/env bash
# sizes.sh — the size table of bench/README.md: every tool and stage at the
# sizes users bring, random weights at real shapes stored as HuggingFace
# ships them (bf16; hm-pack's shards past 5 GB, with
# model.safetensors.index.json). For each model and step: wall time, peak
# RSS (/usr/bin/time -v), tokens/s where tokens flow, and the plan's
# prediction (the tool's own --dry-run, for the steps that have one). A step
# whose plan does not fit this machine is not started: its row says so.
#
# Opt-in (not in ctest): hours for the whole table on 2 cores, and disk for
# one model at a time (the 8B shape: ~50 GB). Rows print as they finish
# (Markdown on stdout); the logs stay in $WORK/<model>/.
#
# Environment (defaults):
#   BIN=build/bin SRC=. WORK=build/bench-sizes
#   MODELS="pythia-410m pythia-1b llama-3.2-1b tinyllama-1.1b llama-3.1-8b"
#   STEPS="inspect linearize map-ssm decay verify stage2 resume stage1b kd kd-recompute hybrid
#          eval generate pack"
#   SEQ=512 (training window) TRAIN_STEPS=2 EVAL_SEQ=128 EVAL_WINDOWS=4
#   DECAY_WINDOWS=16 DECAY_SEQ=256 GEN_TOKENS=8 KEEP=0 (1: keep each model's files)
set -u
BIN=${BIN:-build/bin}
SRC=${SRC:-.}
WORK=${WORK:-build/bench-sizes}
MODELS=${MODELS:-"pythia-410m pythia-1b llama-3.2-1b tinyllama-1.1b llama-3.1-8b"}
STEPS=${STEPS:-"inspect linearize map-ssm decay verify stage2 resume stage1b kd kd-recompute hybrid eval generate pack"}
SEQ=${SEQ:-512}
TRAIN_STEPS=${TRAIN_STEPS:-2}
EVAL_SEQ=${EVAL_SEQ:-128}
EVAL_WINDOWS=${EVAL_WINDOWS:-4}
DECAY_WINDOWS=${DECAY_WINDOWS:-16}
DECAY_SEQ=${DECAY_SEQ:-256}
GEN_TOKENS=${GEN_TOKENS:-8}
KEEP=${KEEP:-0}
log() { echo "sizes: $*" >&2; }
die() { log "error: $*"; exit 1; }
[ -x "$BIN/hm-init" ] || die "no $BIN/hm-init (build first)"
. "$SRC/bench/common/measure.sh"
mkdir -p "$WORK"
wants() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }

# The token file: random text, byte-level ids (< 257: valid in every vocabulary)
TOK=$WORK/text.tok
if [ ! -s "$TOK" ]; then
    head -c 600000 /dev/urandom | base64 >"$WORK/text.txt"
    "$BIN/hm-tokenize" --bytes "$WORK/text.txt" -o "$TOK" -f -q || die "hm-tokenize"
fi

# plan_of DIR NAME CMD...: the plan's total (GB) from CMD --dry-run --json, and
# FITS=1 when it fits this machine; PLAN="" for a tool without a plan
plan_of() {
    local dir=$1 name=$2
    shift 2
    PLAN="" FITS=1
    "$@" --dry-run --json >"$dir/$name.plan.json" 2>"$dir/$name.plan.err" || return 0
    read -r PLAN FITS < <(python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
m = j.get("memory_bytes") or j.get("training", {}).get("memory_bytes")
print("%.2f" % (m["total"] / 1e9), 1 if j.get("fits", True) else 0)' "$dir/$name.plan.json")
}

# row MODEL STEP TOKENS CMD...: plans (when the tool plans), runs unless the
# plan does not fit, prints a table row
row() {
    local model=$1 name=$2 tokens=$3
    shift 3
    local dir=$WORK/$model
    PLAN="" FITS=1
    case "$name" in linearize|stage2*|stage1b|kd*) plan_of "$dir" "$name" "$@" ;; esac
    local plan=${PLAN:+$PLAN GB}
    if [ "$FITS" = 0 ]; then
        echo "| $model | $name | — | — | — | ${plan} (does not fit: not started) |"
        return 1
    fi
    log "$model $name: $*"
    if measure "$dir" "$name" "$@"; then
        local tps="—"
        [ "$tokens" -gt 0 ] && tps=$(awk -v n="$tokens" -v s="$WALL" \
            'BEGIN {if (s > 0) printf "%.0f", n / s; else print "—"}')
        echo "| $model | $name | $WALL | $RSS_GB | $tps | ${plan:-—} |"
        return 0
    fi
    echo "| $model | $name | $WALL | $RSS_GB | — | ${plan:-—} (failed: $(tail -c 200 "$dir/$name.err" | tr '\n' ' ')) |"
    return 1
}

echo "| model | step | wall s | peak RSS GB | tokens/s | plan |"
echo "|---|---|---|---|---|---|"
for model in $MODELS; do
    dir=$WORK/$model
    mkdir -p "$dir"
    M=$dir/teacher H=$dir/hedgehog.st S=$dir/hedgemamba.st
    # the teacher as HF ships it: bf16, shards past 5 GB with an index
    if [ ! -e "$M/config.json" ]; then
        log "$model: hm-init --dtype bf16, hm-pack"
        "$BIN/hm-init" --preset "$model" --dtype bf16 -o "$dir/init.st" -f -q ||
            die "hm-init --preset $model"
        "$BIN/hm-pack" "$dir/init.st" --bytes -o "$M" -f -q || die "hm-pack $model"
        rm -f "$dir/init.st"
    fi
    tr=$((TRAIN_STEPS * SEQ))
    wants inspect && row "$model" inspect 0 "$BIN/hm-inspect" "$M"
    # stage 1 (feature maps only), then the exact mapping
    if wants linearize || [ ! -s "$H" ]; then
        row "$model" linearize "$tr" "$BIN/hm-linearize" "$M" --data "$TOK" \
            --steps "$TRAIN_STEPS" --batch 1 --seq-len "$SEQ" -o "$H" -f -q --no-progress
    fi
    if wants map-ssm || [ ! -s "$S" ]; then
        [ -s "$H" ] && row "$model" map-ssm 0 "$BIN/hm-map-ssm" "$H" -o "$S" -f -q
    fi
    wants decay && [ -s "$H" ] &&
        row "$model" "map-ssm --decay-from" $((DECAY_WINDOWS * DECAY_SEQ)) "$BIN/hm-map-ssm" \
            "$H" -o "$dir/decay.st" -f -q --decay-from "$TOK" --decay-windows "$DECAY_WINDOWS" \
            --seq-len "$DECAY_SEQ"
    rm -f "$dir/decay.st"
    wants verify && [ -s "$S" ] &&
        row "$model" "verify mapping" 512 "$BIN/hm-verify" mapping "$H" "$S" --random-tokens 512
    # stage 2 with frozen embeddings; stage 1b; KD with the bf16 teacher
    common=(--data "$TOK" --steps "$TRAIN_STEPS" --batch 1 --seq-len "$SEQ" -f -q --no-progress)
    if [ -s "$S" ]; then
        wants stage2 && row "$model" stage2 "$tr" "$BIN/hm-finetune" "$S" "${common[@]}" \
            --freeze embeddings -o "$dir/s2.st"
        # stage 2 in two invocations: one step (--stop-after saves OUT and OUT.state),
        # then --resume to the end (the resumed run's memory, save included)
        wants resume && row "$model" "stage2 save" $SEQ "$BIN/hm-finetune" "$S" "${common[@]}" \
            --freeze embeddings --stop-after 1 -o "$dir/r.st" &&
            row "$model" "stage2 resume" $((tr - SEQ)) "$BIN/hm-finetune" "$S" "${common[@]}" \
                --freeze embeddings --resume -o "$dir/r.st"
        rm -f "$dir"/r.st*
        wants stage1b && row "$model" stage1b "$tr" "$BIN/hm-finetune" "$S" "${common[@]}" \
            --align "$M" -o "$dir/s1b.st"
        wants kd && row "$model" kd "$tr" "$BIN/hm-finetune" "$S" "${common[@]}" \
            --freeze embeddings --kd-teacher "$M" --kd-weight 0.5 -o "$dir/kd.st"
        # the same with activation checkpointing (one layer's activations)
        wants kd-recompute && row "$model" "kd --recompute" "$tr" "$BIN/hm-finetune" "$S" \
            "${common[@]}" --freeze embeddings --kd-teacher "$M" --kd-weight 0.5 --recompute \
            -o "$dir/kd.st"
        rm -f "$dir"/s2.st* "$dir"/s1b.st* "$dir"/kd.st*
    fi
    # a hybrid keeping layers 0 and 1 softmax (the teacher's attention
    # tensors; mapped from the teacher: a hedgehog's layers are linear
    # already), then its stage 2: the plan against the measured peak
    if wants hybrid; then
        row "$model" "map-ssm --keep-attention 0,1" 0 "$BIN/hm-map-ssm" "$M" -o "$dir/hy.st" -f -q \
            --keep-attention 0,1 &&
            row "$model" "stage2 hybrid 0,1" "$tr" "$BIN/hm-finetune" "$dir/hy.st" "${common[@]}" \
                --freeze embeddings -o "$dir/hys2.st"
        rm -f "$dir"/hy.st* "$dir"/hys2.st*
    fi
    wants eval && row "$model" eval $((EVAL_WINDOWS * EVAL_SEQ)) "$BIN/hm-eval" "$M" \
        --data "$TOK" --seq-len "$EVAL_SEQ" --max-tokens $((EVAL_WINDOWS * EVAL_SEQ))
    wants generate && row "$model" generate "$GEN_TOKENS" "$BIN/hm-generate" "$M" \
        --prompt-ids 1,2,3,4 --max-new-tokens "$GEN_TOKENS" --temperature 0 --ids
    wants pack && [ -s "$S" ] && row "$model" pack 0 "$BIN/hm-pack" "$S" --bytes -o "$dir/bundle" -f -q
    rm -rf "$dir/bundle"
    [ "$KEEP" = 1 ] || rm -rf "$M" "$H" "$H.state" "$S"
done
