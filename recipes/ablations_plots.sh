#!/bin/sh
# ablations_plots.sh — PNG plots of recipes/ablations.mk with gnuplot
# (Debian gnuplot-nox), from the runs' JSON-lines logs and ablations.json:
#   plots/loss_stage2.png   training loss against tokens, Table 1's runs
#                           (first seed), Bezier-smoothed
#   plots/loss_stage1.png   the bridge's stage-1b loss (squared error, mean over
#                           layers) against tokens
#   plots/ppl_budget.png    held-out PPL against total tokens (Table 4, every
#                           seed and the mean), the teacher's as a line
#   plots/ppl_split.png     held-out PPL against the bridge's share (Table 3)
# Env: OUT, SEEDS, AB_BUDGET, ALL (the full component list of run names),
# SPLIT (the recipe's bridge share).
set -eu
command -v gnuplot >/dev/null ||
    { echo "ablations_plots.sh: the plots need gnuplot (apt-get install gnuplot-nox)" >&2; exit 1; }
P="$OUT/plots"
mkdir -p "$P"
S1=$(echo $SEEDS | cut -d' ' -f1)
# log.jsonl → "tokens loss" columns
cols() { sed -n 's/.*"tokens": *\([0-9]*\).*"loss": *\([0-9.e+-]*\).*/\1 \2/p' "$1" > "$2"; }
R="$SPLIT-$((100 - SPLIT))"
cols "$OUT/ab/hm-$R-$ALL-s$S1.log.jsonl" "$P/hedgemamba.dat"
cols "$OUT/ab/hedgehog-s$S1.log.jsonl" "$P/hedgehog.dat"
cols "$OUT/ab/naive-s$S1.log.jsonl" "$P/naive.dat"
cols "$OUT/ab/hm-0-100-$ALL-s$S1.log.jsonl" "$P/skip.dat"
cols "$OUT/ab/hm-$R-$ALL-s$S1-init.log.jsonl" "$P/stage1.dat"
J="$OUT/ablations.json"
tp=$(sed -n 's/.*"teacher_ppl": \([0-9.e+-]*\).*/\1/p' "$J")
# "x value" rows of every seed, and the means
cell() { sed -n "s/.*\"$1\": {[^}]*\"ppl\": \[\([^]]*\)\].*/\1/p" "$J" | tr ',' '\n' | sed "s/^ */$2 /"; }
mean() { sed -n "s/.*\"$1\": {[^}]*\"mean\": \([0-9.e+-]*\).*/$2 \1/p" "$J"; }
: > "$P/budget.dat"; : > "$P/budget_mean.dat"
for k in 1 2 4; do
    cell "budget-$k" $((AB_BUDGET * k)) >> "$P/budget.dat"
    mean "budget-$k" $((AB_BUDGET * k)) >> "$P/budget_mean.dat"
done
: > "$P/split.dat"; : > "$P/split_mean.dat"
for s in 0-100:0 10-90:10 recipe:$SPLIT 50-50:50 100-0:100; do
    cell "split-${s%%:*}" "${s#*:}" >> "$P/split.dat"
    mean "split-${s%%:*}" "${s#*:}" >> "$P/split_mean.dat"
done
sort -n -k1,1 "$P/split_mean.dat" | uniq > "$P/split_mean.sorted" && mv "$P/split_mean.sorted" "$P/split_mean.dat"
gnuplot <<EOF
set terminal pngcairo size 900,560 font ",11"
set grid
set key top right
set output "$P/loss_stage2.png"
set title "Stage-2 loss, KL(teacher || student) (seed $S1), stories260K teacher's corpus"
set xlabel "tokens"; set ylabel "loss (nats, Bezier-smoothed)"
plot "$P/hedgemamba.dat" using 1:2 smooth bezier with lines lw 2 title "HedgeMamba (after the bridge)", \
     "$P/hedgehog.dat" using 1:2 smooth bezier with lines lw 2 title "Hedgehog (after stage 1)", \
     "$P/skip.dat" using 1:2 smooth bezier with lines lw 2 title "skip stage 1", \
     "$P/naive.dat" using 1:2 smooth bezier with lines lw 2 title "naive"
set output "$P/loss_stage1.png"
set title "Stage 1b (hm-finetune --align): mean over layers of the squared error of the attention outputs"
set ylabel "stage-1b loss"
plot "$P/stage1.dat" using 1:2 with lines lw 2 title "seed $S1"
set output "$P/ppl_budget.png"
set title "Held-out perplexity against total tokens (split $R)"
set xlabel "total distillation tokens"; set ylabel "held-out PPL"
set logscale x 2
set xrange [$((AB_BUDGET * 3 / 4)):$((AB_BUDGET * 5))]
set xtics ("$((AB_BUDGET / 1000))k x1" $AB_BUDGET, "$((AB_BUDGET * 2 / 1000))k x2" $((AB_BUDGET * 2)), "$((AB_BUDGET * 4 / 1000))k x4" $((AB_BUDGET * 4)))
plot "$P/budget.dat" using 1:2 with points pt 7 ps 1.2 title "each seed", \
     "$P/budget_mean.dat" using 1:2 with linespoints lw 2 pt 5 title "mean", \
     $tp with lines dt 2 lw 2 title "teacher"
unset logscale x
set xtics autofreq
set output "$P/ppl_split.png"
set title "Held-out perplexity against the bridge's share of $AB_BUDGET tokens"
set xlabel "bridge (stage 1b) share (%)"; set ylabel "held-out PPL"
set xrange [-5:105]
plot "$P/split.dat" using 1:2 with points pt 7 ps 1.2 title "each seed", \
     "$P/split_mean.dat" using 1:2 with linespoints lw 2 pt 5 title "mean", \
     $tp with lines dt 2 lw 2 title "teacher"
EOF
