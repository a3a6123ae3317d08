#!/usr/bin/env bash
# distill.sh — hm-finetune's objective with a teacher (contract §3, §10):
# loss = c·CE + w·τ²·KL(softmax(z_t/τ) ‖ softmax(z_s/τ)), c = --ce-weight,
# w = --kd-weight, τ = --kd-temperature. Each log line carries "ce_kl":
# [mean CE, mean τ²·KL] beside "loss", so the sum is checked line by line:
#  - a model distilled into a copy of itself at --ce-weight 0 logs loss 0
#    (KL 0 within 1e-6) at τ = 1 and τ = 2, while CE is still measured;
#  - a student unlike its teacher at --ce-weight 0 logs loss = w·kl, and at
#    --ce-weight 2 --kd-temperature 2 logs loss = 2·ce + w·kl;
#  - the temperature changes the KL term; the flags reach the provenance;
#  - τ ≤ 0, a negative or non-numeric weight, --kd-temperature without
#    --kd-teacher and --ce-weight 0 without a teacher (no objective) are
#    usage errors, exit 2, naming the flag, writing nothing.
# Env: HM_BIN, HM_TMP.
set -u
B="$HM_BIN"
T="${HM_TMP:-/tmp}/cli_distill.$$"
rm -rf "$T" && mkdir -p "$T"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { "$@" >"$T/out" 2>"$T/err" || { fail "exit $?: $* :: $(cat "$T/err")"; return 1; }; }
# usage WANT CMD...: exit 2, stderr naming WANT, no output written
usage() {
    local want="$1"; shift
    rm -f "$T/bad.st"
    "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    [ $rc -eq 2 ] || fail "exit $rc (want 2): $*"
    grep -q -- "$want" "$T/err" || fail "stderr lacks '$want': $(cat "$T/err")"
    [ ! -e "$T/bad.st" ] || fail "a usage error trained: $*"
}
# check_log LOG C W EXPR: every line has finite loss and ce_kl, loss equals
# C·ce + W·kl (to the log's 9 digits), and the python expression EXPR over
# (loss, ce, kl) holds; names LOG and the line otherwise
check_log() {
    python3 - "$@" 2>"$T/py.err" <<'PY' || fail "$1: $(cat "$T/py.err")"
import json, sys
path, c, w, expr = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
lines = [json.loads(x) for x in open(path)]
if not lines:
    sys.exit('empty log')
for j in lines:
    loss, (ce, kl) = j['loss'], j['ce_kl']
    want = c * ce + w * kl
    if abs(loss - want) > 2e-8 * max(1.0, abs(want)):
        sys.exit('step %d: loss %r, c·ce + w·kl %r' % (j['step'], loss, want))
    if not eval(expr):
        sys.exit('step %d: not %s (loss %r ce %r kl %r)' % (j['step'], expr, loss, ce, kl))
PY
}

for i in $(seq 1 300); do echo "line $i of some text for the student to learn"; done > "$T/text.txt"
ok "$B/hm-tokenize" --bytes "$T/text.txt" -o "$T/train.tok"
ok "$B/hm-init" --preset tiny -o "$T/m.st" --seed 1
ok "$B/hm-init" --preset tiny -o "$T/other.st" --seed 2
cp "$T/m.st" "$T/copy.st"
RUN=(--data "$T/train.tok" --steps 3 --batch 2 --seq-len 16 --seed 4 --no-progress -q)

# into a copy of itself: nothing to learn (sgd: no AdamW step of lr on a
# rounding-sized gradient, no weight decay moving the student away)
for tau in 1 2; do
    ok "$B/hm-finetune" "$T/m.st" -o "$T/self$tau.st" "${RUN[@]}" --optimizer sgd --lr 1e-2 \
        --ce-weight 0 --kd-weight 1 --kd-teacher "$T/copy.st" --kd-temperature $tau \
        --log "$T/self$tau.log" &&
        check_log "$T/self$tau.log" 0 1 "abs(loss) <= 1e-6 and abs(kl) <= 1e-6 and ce > 1"
done

