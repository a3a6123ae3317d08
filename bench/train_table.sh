#!/usr/bin/env bash
# train_table.sh — training tokens/s of hm (bench/bench_train) against the
# tuned PyTorch peer (../shared/peers/perf_torch.py --bench --tuned), run
# alternately (hm, peer, hm, peer, ...; ROUNDS each) for every cell, medians
# and min–max, the ratio of the medians, and each side's FLOP rate as a
# fraction of the sgemm timed in its own process (both count FLOPs the same
# way: shared/BENCH.md, perf_torch.py's flops_per_token, hm's
# hm_train_flops_per_token — the two counts are printed side by side).
#
# Setup of both sides: random weights, AdamW (0.9, 0.95, wd 0.1 on
# matrices), clip 1.0, cross-entropy, embeddings frozen for the students and
# trained for the teacher, fp32, 2 threads. The peer runs tuned as
# shared/BENCH.md asks (OMP_WAIT_POLICY=PASSIVE MALLOC_MMAP_MAX_=0
# MALLOC_TRIM_THRESHOLD_=68719476736, torch and OpenBLAS threads both 2);
# hm runs with OMP_WAIT_POLICY=PASSIVE too (one OpenMP pool: hm links the
# OpenMP build of OpenBLAS).
#
# Prints a Markdown table on stdout; raw JSON lines go to $WORK/train.jsonl,
# progress to stderr. Run it on a quiet machine: nothing else may use the
# cores (two processes' OpenMP pools slow each other several-fold).
#
# Environment (defaults): BENCH_BIN=build/bench WORK=build/bench-train
# PEER=../shared/peers/perf_torch.py PYTHON=/usr/bin/python3 ROUNDS=3
# THREADS=2 HM_STEPS=5 PEER_STEPS=5 PEER_WARMUP=2
# CELLS="mixer:shape:batch:seq ..." (default: the issue's cells; mixer
# softmax|hedgehog|hedgemamba, shape demo|70m|160m)
set -u
BENCH_BIN=${BENCH_BIN:-build/bench}
WORK=${WORK:-build/bench-train}
PEER=${PEER:-../shared/peers/perf_torch.py}
PYTHON=${PYTHON:-/usr/bin/python3}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
HM_STEPS=${HM_STEPS:-5}
PEER_STEPS=${PEER_STEPS:-5}
PEER_WARMUP=${PEER_WARMUP:-2}
CELLS=${CELLS:-"softmax:70m:1:512 softmax:70m:4:512 hedgehog:70m:1:512 hedgehog:70m:4:512 \
hedgemamba:70m:1:512 hedgemamba:70m:4:512 hedgehog:160m:1:512 hedgemamba:160m:1:512 \
softmax:demo:8:256 hedgehog:demo:8:256 hedgemamba:demo:8:256"}
log() { echo "train_table: $*" >&2; }
die() { log "error: $*"; exit 1; }
[ -x "$BENCH_BIN/bench_train" ] || die "no $BENCH_BIN/bench_train (build first: make)"
[ -r "$PEER" ] || die "no peer at $PEER"
"$PYTHON" -c "import torch, numpy" 2>/dev/null ||
    die "$PYTHON has no torch/numpy (apt-get install python3-torch python3-numpy)"
mkdir -p "$WORK"
OUT=$WORK/train.jsonl
: > "$OUT"

peer_arch() { case $1 in softmax) echo gpt_neox ;; *) echo "$1" ;; esac; }
peer_shape() { case $1 in 70m) echo pythia70m ;; 160m) echo pythia160m ;; *) echo "$1" ;; esac; }

run_hm() { # mixer shape batch seq
    OMP_WAIT_POLICY=PASSIVE "$BENCH_BIN/bench_train" --mixer "$1" --shape "$2" --batch "$3" \
        --seq "$4" --steps "$HM_STEPS" --threads "$THREADS" --json | grep '^{' |
        sed "s/^{/{\"side\":\"hm\",\"cell\":\"$1:$2:$3:$4\",/" >> "$OUT"
}
run_peer() {
    "$PYTHON" "$PEER" --bench --tuned --arch "$(peer_arch "$1")" --shape "$(peer_shape "$2")" \
        --batch "$3" --seq-len "$4" --threads "$THREADS" --steps "$PEER_STEPS" \
        --warmup "$PEER_WARMUP" --json 2>/dev/null | grep '^{' |
        sed "s/^{/{\"side\":\"peer\",\"cell\":\"$1:$2:$3:$4\",/" >> "$OUT"
}

for r in $(seq "$ROUNDS"); do
    for cell in $CELLS; do
        IFS=: read -r mixer shape batch seq <<< "$cell"
        log "round $r/$ROUNDS: $cell"
        if [ $((r % 2)) -eq 1 ]; then
            run_hm "$mixer" "$shape" "$batch" "$seq" || die "bench_train $cell"
            run_peer "$mixer" "$shape" "$batch" "$seq" || die "peer $cell"
        else
            run_peer "$mixer" "$shape" "$batch" "$seq" || die "peer $cell"
            run_hm "$mixer" "$shape" "$batch" "$seq" || die "bench_train $cell"
        fi
    done
done

# ---- the table -------------------------------------------------------------
"$PYTHON" - "$OUT" "$ROUNDS" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
cells = []
for r in rows:
    if r['cell'] not in cells:
        cells.append(r['cell'])
def sg(r):
    s = r['sgemm_gflops']
    return s['2048'] if isinstance(s, dict) else s
def stats(xs):
    return statistics.median(xs), min(xs), max(xs)
print(f'Rounds: {sys.argv[2]} alternating (hm, peer / peer, hm); medians (min–max).\n')
print('| model, shape, B × T | hm tok/s | tuned PyTorch tok/s | hm / PyTorch | hm FLOP rate / own sgemm | '
      'PyTorch FLOP rate / own sgemm | MFLOP/token hm, peer |')
print('|---|---|---|---|---|---|---|')
for c in cells:
    hm = [r for r in rows if r['cell'] == c and r['side'] == 'hm']
    pe = [r for r in rows if r['cell'] == c and r['side'] == 'peer']
    if not hm or not pe:
        continue
    h, p = stats([r['train_tok_s'] for r in hm]), stats([r['train_tok_s'] for r in pe])
    hf = statistics.median(r['train_gflops'] / sg(r) for r in hm)
    pf = statistics.median(r['train_gflops'] / sg(r) for r in pe)
    mixer, shape, b, t = c.split(':')
    print(f'| {mixer}, {shape}, {b} × {t} | {h[0]:.0f} ({h[1]:.0f}–{h[2]:.0f}) | {p[0]:.0f} ({p[1]:.0f}–{p[2]:.0f}) '
          f'| **{h[0] / p[0]:.2f}×** | {hf:.2f} | {pf:.2f} | '
          f'{hm[0]["flops_per_token_train"] / 1e6:.1f}, {pe[0]["flops_per_token_train"] / 1e6:.1f} |')
EOF
