#!/bin/sh
# frontier_plot.sh OUT.png FRONTIER.json... — the quality frontier as a PNG
# (gnuplot, Debian gnuplot-nox): held-out perplexity against decoding
# tokens/s at the longest context of recipes/frontier.mk, one point per
# model and seed (frontier_results.py dat; the first file's points labelled),
# the teacher's perplexity as a dashed line.
set -eu
command -v gnuplot >/dev/null ||
    { echo "frontier_plot.sh: the plot needs gnuplot (apt-get install gnuplot-nox)" >&2; exit 1; }
png=$1; shift
dat=$(mktemp) first=$(mktemp)
trap 'rm -f "$dat" "$first"' EXIT
for j in "$@"; do
    python3 "$(dirname "$0")/frontier_results.py" dat "$(dirname "$j")" "" "" 0 >> "$dat"
done
python3 "$(dirname "$0")/frontier_results.py" dat "$(dirname "$1")" "" "" 0 > "$first"
tppl=$(python3 -c 'import json,sys; print("%.3f" % json.load(open(sys.argv[1]))["rows"][0]["held_ppl"])' "$1")
ctx=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["contexts"][-1])' "$1")
gnuplot <<G
set terminal pngcairo size 900,600 noenhanced
set output "$png"
set title "stories260K hybrids: quality against decoding speed (context $ctx, batch 8)"
set xlabel "decode tokens/s (log scale)"
set ylabel "held-out perplexity"
set logscale x
set grid
set key off
set yrange [$tppl * 0.99:*]
set arrow from graph 0, first $tppl to graph 1, first $tppl nohead dashtype 2
set label "teacher $tppl" at graph 0.02, first $tppl offset 0,0.7
plot "$dat" using 3:2 with points pointtype 7 pointsize 1.5, \
     "$first" using 3:2:1 with labels offset 0,1
G