# unlike the teacher: the loss is the KL term alone at --ce-weight 0; the
# weighted sum otherwise
ok "$B/hm-finetune" "$T/m.st" -o "$T/kd.st" "${RUN[@]}" --ce-weight 0 --kd-weight 0.5 \
    --kd-teacher "$T/other.st" --log "$T/kd.log" &&
    check_log "$T/kd.log" 0 0.5 "kl > 1e-3 and ce > 1 and loss < ce"
ok "$B/hm-finetune" "$T/m.st" -o "$T/kd2.st" "${RUN[@]}" --ce-weight 2 --kd-weight 0.5 \
    --kd-teacher "$T/other.st" --kd-temperature 2 --log "$T/kd2.log" &&
    check_log "$T/kd2.log" 2 0.5 "kl > 1e-3 and ce > 1"
# step 1 sees the same weights and windows: its CE agrees; τ changes the KL
python3 - "$T/kd.log" "$T/kd2.log" <<'PY' || fail "τ = 2 vs τ = 1 at step 1"
import json, sys
a, b = (json.loads(open(p).readline())['ce_kl'] for p in sys.argv[1:])
sys.exit(0 if a[0] == b[0] and abs(a[1] - b[1]) > 1e-6 else 'ce_kl %r vs %r' % (a, b))
PY
ok "$B/hm-inspect" --json "$T/kd2.st" && python3 - "$T/out" <<'PY' ||
import json, sys
args = json.load(open(sys.argv[1]))['provenance'][-1]['args']
sys.exit(0 if '--kd-temperature' in args and '--ce-weight' in args else 'args %r' % args)
PY
    fail "the provenance lacks --kd-temperature / --ce-weight"
# without a teacher there is no ce_kl, and --ce-weight scales the loss
ok "$B/hm-finetune" "$T/m.st" -o "$T/ce.st" "${RUN[@]}" --log "$T/ce.log"
ok "$B/hm-finetune" "$T/m.st" -o "$T/ce3.st" "${RUN[@]}" --ce-weight 3 --log "$T/ce3.log"
grep -q ce_kl "$T/ce.log" && fail "a run without a teacher logs ce_kl"
python3 - "$T/ce.log" "$T/ce3.log" <<'PY' || fail "--ce-weight 3 does not scale the loss"
import json, sys
a, b = (json.loads(open(p).readline())['loss'] for p in sys.argv[1:])
sys.exit(0 if abs(b - 3 * a) <= 1e-7 * b else 'loss %r vs 3 × %r' % (b, a))
PY

# usage errors
KD=(--kd-teacher "$T/other.st" --kd-weight 1)
usage "--kd-temperature" "$B/hm-finetune" "$T/m.st" -o "$T/bad.st" "${RUN[@]}" "${KD[@]}" \
    --kd-temperature 0
usage "--kd-temperature" "$B/hm-finetune" "$T/m.st" -o "$T/bad.st" "${RUN[@]}" "${KD[@]}" \
    --kd-temperature -1
usage "--kd-temperature" "$B/hm-finetune" "$T/m.st" -o "$T/bad.st" "${RUN[@]}" "${KD[@]}" \
    --kd-temperature nan
usage "--ce-weight" "$B/hm-finetune" "$T/m.st" -o "$T/bad.st" "${RUN[@]}" "${KD[@]}" \
    --ce-weight -0.5
usage "--ce-weight" "$B/hm-finetune" "$T/m.st" -o "$T/bad.st" "${RUN[@]}" "${KD[@]}" \
    --ce-weight x
usage "--kd-temperature needs --kd-teacher" "$B/hm-finetune" "$T/m.st" -o "$T/bad.st" "${RUN[@]}" \
    --kd-temperature 2
usage "no objective" "$B/hm-finetune" "$T/m.st" -o "$T/bad.st" "${RUN[@]}" --ce-weight 0
"$B/hm-finetune" -h | grep -q -- "--kd-temperature" && "$B/hm-finetune" -h | grep -q -- "--ce-weight" ||
    fail "--help lacks --kd-temperature / --ce-weight"

rm -rf "$T"
[ $fails -eq 0 ] || { echo "distill.sh: $fails failure(s)"; exit 1; }
echo "distill.sh: ok"
