#!/usr/bin/env bash
# stage1_objectives.sh — hm-linearize --objective cos|mse|attn-ce on both
# families (hm-init tiny, llama-tiny): each objective runs, logs its per-layer
# loss and lowers it over a few steps; cos stays the default (the same bytes
# with and without the flag); the checked backend gives ref's bytes; a bad
# value is a usage error (exit 2); --dry-run and --help name the objective;
# a resume with another objective is refused naming it, with the same one it
# continues to the uninterrupted run's bytes; the bundle card labels the
# final loss by its objective.
# Env: HM_BIN, HM_TMP.
set -u
B="$HM_BIN"
T="${HM_TMP:-/tmp}/cli_stage1_objectives.$$"
rm -rf "$T" && mkdir -p "$T"
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# the tensor bytes of a safetensors file (after its 8-byte length and header,
# which holds the provenance: command line and times)
data() { local h; h=$(od -An -tu8 -N8 "$1" | tr -d ' '); tail -c +$((9 + h)) "$1" | md5sum; }
same() { [ -s "$1" ] && [ "$(data "$1")" = "$(data "$2")" ]; }
ok() { "$@" >"$T/out" 2>"$T/err" || { fail "exit $?: $* :: $(tail -c 600 "$T/err")"; return 1; }; }

for i in $(seq 1 300); do echo "the quick brown fox $i jumps over the lazy dog"; done >"$T/text.txt"
ok "$B/hm-tokenize" --bytes "$T/text.txt" -o "$T/train.tok" -q
# init std 0.3, not 0.02: attention far from uniform, so that the
# identity-initialized maps have something to learn in a few steps
ok "$B/hm-init" --preset tiny -o "$T/neox.st" --seed 1 --init-std 0.3 -q
ok "$B/hm-init" --preset llama-tiny -o "$T/llama.st" --seed 2 --init-std 0.3 -q
RUN=(--data "$T/train.tok" --batch 2 --seq-len 32 --seed 3 --warmup 0 --no-progress -q)

# the first logged loss, the mean of the last four (each step sees other
# windows), the per-layer entries of the last line, the lines
losses() {
    python3 - "$1" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(rows[0]["loss"], sum(r["loss"] for r in rows[-4:]) / 4, len(rows[-1]["layer_loss"]), len(rows))
EOF
}

for fam in neox llama; do
    layers=$("$B/hm-inspect" --json "$T/$fam.st" |
        python3 -c "import json,sys; print(json.load(sys.stdin)['config']['num_hidden_layers'])")
    for obj in cos mse attn-ce; do
        ok "$B/hm-linearize" "$T/$fam.st" -o "$T/$fam.$obj.st" "${RUN[@]}" --steps 12 --lr 3e-2 \
            --objective "$obj" --log "$T/$fam.$obj.log" || continue
        read -r first last nl rows <<<"$(losses "$T/$fam.$obj.log")"
        [ "$rows" = 12 ] || fail "$fam $obj: $rows log lines"
        [ "$nl" = "$layers" ] || fail "$fam $obj: $nl layer losses, $layers layers"
        python3 -c "import sys; sys.exit(0 if float(sys.argv[2]) < float(sys.argv[1]) else 1)" \
            "$first" "$last" || fail "$fam $obj: the loss did not fall ($first -> mean $last)"
    done
    # the default is cos: the same bytes without the flag
    ok "$B/hm-linearize" "$T/$fam.st" -o "$T/$fam.default.st" "${RUN[@]}" --steps 12 --lr 3e-2 &&
        { same "$T/$fam.default.st" "$T/$fam.cos.st" || fail "$fam: --objective cos differs from the default"; }
    # the checked backend computes ref's ops: the same bytes
    for obj in mse attn-ce; do
        for be in ref checked; do
            ok "$B/hm-linearize" "$T/$fam.st" -o "$T/$fam.$obj.$be.st" "${RUN[@]}" --steps 2 \
                --objective "$obj" --backend "$be"
        done
        same "$T/$fam.$obj.ref.st" "$T/$fam.$obj.checked.st" || fail "$fam $obj: checked differs from ref"
    done
done

# a bad value: one error line plus the short usage on stderr, exit 2
"$B/hm-linearize" "$T/neox.st" -o "$T/x.st" "${RUN[@]}" --steps 1 --objective cosine \
    >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 2 ] || fail "bad --objective: exit $rc (want 2)"
[ -s "$T/out" ] && fail "bad --objective: stdout not empty"
grep -q "^hm-linearize: error: --objective must be cos, mse or attn-ce, got 'cosine'" "$T/err" ||
    fail "bad --objective: $(cat "$T/err")"
[ -e "$T/x.st" ] && fail "bad --objective wrote an output"

ok "$B/hm-linearize" --help && grep -q -- "--objective O" "$T/out" || fail "--help does not document --objective"
ok "$B/hm-linearize" "$T/neox.st" -o "$T/x.st" "${RUN[@]}" --steps 3 --objective attn-ce -n &&
    { grep -q "objective attn-ce" "$T/out" || fail "--dry-run does not name the objective: $(cat "$T/out")"; }

# resume: the objective is part of the run's identity
R=(--steps 4 --lr 1e-2)
ok "$B/hm-linearize" "$T/neox.st" -o "$T/full.st" "${RUN[@]}" "${R[@]}" --objective mse
ok "$B/hm-linearize" "$T/neox.st" -o "$T/part.st" "${RUN[@]}" "${R[@]}" --objective mse --stop-after 2
"$B/hm-linearize" "$T/neox.st" -o "$T/part.st" "${RUN[@]}" "${R[@]}" --objective attn-ce --resume \
    >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 1 ] || fail "resume with another objective: exit $rc (want 1)"
grep -q "stage1_objective 'mse', this run has 'attn-ce'" "$T/err" ||
    fail "resume with another objective: $(cat "$T/err")"
"$B/hm-linearize" "$T/neox.st" -o "$T/part.st" "${RUN[@]}" "${R[@]}" --resume >"$T/out" 2>"$T/err"
[ $? -eq 1 ] && grep -q "stage1_objective 'mse', this run has 'cos'" "$T/err" ||
    fail "resume with the default objective: $(cat "$T/err")"
ok "$B/hm-linearize" "$T/neox.st" -o "$T/part.st" "${RUN[@]}" "${R[@]}" --objective mse --resume &&
    { same "$T/part.st" "$T/full.st" || fail "stop + resume (mse) differs from the uninterrupted run"; }

# the model card names what the final loss measures
for obj in mse attn-ce; do
    ok "$B/hm-pack" "$T/neox.$obj.st" -o "$T/$obj.bundle" --bytes --format dir || continue
    case $obj in
    mse) want="mean squared error of the attention outputs over layers" ;;
    attn-ce) want="attention-weight cross-entropy over layers" ;;
    esac
    grep -q "| hm-linearize | .*($want)" "$T/$obj.bundle/README.md" ||
        fail "card ($obj): $(grep 'hm-linearize |' "$T/$obj.bundle/README.md")"
done

[ $fails -eq 0 ] && echo "stage1_objectives: ok"
exit $((fails > 0))
