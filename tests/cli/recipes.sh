#!/usr/bin/env bash
# recipes.sh — the Makefile recipes at toy sizes (the real sizes are their
# defaults): recipes/stories260k.mk leaves every file of its interface and a
# results table with a row per model; a second make does nothing;
# recipes/ablations.mk produces its JSON, Markdown and PNG plots, a second
# make does nothing, and changing one variable (STAGE2_LR) reruns the
# stage-2 runs and what depends on them but no stage-1 run; recipes/frontier.mk
# (hybrids by KL and position, the ranking, the state growth, the plot) on the
# stories folder; `plan` of
# recipes/pythia.mk and recipes/llama.mk on a Pythia-shaped and a
# Llama-shaped folder, and the family check between them; the whole
# pythia.mk conversion at toy size. The stories parts
# skip visibly without the shared data.
# Env: HM_BIN, HM_SRC, HM_SHARED_DATA, HM_TMP.
set -u
T="${HM_TMP:-/tmp}/cli_recipes.$$"
rm -rf "$T" && mkdir -p "$T"
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
B="$HM_BIN"
cd "$HM_SRC" || exit 1
export OMP_NUM_THREADS=2
M="make --no-print-directory BIN=$B THREADS=2 SHARED=$HM_SHARED_DATA"

# ---- plan on Pythia- and Llama-shaped folders (no shared data needed) ----
"$B/hm-init" --preset pythia-14m -o "$T/p14.st" -q && "$B/hm-pack" "$T/p14.st" -o "$T/pythia" --format dir --bytes -q ||
    fail "making the Pythia-shaped folder"
"$B/hm-init" --preset llama-tiny -o "$T/lt.st" -q && "$B/hm-pack" "$T/lt.st" -o "$T/llama" --format dir --bytes -q ||
    fail "making the Llama-shaped folder"
$M -f recipes/pythia.mk TEACHER="$T/pythia" plan >"$T/out" 2>"$T/err" || fail "pythia plan: $(cat "$T/err")"
grep -q '^plan for .*(neox, 6 layers, d 128' "$T/out" || fail "pythia plan: no header: $(cat "$T/out")"
grep -q 'stage 1  hm-linearize   1000000000 tokens = 20346 steps of 48 x 1024' "$T/out" || fail "pythia plan: no stage-1 line"
grep -q 'measured here: [1-9][0-9]* tokens/s' "$T/out" || fail "pythia plan: no measured throughput"
grep -q 'memory: .* MB' "$T/out" || fail "pythia plan: no memory estimate"
grep -q '^total: about ' "$T/out" || fail "pythia plan: no total"
$M -f recipes/llama.mk TEACHER="$T/llama" SEQ=256 plan >"$T/out" 2>"$T/err" || fail "llama plan: $(cat "$T/err")"
grep -q '^plan for .*(llama, 5 layers, d 64' "$T/out" || fail "llama plan: no header"
$M -f recipes/pythia.mk TEACHER="$T/llama" plan >"$T/out" 2>&1 && fail "pythia.mk accepted a llama teacher"
grep -q "is a llama model; this recipe is for neox" "$T/out" || fail "no family message: $(cat "$T/out")"
$M -f recipes/llama.mk TEACHER="$T/llama" plan >"$T/out" 2>&1 && fail "SEQ 1024 > max positions 512 accepted"
$M -f recipes/pythia.mk plan >"$T/out" 2>&1 && fail "plan without TEACHER succeeded"
grep -q 'set TEACHER=' "$T/out" || fail "plan without TEACHER: no message"

# the whole conversion at toy size on the Pythia-shaped folder: tokenize,
# stage 1, map, verify, stage 2, evaluations, the bundle with ONNX
for i in $(seq 40); do
    printf '{"text": "document %d of a small corpus for the conversion recipe test."}\n' "$i"
done > "$T/corpus.jsonl"
CONV="TEACHER=$T/pythia DATA=$T/corpus.jsonl OUT=$T/conv BATCH=2 SEQ=32 STAGE1_TOKENS=128 STAGE2_TOKENS=256 WARMUP=1 SAVE_EVERY=2 VAL_FRACTION=0.2"
$M -f recipes/pythia.mk $CONV >"$T/out" 2>&1 || fail "pythia.mk conversion: $(tail -5 "$T/out")"
grep -q '"equivalent": true' "$T/conv/mapping.verify.json" 2>/dev/null || fail "pythia.mk: the mapping is not proven"
[ -s "$T/conv/student.bundle/onnx/model.onnx" ] && "$B/hm-verify" bundle "$T/conv/student.bundle" >/dev/null ||
    fail "pythia.mk: no verified bundle with ONNX"
