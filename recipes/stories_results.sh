#!/bin/sh
# stories_results.sh json|md — the stories260K table from the evaluation
# files of recipes/stories260k.mk: one row per model of $MODELS with its
# held-out perplexity (text the teacher generated from unseen seeds), the
# TinyStories sample's perplexity and the multiple-choice accuracy.
# Env: OUT, MODELS, BUDGET, BRIDGE_PCT.
set -eu
num() { sed -n "s/.*\"$1\": *\([-0-9.e+]*\).*/\1/p" "$2" | head -1; }
what() {
    case $1 in
    teacher) echo "teacher (stories260K, softmax attention)" ;;
    control) echo "control: the teacher fine-tuned on the same tokens" ;;
    hedgemamba) echo "HedgeMamba: map (decay from the teacher) + stage 1b (${BRIDGE_PCT:-50} %) + stage 2 KL" ;;
    hedgemamba-paper) echo "HedgeMamba, the paper's recipe: stage 1 (10 %) + map + cross-entropy (90 %)" ;;
    hedgehog-ft) echo "Hedgehog: stage 1 (10 %) + stage 2 KL (90 %)" ;;
    skip-stage1) echo "skip stage 1: mapped from the teacher + stage 2 KL (100 %)" ;;
    naive) echo "naive: random mixer + stage 2 KL (100 %)" ;;
    *) echo "$1" ;;
    esac
}
case ${1:-} in
json)
    printf '{"recipe": "stories260k", "budget_tokens": %s, "mapping": %s, "rows": [\n' \
        "$BUDGET" "$(cat "$OUT/mapping.verify.json")"
    sep=""
    for m in $MODELS; do
        printf '%s  {"model": "%s", "held_ppl": %s, "held_nll": %s, "held_targets": %s, "tinystories_ppl": %s, "mc_acc": %s, "mc_acc_norm": %s, "mc_questions": %s}' \
            "$sep" "$m" "$(num ppl "$OUT/$m.held.json")" "$(num mean_nll "$OUT/$m.held.json")" \
            "$(num targets "$OUT/$m.held.json")" "$(num ppl "$OUT/$m.ts.json")" \
            "$(num acc "$OUT/$m.mc.json")" "$(num acc_norm "$OUT/$m.mc.json")" \
            "$(num questions "$OUT/$m.mc.json")"
        sep=",
"
    done
    printf '\n]}\n'
    ;;
md)
    J="$OUT/results.json"
    tppl=$(sed -n 's/.*"model": "teacher", "held_ppl": \([0-9.e+-]*\).*/\1/p' "$J")
    echo "| model | held-out PPL | vs teacher | TinyStories PPL | multiple choice acc (norm) |"
    echo "|---|---|---|---|---|"
    for m in $MODELS; do
        row=$(grep "\"model\": \"$m\"" "$J")
        h=$(echo "$row" | sed 's/.*"held_ppl": \([^,]*\),.*/\1/')
        t=$(echo "$row" | sed 's/.*"tinystories_ppl": \([^,]*\),.*/\1/')
        a=$(echo "$row" | sed 's/.*"mc_acc": \([^,]*\),.*/\1/')
        n=$(echo "$row" | sed 's/.*"mc_acc_norm": \([^,]*\),.*/\1/')
        awk -v w="$(what "$m")" -v h="$h" -v tp="$tppl" -v t="$t" -v a="$a" -v n="$n" \
            'BEGIN { printf "| %s | %.3f | %+.1f %% | %.3f | %.3f (%.3f) |\n", w, h, 100 * (h / tp - 1), t, a, n }'
    done
    targets=$(sed -n 's/.*"model": "teacher".*"held_targets": \([0-9]*\).*/\1/p' "$J")
    q=$(sed -n 's/.*"model": "teacher".*"mc_questions": \([0-9]*\).*/\1/p' "$J")
    echo
    echo "Held-out: $targets target tokens of stories the teacher sampled from seeds outside the"
    echo "corpus; every student and the control trained on $BUDGET tokens; multiple choice:"
    echo "$q questions, 4 endings each (chance 0.25)."
    ;;
*)
    echo "usage: stories_results.sh json|md" >&2
    exit 2
    ;;
esac
