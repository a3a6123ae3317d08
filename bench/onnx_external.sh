#!/usr/bin/env bash
# onnx_external.sh — the real-size check of ONNX external data (contract §11,
# docs/onnx.md): a HedgeMamba student over 2 GiB of fp32 weights, exported
# by hm-pack --onnx into a folder bundle (onnx/model.onnx + onnx/model.onnx.data
# at the default threshold), checked by hm-verify bundle and
# tests/onnx/check_external.mjs (every offset a multiple of 64, every length
# numel · 4, every tensor's bytes the checkpoint's), and run in ONNX Runtime
# (tests/onnx/run_ort.mjs: whole windows, token by token, prefill + chunk +
# steps) against hm-eval --dump-logits within 1e-4 relative.
#
# Opt-in (not in ctest: about 11 GB of disk, several minutes, up to ~6 GB of
# memory per step, one step at a time). Each step runs under /usr/bin/time -v;
# a Markdown table of wall time and peak RSS per step goes to stdout, the
# raw logs to $WORK.
#
# The student: Pythia-410m's shape (d 1024, 16 heads, mlp 4096, vocab 50304)
# with LAYERS layers (default 32: ~544M parameters, ~2.18 GB fp32), random
# weights as bench/decode_table.sh makes them: hm-init, hm-linearize
# --steps 0 (identity feature maps), hm-map-ssm --init random (the naive
# baseline: random decays, conv taps, gate, Δ).
#
# Environment (defaults): BIN=build/bin SRC=. WORK=build/bench-onnx-external
# LAYERS=32 SEQ=8 WINDOWS=2 KEEP=0 (1: keep the models and the bundle)
set -u
BIN=${BIN:-build/bin}
SRC=${SRC:-.}
WORK=${WORK:-build/bench-onnx-external}
LAYERS=${LAYERS:-32}
SEQ=${SEQ:-8}
WINDOWS=${WINDOWS:-2}
KEEP=${KEEP:-0}
log() { echo "onnx_external: $*" >&2; }
die() { log "error: $*"; exit 1; }
[ -x "$BIN/hm-pack" ] || die "no $BIN/hm-pack (build first)"
command -v node >/dev/null || die "node is not installed"
[ -d "$SRC/tests/onnx/node_modules/onnxruntime-node" ] ||
    die "no onnxruntime-node: npm install --prefix $SRC/tests/onnx --ignore-scripts --no-package-lock"
mkdir -p "$WORK"
rows=()
. "$SRC/bench/common/measure.sh"
# step NAME CMD...: runs CMD under /usr/bin/time -v, records wall s and peak RSS
step() {
    local name=$1
    shift
    log "$name: $*"
    measure "$WORK" "${name// /_}" "$@" ||
        { cat "$WORK/${name// /_}.out" "$WORK/${name// /_}.err" >&2; die "$name failed"; }
    rows+=("| $name | $WALL | $RSS_GB |")
}

T=$WORK/teacher.st H=$WORK/hedgehog.st M=$WORK/hedgemamba.st BUNDLE=$WORK/bundle
if [ ! -s "$M" ]; then
    "$BIN/hm-init" --preset pythia-410m -n --json |
        sed "s/\"num_hidden_layers\":[0-9]*/\"num_hidden_layers\":$LAYERS/" >"$WORK/config.json" ||
        die "hm-init -n"
    for i in $(seq 64); do echo "a few words of text for a token file"; done >"$WORK/text.txt"
    "$BIN/hm-tokenize" --bytes "$WORK/text.txt" -o "$WORK/text.tok" -f -q || die "hm-tokenize"
    step hm-init "$BIN/hm-init" --config "$WORK/config.json" -o "$T" -f -q
    step hm-linearize "$BIN/hm-linearize" "$T" -o "$H" --data "$WORK/text.tok" --steps 0 \
        --seq-len 16 --batch 1 -f -q --no-progress
    rm -f "$T"
    step hm-map-ssm "$BIN/hm-map-ssm" "$H" -o "$M" --init random --seed 3 -f -q
    rm -f "$H" "$H.state"
fi
params=$("$BIN/hm-inspect" "$M" | awk '/^parameters:/ {gsub(",", "", $2); print $2}')
step "hm-pack --onnx" "$BIN/hm-pack" "$M" --bytes --onnx -o "$BUNDLE" -f -q
[ -s "$BUNDLE/onnx/model.onnx.data" ] || die "no $BUNDLE/onnx/model.onnx.data: not external"
step "hm-verify bundle" "$BIN/hm-verify" bundle "$BUNDLE"
step check_external node "$SRC/tests/onnx/check_external.mjs" --model "$BUNDLE/onnx/model.onnx" \
    --weights "$BUNDLE/model.safetensors"
step "hm-eval --dump-logits" "$BIN/hm-eval" "$M" --data "$WORK/text.tok" --seq-len "$SEQ" \
    --max-tokens $((WINDOWS * SEQ + 1)) --dump-logits "$WORK/logits.st" -q
step "ONNX Runtime" node "$SRC/tests/onnx/run_ort.mjs" --model "$BUNDLE/onnx/model.onnx" \
    --tokens "$WORK/text.tok" --ref "$WORK/logits.st" --tol 1e-4
graph=$(stat -c %s "$BUNDLE/onnx/model.onnx")
data=$(stat -c %s "$BUNDLE/onnx/model.onnx.data")
echo "Student: Pythia-410m shape, $LAYERS layers, hedgemamba, $params parameters;"
echo "onnx/model.onnx $graph bytes, onnx/model.onnx.data $data bytes."
echo
echo "| step | wall s | peak RSS GB |"
echo "|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
echo "ONNX Runtime against hm ($WINDOWS windows of $SEQ tokens):"
grep '"way"' "$WORK/ONNX Runtime.out" | sed 's/"model":"[^"]*",//'
tail -1 "$WORK/check_external.out" | sed 's/"model":"[^"]*",//; s/,"findings":\[\]//'
[ "$KEEP" = 1 ] || rm -rf "$M" "$BUNDLE" "$WORK/logits.st"