for e in student teacher; do
    grep -q '"ppl": [0-9]' "$T/conv/$e.eval.json" 2>/dev/null || fail "pythia.mk: no $e evaluation"
done

if [ ! -r "$HM_SHARED_DATA/llama2c_stories260K.bin" ]; then
    echo "SKIP: no shared data at $HM_SHARED_DATA (the stories260K recipes)"
    [ $fails -eq 0 ] && exit 0 || exit 1
fi

# ---- stories260k.mk at toy size ------------------------------------------
O="$T/st"
SMALL="OUT=$O CORPUS_SAMPLES=24 HELD_SAMPLES=16 STORY_TOKENS=120 SEQ=64 BATCH=4 BUDGET=4000
       GEN_PROMPTS=4 GEN_PROMPT_LEN=16 GEN_NEW=16"
$M -f recipes/stories260k.mk $SMALL >"$T/out" 2>"$T/err" || fail "stories260k.mk: $(tail -5 "$T/err")"
for f in teacher hedgemamba hedgemamba-paper hedgehog-ft skip-stage1 naive control; do
    [ -s "$O/$f.st" ] || fail "stories260k.mk: no $f.st"
    grep -q "\"model\": \"$f\", \"held_ppl\": [0-9]" "$O/results.json" || fail "results.json: no row for $f"
done
[ -s "$O/results.md" ] && grep -q '^| HedgeMamba' "$O/results.md" || fail "results.md: no HedgeMamba row"
# the generation figures: the teacher against itself is exact (KL 0, agreement
# 1, the whole greedy prefix); a student has figures of its own
grep -q '"model": "teacher".*"kl": 0, "agreement": 1, .*"common_prefix": 16,' "$O/results.json" ||
    fail "results.json: the teacher's generation figures are not its own: $(grep teacher "$O/results.json")"
grep -q '"model": "hedgemamba".*"kl": [0-9.e-]*, "agreement": [0-9.]*, "gen_nll": [0-9]' \
    "$O/results.json" || fail "results.json: no generation figures for hedgemamba"
grep -q '"equivalent": true' "$O/mapping.verify.json" || fail "the mapping is not proven"
grep -q '^valid: ' "$O/hedgemamba.samples.txt" && [ "$(wc -l < "$O/hedgemamba.samples.txt")" -ge 3 ] ||
    fail "no verified bundle samples"
[ "$(wc -l < "$O/corpus.ids")" -eq 24 ] || fail "corpus: $(wc -l < "$O/corpus.ids") stories, want 24"
$M -f recipes/stories260k.mk $SMALL >"$T/out" 2>&1 || fail "stories260k.mk, again: $(tail -3 "$T/out")"
grep -q "$B/hm-" "$T/out" && fail "stories260k.mk: a second make ran: $(grep "$B/hm-" "$T/out" | head -3)"
# another corpus temperature on the same OUT samples the corpus again (its
# command file), and only once (on a copy: the frontier below uses $O)
cp -a "$O" "$T/st2"
C2="OUT=$T/st2 CORPUS_SAMPLES=24 STORY_TOKENS=120 CORPUS_TEMP=0.9"
$M -f recipes/stories260k.mk $C2 "$T/st2/corpus.ids" >"$T/out" 2>&1 || fail "corpus at 0.9: $(tail -3 "$T/out")"
grep -q -- "--temperature 0.9 " "$T/out" || fail "CORPUS_TEMP=0.9 on an existing OUT did not resample"
cmp -s "$O/corpus.ids" "$T/st2/corpus.ids" && fail "the corpus at temperature 0.9 equals the one at 1"
$M -f recipes/stories260k.mk $C2 "$T/st2/corpus.ids" >"$T/out" 2>&1
grep -q "$B/hm-" "$T/out" && fail "the corpus at 0.9 was sampled twice: $(head -3 "$T/out")"
rm -rf "$T/st2"

# ---- frontier.mk and ablations.mk draw plots: gnuplot ----------------------
if ! command -v gnuplot >/dev/null; then
    echo "SKIP: no gnuplot (apt-get install gnuplot-nox): the frontier and ablations recipes"
    [ $fails -eq 0 ] && exit 0 || exit 1
