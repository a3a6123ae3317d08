#!/usr/bin/env bash
# decode_table.sh — decoding cost at Pythia-70m shape: the softmax teacher
# (KV cache) against its Hedgehog and HedgeMamba students (constant state),
# tokens/s and peak RSS per cell, every cell its own hm-generate --bench
# process (so ru_maxrss is that cell's), the three models run alternately
# within a row (A B C, then B C A, ...), medians and min–max over ROUNDS, and
# the machine's limits (bench_decode: memory read GB/s, a 178.5 MB sgemv)
# measured in the same run, once per row. Also the decode's process CPU
# time per token, steadier than wall time when other programs share the
# cores (set OMP_WAIT_POLICY=PASSIVE to keep OpenMP's spinning out of it). Prints Markdown tables on stdout;
# raw JSON lines go to $WORK/results.jsonl, progress to stderr.
#
# The B sequences of a cell share one random prompt (--shared-prompt): it is
# prefilled once and its state copied into each sequence's own memory, so
# every step reads B KV caches (or B states) as B independent prompts would,
# without B long prefills. A step runs the B tokens as the rows of one pass.
#
# Random weights (the point is the cost): hm-init --preset pythia-70m with
# max_position_embeddings raised to cover the longest context (the teacher
# refuses longer prompts), hm-linearize --steps 0 (identity feature maps),
# hm-map-ssm. Models are cached in $WORK.
#
# Environment (defaults): BIN=build/bin BENCH_BIN=build/bench
# WORK=build/bench-decode CONTEXTS="256 1024 4096 16384" BATCHES="1 8"
# DECODE_TOKENS=32 THREADS=2 ROUNDS=1
# LONG_DECODE_TOKENS (decode tokens of cells with context >= LONG_CONTEXT
# (16384); default DECODE_TOKENS) SKIP="teacher:16384:8 ..." (cells not run,
# shown as "not run").
set -u
BIN=${BIN:-build/bin}
BENCH_BIN=${BENCH_BIN:-build/bench}
WORK=${WORK:-build/bench-decode}
CONTEXTS=${CONTEXTS:-256 1024 4096 16384}
BATCHES=${BATCHES:-1 8}
DECODE_TOKENS=${DECODE_TOKENS:-32}
LONG_CONTEXT=${LONG_CONTEXT:-16384}
LONG_DECODE_TOKENS=${LONG_DECODE_TOKENS:-$DECODE_TOKENS}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-1}
SKIP=${SKIP:-}
mkdir -p "$WORK"
log() { echo "decode_table: $*" >&2; }
die() { log "error: $*"; exit 1; }
[ -x "$BIN/hm-generate" ] || die "no $BIN/hm-generate (build first: make)"

# ---- the models ----------------------------------------------------------
maxctx=0
for c in $CONTEXTS; do [ "$c" -gt $maxctx ] && maxctx=$c; done
maxpos=$((maxctx + (LONG_DECODE_TOKENS > DECODE_TOKENS ? LONG_DECODE_TOKENS : DECODE_TOKENS)))
T=$WORK/teacher-$maxpos.st H=$WORK/hedgehog-$maxpos.st M=$WORK/hedgemamba-$maxpos.st
if [ ! -s "$M" ]; then
    log "making the Pythia-70m-shaped models (max_position_embeddings $maxpos)"
    "$BIN/hm-init" --preset pythia-70m -n --json |
        sed "s/\"max_position_embeddings\":[0-9]*/\"max_position_embeddings\":$maxpos/" \
            > "$WORK/config.json" || die "hm-init -n"
    "$BIN/hm-init" --config "$WORK/config.json" -o "$T" -f -q || die "hm-init"
    for i in $(seq 64); do echo "a few words of text for a token file"; done > "$WORK/text.txt"
    "$BIN/hm-tokenize" --bytes "$WORK/text.txt" -o "$WORK/text.tok" -f -q || die "hm-tokenize"
    "$BIN/hm-linearize" "$T" -o "$H" --data "$WORK/text.tok" --steps 0 --seq-len 16 --batch 1 \
        -f -q --no-progress || die "hm-linearize"
    "$BIN/hm-map-ssm" "$H" -o "$M" -f -q || die "hm-map-ssm"
fi

