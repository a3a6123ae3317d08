#!/bin/sh
# ablations_results.sh json|md — the paper's four tables from the held-out
# evaluations of recipes/ablations.mk: per cell the perplexity of each seed,
# their mean and range; the paper's numbers beside (contract §4, Pythia-1B on
# OpenWebText); comparisons say "holds" only when the seed ranges do not
# overlap, else "within the seed spread".
# Env: OUT, SEEDS, CELLS ("name:run-base ..."), AB_BUDGET, SPLIT (the recipe's
# bridge share, percent).
set -eu
ppl() { sed -n 's/.*"ppl": *\([0-9.e+-]*\).*/\1/p' "$1"; }
case ${1:-} in
json)
    printf '{"recipe": "ablations", "budget_tokens": %s, "seeds": [%s], "teacher_ppl": %s, "cells": {' \
        "$AB_BUDGET" "$(echo $SEEDS | sed 's/ /, /g')" "$(ppl "$OUT/teacher.held.json")"
    sep=""
    for c in $CELLS; do
        name=${c%%:*} base=${c#*:}
        vals=""
        for s in $SEEDS; do vals="$vals $(ppl "$OUT/ab/$base-s$s.held.json")"; done
        echo "$vals" | awk -v n="$name" -v b="$base" -v sep="$sep" '{
            lo = $1; hi = $1; sum = 0; list = ""
            for (i = 1; i <= NF; i++) { sum += $i; lo = $i < lo ? $i : lo; hi = $i > hi ? $i : hi
                                        list = list (i > 1 ? ", " : "") $i }
            printf "%s\n  \"%s\": {\"run\": \"%s\", \"ppl\": [%s], \"mean\": %.6g, \"min\": %.6g, \"max\": %.6g}",
                sep, n, b, list, sum / NF, lo, hi }'
        sep=","
    done
    printf '\n}}\n'
    ;;
md)
    J="$OUT/ablations.json"
    get() { sed -n "s/.*\"$1\": {[^}]*\"$2\": \([0-9.e+-]*\).*/\1/p" "$J"; }
    tp=$(sed -n 's/.*"teacher_ppl": \([0-9.e+-]*\).*/\1/p' "$J")
    row() { # label cell paper
        awk -v l="$1" -v m="$(get "$2" mean)" -v lo="$(get "$2" min)" -v hi="$(get "$2" max)" \
            -v t="$tp" -v p="$3" 'BEGIN { printf "| %s | %.3f (%.3f–%.3f) | %+.1f %% | %s |\n",
                l, m, lo, hi, 100 * (m / t - 1), p }'
    }
    # better A B: "holds" if every seed of A is below every seed of B
    better() {
        awk -v a="$1" -v b="$2" -v ah="$(get "$1" max)" -v bl="$(get "$2" min)" \
            -v am="$(get "$1" mean)" -v bm="$(get "$2" mean)" 'BEGIN {
            if (ah < bl) v = "holds"; else if (am < bm) v = "same direction, within the seed spread"
            else v = "does not hold"
            printf "- %s < %s: %s (%.3f vs %.3f)\n", a, b, v, am, bm }'
    }
    head="| | held-out PPL, mean (range over seeds) | vs teacher | paper (Pythia-1B) |"
    echo "Seeds: $SEEDS. One budget (x1) = $AB_BUDGET tokens. Teacher held-out PPL $tp."
    echo
    echo "Table 1 — students at x1"
    echo
    echo "$head"; echo "|---|---|---|---|"
    awk -v t="$tp" 'BEGIN { printf "| teacher | %.3f | | 13.86 |\n", t }'
    row "Hedgehog (stage 1 10 % + stage 2)" hedgehog 14.89
    row "HedgeMamba (bridge $SPLIT % + stage 2)" hedgemamba 14.11
    row "naive (random mixer + stage 2)" naive "> 100"
    echo
    echo "Table 2 — components (hm-map-ssm --components), split $SPLIT/$((100 - SPLIT))"
    echo
    echo "$head"; echo "|---|---|---|---|"
    row "Hedgehog (none active)" c-hedgehog "14.89"
    row "+SSM (dt, A, D)" c-ssm "–"
    row "+Conv" c-conv "–"
    row "+Gate (= HedgeMamba)" c-gate "14.11; the gate gives the largest single gain"
    echo
    echo "Table 3 — bridge (stage 1)/stage-2 split of one budget"
    echo
    echo "$head"; echo "|---|---|---|---|"
    row "100/0 (bridge only)" split-100-0 25.71
    row "50/50" split-50-50 14.58
    [ "$SPLIT" = 10 ] || [ "$SPLIT" = 50 ] || row "$SPLIT/$((100 - SPLIT)) (the recipe)" split-recipe "–"
    row "10/90" split-10-90 14.11
    row "0/100 (skip stage 1)" split-0-100 17.08
    echo
    echo "Table 4 — total budget, split $SPLIT/$((100 - SPLIT))"
    echo
    echo "$head"; echo "|---|---|---|---|"
    row "x1 ($AB_BUDGET tokens)" budget-1 "16.56 (1B tokens)"
    row "x2" budget-2 "15.61 (2B)"
    row "x4" budget-4 "15.15 (3B); 14.11 (10B)"
    row "x1, skip stage 1 (0/100)" skip-1 "17.08 (10B)"
    row "x2, skip stage 1" skip-2 "–"
    row "x4, skip stage 1" skip-4 "–"
    echo
    echo "The paper's findings at this scale (lower is better):"
    echo
    better hedgemamba naive
    better hedgemamba hedgehog
    better split-10-90 split-0-100
    better split-10-90 split-100-0
    better split-10-90 split-50-50
    better split-recipe split-0-100
    better c-gate c-conv
    better c-conv c-ssm
    better c-ssm c-hedgehog
    better budget-2 budget-1
    better budget-4 budget-2
    better budget-1 skip-1
    better budget-2 skip-2
    better budget-4 skip-4
    ;;
*)
    echo "usage: ablations_results.sh json|md" >&2
    exit 2
    ;;
esac