fi
# ---- frontier.mk at toy size, on the same folder -----------------------------
# (the pure student is the one above; the hybrids, the ranking, the table)
FR="$SMALL BENCH_CTX=\"48 80\" BENCH_DECODE=4 RANK_WINDOWS=2"
eval $M -f recipes/frontier.mk $FR >"$T/out" 2>"$T/err" || fail "frontier.mk: $(tail -5 "$T/err")"
python3 - "$O/frontier.json" <<'P' || fail "frontier.json: $(head -c 600 "$O/frontier.json")"
import json, sys
f = json.load(open(sys.argv[1]))
models = [r["model"] for r in f["rows"]]
assert models == ["teacher", "hedgemamba", "hybrid-kl1", "hybrid-kl2", "hybrid-pos1", "hybrid-pos2"], models
rank = f["ranking"]["ranking"]
assert sorted(rank) == [0, 1, 2, 3, 4], rank
r = {x["model"]: x for x in f["rows"]}
assert r["hybrid-kl1"]["kept"] == str(rank[0]) and r["hybrid-pos2"]["kept"] == "1,3", r
# the state grows with the context by the kept layers' KV cache only
g = lambda m: r[m]["bench"]["80"]["state_bytes"] - r[m]["bench"]["48"]["state_bytes"]
assert g("hedgemamba") == 0 and g("hybrid-kl2") == 2 * g("hybrid-kl1") > 0, [g(m) for m in r if m != "teacher"]
P
[ "$(head -c 4 "$O/frontier.png" | od -An -c | tr -d ' ')" = "211PNG" ] || fail "no frontier PNG"
grep -q '^| hybrid-kl1 |' "$O/frontier.md" || fail "frontier.md: no hybrid row"
eval $M -f recipes/frontier.mk $FR >"$T/out" 2>&1 || fail "frontier.mk, again: $(tail -3 "$T/out")"
grep -q "$B/hm-" "$T/out" && fail "frontier.mk: a second make ran: $(grep "$B/hm-" "$T/out" | head -3)"

# ---- ablations.mk at toy size ---------------------------------------------
A="$T/ab"
SMALL="OUT=$A CORPUS_SAMPLES=16 HELD_SAMPLES=8 STORY_TOKENS=100 SEQ=64 BATCH=4 AB_BUDGET=6000"
$M -f recipes/ablations.mk $SMALL >"$T/out" 2>"$T/err" || fail "ablations.mk: $(tail -5 "$T/err")"
for t in "Table 1" "Table 2" "Table 3" "Table 4"; do
    grep -q "^$t" "$A/ablations.md" || fail "ablations.md: no $t"
done
grep -q '"budget-4": {"run": "hm-[0-9]*-[0-9]*-ssm+conv+gate", "ppl": \[[0-9.e+-]*, [0-9.e+-]*\]' "$A/ablations.json" ||
    fail "ablations.json: budget-4 without two seeds"
for p in loss_stage2 loss_stage1 ppl_budget ppl_split; do
    [ "$(head -c 8 "$A/plots/$p.png" | od -An -c | tr -d ' ')" = "211PNG\r\n032\n" ] || fail "no PNG $p"
done
$M -f recipes/ablations.mk $SMALL >"$T/out" 2>&1 || fail "ablations.mk, again: $(tail -3 "$T/out")"
grep -q "$B/hm-\|ablations_" "$T/out" && fail "ablations.mk: a second make ran: $(grep "$B/hm-" "$T/out" | head -3)"
# a new stage-2 learning rate: every stage 2 again (and the tables), no stage 1
$M -f recipes/ablations.mk $SMALL STAGE2_LR=2e-3 >"$T/out" 2>&1 || fail "ablations.mk STAGE2_LR: $(tail -3 "$T/out")"
grep -q "$B/hm-finetune" "$T/out" || fail "a new STAGE2_LR reruns no stage 2"
grep -q "$B/hm-linearize\|$B/hm-map-ssm" "$T/out" && fail "a new STAGE2_LR reruns stage 1 or a mapping"
grep -q 'ablations_results.sh md' "$T/out" || fail "a new STAGE2_LR does not remake the tables"
[ $fails -eq 0 ] && echo "recipes: all checks passed"
[ $fails -eq 0 ]