# ---- the runs -------------------------------------------------------------
names=(teacher hedgehog hedgemamba)
files=("$T" "$H" "$M")
res=$WORK/results.jsonl
: > "$res"
field() { grep -o "\"$1\": [-0-9.e+]*" | head -1 | sed 's/.*: //'; }
# stats: "median (min–max)" of numbers on stdin, scaled by $1, printf format $2
stats() {
    sort -g | awk -v s="$1" -v f="$2" '{v[NR] = $1 * s} END {
        if (NR == 0) { printf "-"; exit }
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        if (NR == 1) printf f, m; else printf f " (" f "–" f ")", m, v[1], v[NR] }'
}
declare -A dec pre rss cpu lim_bw lim_gv
for ctx in $CONTEXTS; do
    for b in $BATCHES; do
        m=$DECODE_TOKENS
        [ "$ctx" -ge "$LONG_CONTEXT" ] && m=$LONG_DECODE_TOKENS
        for r in $(seq "$ROUNDS"); do
            for k in 0 1 2; do
                i=$(((k + r - 1) % 3))
                key="${names[$i]}:$ctx:$b"
                case " $SKIP " in *" $key "*) continue ;; esac
                log "$key round $r ($m decode tokens)"
                out=$("$BIN/hm-generate" --bench --shared-prompt --context "$ctx" --batch "$b" \
                      --decode-tokens "$m" --threads "$THREADS" --json "${files[$i]}") ||
                    die "hm-generate failed for $key"
                echo "$out" >> "$res"
                dec[$key]+="$(echo "$out" | field decode_tokens_per_s) "
                pre[$key]+="$(echo "$out" | field prefill_tokens_per_s) "
                rss[$key]+="$(echo "$out" | field peak_rss_bytes) "
                c=$(echo "$out" | field decode_cpu_s)
                [ -n "$c" ] && cpu[$key]+="$(awk -v c="$c" -v n=$((b * m)) \
                    'BEGIN { printf "%.6g", (n > 0 ? 1e3 * c / n : 0) }') "
            done
        done
        lim=$("$BENCH_BIN/bench_decode" --threads "$THREADS" 2>/dev/null) || lim=""
        echo "{\"limits\": $lim, \"context\": $ctx, \"batch\": $b}" >> "$res"
        lim_bw[$ctx:$b]=$(echo "$lim" | field read_gb_per_s)
        lim_gv[$ctx:$b]=$(echo "$lim" | field sgemv_gb_per_s)
    done
done

# ---- the tables -----------------------------------------------------------
cell() { # decode tok/s, peak RSS MiB
    local key=$1
    if [ -z "${dec[$key]:-}" ]; then printf "not run"; return; fi
    printf "%s tok/s, %s MiB" "$(echo "${dec[$key]}" | tr ' ' '\n' | grep . | stats 1 "%.3g")" \
        "$(echo "${rss[$key]}" | tr ' ' '\n' | grep . | stats 9.5367431640625e-07 "%.0f")"
}
echo
echo "Decoding, Pythia-70m shape, $THREADS threads: tokens/s over all sequences (batch B"
echo "= B states stepped in lock-step), peak RSS of the process; $DECODE_TOKENS decode"
echo "tokens per sequence ($LONG_DECODE_TOKENS at context >= $LONG_CONTEXT), $ROUNDS round(s)"
echo
echo "| context | batch | teacher (softmax, KV cache) | Hedgehog | HedgeMamba | read GB/s | sgemv GB/s |"
echo "|---|---|---|---|---|---|---|"
for ctx in $CONTEXTS; do
    for b in $BATCHES; do
        printf "| %s | %s | %s | %s | %s | %s | %s |\n" "$ctx" "$b" "$(cell teacher:$ctx:$b)" \
            "$(cell hedgehog:$ctx:$b)" "$(cell hedgemamba:$ctx:$b)" "${lim_bw[$ctx:$b]:--}" \
            "${lim_gv[$ctx:$b]:--}"
    done
done
# side_table TITLE ARRAY EMPTY: one more table of the same cells
side_table() {
    local -n vals=$2
    echo
    echo "$1"
    echo
    echo "| context | batch | teacher | Hedgehog | HedgeMamba |"
    echo "|---|---|---|---|---|"
    for ctx in $CONTEXTS; do
        for b in $BATCHES; do
            row="| $ctx | $b |"
            for n in "${names[@]}"; do
                v="${vals[$n:$ctx:$b]:-}"
                if [ -z "$v" ]; then row+=" $3 |"
                else row+=" $(echo "$v" | tr ' ' '\n' | grep . | stats 1 "%.3g") |"; fi
            done
            echo "$row"
        done
    done
}
side_table "Decoding CPU time of the same runs (process CPU ms per token, all threads):" cpu "-"
side_table "Prefill of the same runs (prompt tokens/s of the one shared prefill):" pre "not run"
