#!/usr/bin/env bash
# resume_trust.sh — resume trusts nothing it finds (issue: nothing a user
# gives hm is destroyed): a flipped bit in the .state, a state on top of a
# different base checkpoint of the same shape, a changed --lr, --clip,
# --warmup, --weight-decay or --backend are all refused naming the cause;
# an existing .state is not replaced without -f; an honest resume continues.
# Env: HM_BIN, HM_TMP.
set -u
B="$HM_BIN"
T="${HM_TMP:-/tmp}/cli_resume_trust.$$"
rm -rf "$T" && mkdir -p "$T"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { "$@" >"$T/out" 2>"$T/err" || { fail "exit $?: $* :: $(cat "$T/err")"; return 1; }; }
# refused WANT CMD...: exit 1 and stderr holding WANT
refused() {
    local want="$1"; shift
    "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    [ $rc -eq 1 ] || fail "exit $rc (want 1): $*"
    grep -q -- "$want" "$T/err" || fail "stderr lacks '$want': $(cat "$T/err")"
}

for i in $(seq 1 400); do echo "the quick brown fox $i jumps over the lazy dog"; done > "$T/text.txt"
ok "$B/hm-tokenize" --bytes "$T/text.txt" -o "$T/train.tok"
ok "$B/hm-init" --preset tiny -o "$T/a.st" --seed 1
ok "$B/hm-init" --preset tiny -o "$T/b.st" --seed 2
RUN=(--data "$T/train.tok" --steps 6 --batch 2 --seq-len 32 --lr 1e-3 --warmup 1 --seed 3
     --no-progress -q)
ok "$B/hm-finetune" "$T/a.st" -o "$T/out.st" "${RUN[@]}" --stop-after 3
[ -f "$T/out.st.state" ] || fail "no state after --stop-after"
cp "$T/out.st.state" "$T/good.state"

# an existing state is not replaced without -f (not resuming), even when the
# output itself is absent
cp "$T/good.state" "$T/out2.st.state"
refused "state '$T/out2.st.state' exists" "$B/hm-finetune" "$T/a.st" -o "$T/out2.st" "${RUN[@]}"
cmp -s "$T/good.state" "$T/out2.st.state" || fail "the existing state was touched"
[ ! -e "$T/out2.st" ] || fail "a refused run wrote its output"

# changed hyper-parameters are refused, naming the field
refused "lr" "$B/hm-finetune" "$T/a.st" -o "$T/out.st" "${RUN[@]/1e-3/2e-3}" --resume -f
refused "clip" "$B/hm-finetune" "$T/a.st" -o "$T/out.st" "${RUN[@]}" --clip 0.5 --resume -f
refused "warmup" "$B/hm-finetune" "$T/a.st" -o "$T/out.st" --data "$T/train.tok" --steps 6 \
    --batch 2 --seq-len 32 --lr 1e-3 --warmup 2 --seed 3 --no-progress -q --resume -f
refused "weight_decay" "$B/hm-finetune" "$T/a.st" -o "$T/out.st" "${RUN[@]}" --weight-decay 0.01 \
    --resume -f
refused "backend" "$B/hm-finetune" "$T/a.st" -o "$T/out.st" "${RUN[@]}" --backend ref --resume -f
# another base checkpoint of the same shape
refused "base_xxh3" "$B/hm-finetune" "$T/b.st" -o "$T/out.st" "${RUN[@]}" --resume -f
cmp -s "$T/good.state" "$T/out.st.state" || fail "a refused resume changed the state"

# one flipped bit anywhere in the tensors: refused as corrupt
size=$(stat -c %s "$T/good.state")
for off in $((size - 5)) $((size / 2)) $((size - size / 3)); do
    cp "$T/good.state" "$T/out.st.state"
    python3 - "$T/out.st.state" "$off" <<'PY'
import sys
p, off = sys.argv[1], int(sys.argv[2])
b = bytearray(open(p, 'rb').read())
b[off] ^= 0x10
open(p, 'wb').write(b)
PY
    refused "corrupt" "$B/hm-finetune" "$T/a.st" -o "$T/out.st" "${RUN[@]}" --resume -f
done

# the honest resume continues and equals an uninterrupted run
cp "$T/good.state" "$T/out.st.state"
ok "$B/hm-finetune" "$T/a.st" -o "$T/out.st" "${RUN[@]}" --resume -f
ok "$B/hm-finetune" "$T/a.st" -o "$T/full.st" "${RUN[@]}"
cmp -s <(tail -c 200000 "$T/out.st") <(tail -c 200000 "$T/full.st") ||
    fail "resumed weights differ from an uninterrupted run"
rm -rf "$T"
[ $fails -eq 0 ] || { echo "resume_trust.sh: $fails failure(s)"; exit 1; }
echo "resume_trust.sh: ok"
