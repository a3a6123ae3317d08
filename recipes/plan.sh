#!/bin/sh
# plan.sh — the plan of recipes/convert.mk for TEACHER on this machine:
# stages, steps and tokens, memory (the tools' own -n estimates at the
# planned batch) and time, from throughput measured here and now: a few
# steps of stage 1 and of stage 2 (the median step, the first left out) at batch 1 of PLAN_SEQ tokens on random
# token ids, scaled linearly by the token counts. Larger batches usually run
# faster per token, so the times are upper estimates for this machine.
# Env: TEACHER BIN THREADS BATCH SEQ STAGE1_TOKENS STAGE2_TOKENS STAGE1_LR
#      STAGE2_LR FAMILY [PLAN_SEQ (default min(SEQ, 256)) PLAN_STEPS (5)]
set -eu
die() { echo "plan: $*" >&2; exit 1; }
[ -e "$TEACHER" ] || die "TEACHER '$TEACHER' does not exist"
W=$(mktemp -d "${TMPDIR:-/tmp}/hm-plan.XXXXXX")
[ -n "${PLAN_KEEP:-}" ] || trap 'rm -rf "$W"' EXIT
field() { sed -n "s/.*\"$1\":[[:space:]]*\"*\([^\",}]*\)\"*.*/\1/p" "$2" | head -1; }
"$BIN/hm-inspect" "$TEACHER" --json > "$W/inspect.json" 2> "$W/err" ||
    die "cannot read the teacher: $(cat "$W/err")"
arch=$(field arch "$W/inspect.json")
family=$(field family "$W/inspect.json")
V=$(field vocab_size "$W/inspect.json")
d=$(field hidden_size "$W/inspect.json")
L=$(field num_hidden_layers "$W/inspect.json")
maxpos=$(field max_position_embeddings "$W/inspect.json")
np=$(field n_params "$W/inspect.json")
[ -n "$FAMILY" ] && [ "$FAMILY" != "$family" ] &&
    die "'$TEACHER' is a $family model; this recipe is for $FAMILY (use recipes/$family.mk)"
case $arch in gpt_neox|llama) ;; *) die "'$TEACHER' is a $arch checkpoint, not a teacher" ;; esac
[ "$SEQ" -le "$maxpos" ] || die "SEQ $SEQ exceeds the teacher's max_position_embeddings $maxpos"
ps=${PLAN_SEQ:-$([ "$SEQ" -lt 256 ] && echo "$SEQ" || echo 256)}
steps=${PLAN_STEPS:-5}

# random ids for the measuring runs (an LCG: the same file every time)
awk -v V="$V" -v n=$(( (ps + 1) * (steps + 2) * 2 )) \
    'BEGIN { x = 12345; for (i = 0; i < n; i++) { x = (x * 1103515245 + 12345) % 2147483648; printf "%d ", x % V } }' \
    > "$W/ids.txt"
"$BIN/hm-tokenize" --ids-in --vocab-size "$V" "$W/ids.txt" -o "$W/ids.tok" -q
one="--data $W/ids.tok --batch 1 --seq-len $ps --threads $THREADS --no-progress -q"
planned="--data $W/ids.tok --batch $BATCH --seq-len $SEQ --threads $THREADS"
# the median step rate, the first (warm-up) step left out
tps() { sed -n 's/.*"tokens_per_s": *\([0-9.e+-]*\).*/\1/p' "$1" | sed 1d | sort -g |
        awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

"$BIN/hm-linearize" "$TEACHER" -o "$W/hh.st" $one --steps "$steps" --log "$W/s1.log" ||
    die "stage 1 did not run"
"$BIN/hm-map-ssm" "$W/hh.st" -o "$W/hm.st" -q
"$BIN/hm-finetune" "$W/hm.st" -o "$W/ft.st" $one --steps "$steps" --freeze embeddings \
    --log "$W/s2.log" || die "stage 2 did not run"
t1=$(tps "$W/s1.log") t2=$(tps "$W/s2.log")
m1=$("$BIN/hm-linearize" "$TEACHER" -o "$W/x.st" $planned --tokens "$STAGE1_TOKENS" \
     --lr "$STAGE1_LR" -n 2>&1 | sed -n 's/^memory: *//p')
m2=$("$BIN/hm-finetune" "$W/hm.st" -o "$W/x.st" $planned --tokens "$STAGE2_TOKENS" \
     --lr "$STAGE2_LR" --freeze embeddings -n 2>&1 | sed -n 's/^memory: *//p')
sp=$("$BIN/hm-inspect" "$W/hm.st" --json | sed -n 's/.*"n_params":[[:space:]]*\([0-9]*\).*/\1/p' | head -1)
hm() { awk -v s="$1" 'BEGIN { if (s < 120) printf "%.0f s", s; else if (s < 7200) printf "%.1f min", s / 60;
                              else if (s < 172800) printf "%.1f h", s / 3600; else printf "%.1f days", s / 86400 }'; }
est1=$(awk -v n="$STAGE1_TOKENS" -v t="$t1" 'BEGIN { print n / t }')
est2=$(awk -v n="$STAGE2_TOKENS" -v t="$t2" 'BEGIN { print n / t }')
tok=$((BATCH * SEQ))
cat <<EOF
plan for $TEACHER ($family, $L layers, d $d, vocab $V, $np parameters; student $sp)
machine: $(nproc) cores, $THREADS threads, $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) memory
  1. tokenize DATA with the teacher's tokenizer (a held-out split for validation)
  2. stage 1  hm-linearize   $STAGE1_TOKENS tokens = $(( (STAGE1_TOKENS + tok - 1) / tok )) steps of $BATCH x $SEQ, peak LR $STAGE1_LR
              measured here: $(printf '%.0f' "$t1") tokens/s (batch 1 x $ps)  →  about $(hm "$est1")
              memory: $m1
  3. hm-map-ssm (exact), hm-verify mapping (≤ 1e-5)
  4. stage 2  hm-finetune    $STAGE2_TOKENS tokens = $(( (STAGE2_TOKENS + tok - 1) / tok )) steps of $BATCH x $SEQ, peak LR $STAGE2_LR, embeddings frozen
              measured here: $(printf '%.0f' "$t2") tokens/s (batch 1 x $ps)  →  about $(hm "$est2")
              memory: $m2
  5. hm-eval of teacher and student, hm-pack --onnx, hm-verify bundle
total: about $(hm "$(awk -v a="$est1" -v b="$est2" 'BEGIN { print a + b }')") of training on this machine (upper estimate:
measured at batch 1; the paper's LR is for Pythia-1B, set STAGE1_LR / STAGE2_LR for other sizes)
EOF
