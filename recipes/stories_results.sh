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
        g="$OUT/$m.gen.json"
        printf '%s  {"model": "%s", "held_ppl": %s, "held_nll": %s, "held_targets": %s, "tinystories_ppl": %s, "mc_acc": %s, "mc_acc_norm": %s, "mc_questions": %s, "kl": %s, "agreement": %s, "gen_nll": %s, "teacher_gen_nll": %s, "common_prefix": %s, "gen_prompts": %s, "gen_prompt_len": %s, "gen_new": %s, "gen_seed": %s}' \
            "$sep" "$m" "$(num ppl "$OUT/$m.held.json")" "$(num mean_nll "$OUT/$m.held.json")" \
            "$(num targets "$OUT/$m.held.json")" "$(num ppl "$OUT/$m.ts.json")" \
            "$(num acc "$OUT/$m.mc.json")" "$(num acc_norm "$OUT/$m.mc.json")" \
            "$(num questions "$OUT/$m.mc.json")" "$(num kl "$g")" "$(num agreement "$g")" \
            "$(num student_nll "$g")" "$(num teacher_nll "$g")" "$(num common_prefix "$g")" \
            "$(num prompts "$g")" "$(num prompt_len "$g")" "$(num new_tokens "$g")" \
            "$(num seed "$g")"
        sep=",
"
    done
    printf '\n]}\n'
    ;;
md)
    J="$OUT/results.json"
    tppl=$(sed -n 's/.*"model": "teacher", "held_ppl": \([0-9.e+-]*\).*/\1/p' "$J")
    echo "| model | held-out PPL | vs teacher | TinyStories PPL | multiple choice acc (norm) | KL to teacher | top-1 agreement | teacher-scored NLL of samples | greedy common prefix |"
    echo "|---|---|---|---|---|---|---|---|---|"
    for m in $MODELS; do
        row=$(grep "\"model\": \"$m\"" "$J")
        h=$(echo "$row" | sed 's/.*"held_ppl": \([^,]*\),.*/\1/')
        t=$(echo "$row" | sed 's/.*"tinystories_ppl": \([^,]*\),.*/\1/')
        a=$(echo "$row" | sed 's/.*"mc_acc": \([^,]*\),.*/\1/')
        n=$(echo "$row" | sed 's/.*"mc_acc_norm": \([^,]*\),.*/\1/')
        k=$(echo "$row" | sed 's/.*"kl": \([^,]*\),.*/\1/')
        g=$(echo "$row" | sed 's/.*"agreement": \([^,]*\),.*/\1/')
        s=$(echo "$row" | sed 's/.*"gen_nll": \([^,]*\),.*/\1/')
        c=$(echo "$row" | sed 's/.*"common_prefix": \([^,]*\),.*/\1/')
        awk -v w="$(what "$m")" -v h="$h" -v tp="$tppl" -v t="$t" -v a="$a" -v n="$n" \
            -v k="$k" -v g="$g" -v s="$s" -v c="$c" \
            'BEGIN { printf "| %s | %.3f | %+.1f %% | %.3f | %.3f (%.3f) | %.4f | %.3f | %.3f | %.1f |\n", w, h, 100 * (h / tp - 1), t, a, n, k, g, s, c }'
    done
    gp=$(sed -n 's/.*"model": "teacher".*"gen_prompts": \([0-9]*\).*/\1/p' "$J")
    gl=$(sed -n 's/.*"model": "teacher".*"gen_prompt_len": \([0-9]*\).*/\1/p' "$J")
    gn=$(sed -n 's/.*"model": "teacher".*"gen_new": \([0-9]*\).*/\1/p' "$J")
    gs=$(sed -n 's/.*"model": "teacher".*"gen_seed": \([0-9]*\).*/\1/p' "$J")
    targets=$(sed -n 's/.*"model": "teacher".*"held_targets": \([0-9]*\).*/\1/p' "$J")
    q=$(sed -n 's/.*"model": "teacher".*"mc_questions": \([0-9]*\).*/\1/p' "$J")
    echo
    echo "Held-out: $targets target tokens of stories the teacher sampled from seeds outside the"
    echo "corpus; every student and the control trained on $BUDGET tokens; multiple choice:"
    echo "$q questions, 4 endings each (chance 0.25). Against the teacher (hm-eval --teacher):"
    echo "KL and top-1 agreement teacher-forced on the held-out windows; $gp prompts of $gl"
    echo "held-out tokens, $gn tokens sampled at temperature 1 (seed $gs), scored by the"
    echo "teacher (its own samples: the teacher row); greedy common prefix of $gn."
    ;;
*)
    echo "usage: stories_results.sh json|md" >&2
    exit 2
    ;;
esac
