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

# distillation and the trainable set are part of the trajectory: adding,
# dropping or changing --kd-teacher / --kd-weight / --kd-temperature /
# --ce-weight, or adding --freeze, is
# refused naming what changed (never "corrupt"); a teacher without a weight
# would distill nothing, so it is a usage error
ok "$B/hm-init" --preset tiny -o "$T/teacher.st" --seed 9
cp "$T/good.state" "$T/out.st.state"
refused "kd_teacher" "$B/hm-finetune" "$T/a.st" -o "$T/out.st" "${RUN[@]}" --resume -f \
    --kd-teacher "$T/teacher.st" --kd-weight 0.5
refused "trainable set changed" "$B/hm-finetune" "$T/a.st" -o "$T/out.st" "${RUN[@]}" --resume -f \
    --freeze embeddings
grep -q "corrupt" "$T/err" && fail "a changed --freeze called the state corrupt: $(cat "$T/err")"
"$B/hm-finetune" "$T/a.st" -o "$T/kd0.st" "${RUN[@]}" --kd-teacher "$T/teacher.st" >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 2 ] || fail "--kd-teacher without --kd-weight: exit $rc (want 2)"
grep -q -- "--kd-weight" "$T/err" || fail "the message does not name --kd-weight: $(cat "$T/err")"
[ ! -e "$T/kd0.st" ] || fail "--kd-teacher without a weight trained"
ok "$B/hm-finetune" "$T/a.st" -o "$T/kd.st" "${RUN[@]}" --stop-after 3 --kd-teacher "$T/teacher.st" \
    --kd-weight 0.5
cp "$T/kd.st.state" "$T/kd.state"
refused "kd_teacher" "$B/hm-finetune" "$T/a.st" -o "$T/kd.st" "${RUN[@]}" --resume -f
refused "kd_weight" "$B/hm-finetune" "$T/a.st" -o "$T/kd.st" "${RUN[@]}" --resume -f \
    --kd-teacher "$T/teacher.st" --kd-weight 0.25
refused "kd_teacher" "$B/hm-finetune" "$T/a.st" -o "$T/kd.st" "${RUN[@]}" --resume -f \
    --kd-teacher "$T/b.st" --kd-weight 0.5
refused "kd_temperature" "$B/hm-finetune" "$T/a.st" -o "$T/kd.st" "${RUN[@]}" --resume -f \
    --kd-teacher "$T/teacher.st" --kd-weight 0.5 --kd-temperature 2
refused "ce_weight" "$B/hm-finetune" "$T/a.st" -o "$T/kd.st" "${RUN[@]}" --resume -f \
    --kd-teacher "$T/teacher.st" --kd-weight 0.5 --ce-weight 0.5
cmp -s "$T/kd.state" "$T/kd.st.state" || fail "a refused resume changed the distillation state"
ok "$B/hm-finetune" "$T/a.st" -o "$T/kd.st" "${RUN[@]}" --resume -f --kd-teacher "$T/teacher.st" \
    --kd-weight 0.5
ok "$B/hm-finetune" "$T/a.st" -o "$T/kdfull.st" "${RUN[@]}" --kd-teacher "$T/teacher.st" \
    --kd-weight 0.5
cmp -s <(tail -c 200000 "$T/kd.st") <(tail -c 200000 "$T/kdfull.st") ||
    fail "a resumed distillation differs from an uninterrupted one"
grep -a -q "teacher.st" "$T/kd.st" || fail "the provenance does not name the --kd-teacher"
# a state written before --kd-temperature and --ce-weight existed lacks their
# fields: it was made with their defaults (1) and resumes as such; another
# value is refused naming the field
python3 - "$T/kd.state" "$T/kdold.st.state" <<'PY'
import json, struct, sys
b = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n])
r = json.loads(h['__metadata__']['hm.run'])
assert r.pop('kd_temperature') == '1' and r.pop('ce_weight') == '1'
h['__metadata__']['hm.run'] = json.dumps(r)
hdr = json.dumps(h).encode()
hdr += b' ' * (-len(hdr) % 8)
open(sys.argv[2], 'wb').write(struct.pack('<Q', len(hdr)) + hdr + b[8 + n:])
PY
refused "kd_temperature '1'" "$B/hm-finetune" "$T/a.st" -o "$T/kdold.st" "${RUN[@]}" --resume -f \
    --kd-teacher "$T/teacher.st" --kd-weight 0.5 --kd-temperature 2
refused "ce_weight '1'" "$B/hm-finetune" "$T/a.st" -o "$T/kdold.st" "${RUN[@]}" --resume -f \
    --kd-teacher "$T/teacher.st" --kd-weight 0.5 --ce-weight 2
ok "$B/hm-finetune" "$T/a.st" -o "$T/kdold.st" "${RUN[@]}" --resume -f \
    --kd-teacher "$T/teacher.st" --kd-weight 0.5
cmp -s <(tail -c 200000 "$T/kdold.st") <(tail -c 200000 "$T/kdfull.st") ||
    fail "a resumed state without the temperature fields differs from an uninterrupted run"

# --clip with sgd clips (one clipping path for both optimizers); sgd without
# --clip stays unclipped (contract §4), and a changed clip is refused
SGD=(--data "$T/train.tok" --steps 2 --batch 2 --seq-len 32 --lr 1e-1 --warmup 0 --seed 3
     --no-progress -q --optimizer sgd)
ok "$B/hm-finetune" "$T/a.st" -o "$T/sgd.st" "${SGD[@]}"
ok "$B/hm-finetune" "$T/a.st" -o "$T/sgd0.st" "${SGD[@]}" --clip 0
ok "$B/hm-finetune" "$T/a.st" -o "$T/sgdc.st" "${SGD[@]}" --clip 1e-3
cmp -s <(tail -c 200000 "$T/sgd.st") <(tail -c 200000 "$T/sgd0.st") ||
    fail "sgd without --clip is not the unclipped update"
cmp -s <(tail -c 200000 "$T/sgd.st") <(tail -c 200000 "$T/sgdc.st") &&
    fail "sgd --clip 1e-3 gave the unclipped weights (the clip was dropped)"
refused "clip" "$B/hm-finetune" "$T/a.st" -o "$T/sgdc.st" "${SGD[@]}" --clip 1 --resume -f

# one output, two training runs (issue: two writers both win): a run holds
# its output and state for its whole life, so a second run of the same output
# fails at once naming it, with -f and with --resume, while the first goes on
# and wins. A run killed with -9 leaves a lock file that holds no lock: the
# next run goes ahead.
# (one thread: spinning OpenMP threads on a loaded machine slow a run 20-fold)
LONG=(--data "$T/train.tok" --batch 2 --seq-len 32 --lr 1e-3 --warmup 1 --seed 3 --no-progress -q
      --threads 1)
started() { # started LOG PID: wait until the run PID has logged a step
    for i in $(seq 1 1200); do
        [ -s "$1" ] && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}
for tool in hm-finetune hm-linearize; do
    o="$T/race-$tool.st"
    rm -f "$o" "$o.state" "$T/race.log"
    "$B/$tool" "$T/a.st" -o "$o" "${LONG[@]}" --steps 300 --log "$T/race.log" \
        >"$T/r1.out" 2>"$T/r1.err" &
    pid=$!
    started "$T/race.log" $pid || fail "$tool: the first run never started: $(cat "$T/r1.err")"
    for extra in "" "-f" "--resume -f"; do
        "$B/$tool" "$T/a.st" -o "$o" "${LONG[@]}" --steps 300 $extra >"$T/out" 2>"$T/err"
        rc=$?
        [ $rc -eq 1 ] || fail "$tool: a second run of '$o' ($extra) exit $rc (want 1)"
        grep -q "cannot write '$o': another run (pid $pid) is writing it" "$T/err" ||
            fail "$tool ($extra): $(cat "$T/err")"
    done
    wait $pid
    rc=$?
    [ $rc -eq 0 ] || fail "$tool: the first run exit $rc: $(cat "$T/r1.err")"
    [ -s "$o" ] && [ -s "$o.state" ] || fail "$tool: the first run left no output and state"
    [ -e "$o.lock" ] && fail "$tool: a finished run left its lock file"
    # a run that resumes holds its output too: a fresh -f run cannot take it over
    "$B/$tool" "$T/a.st" -o "$o" "${LONG[@]}" --steps 300 --stop-after 2 -f >"$T/out" 2>"$T/err" ||
        fail "$tool: --stop-after: $(cat "$T/err")"
    rm -f "$T/race.log"
    "$B/$tool" "$T/a.st" -o "$o" "${LONG[@]}" --steps 300 --resume --log "$T/race.log" \
        >"$T/r1.out" 2>"$T/r1.err" &
    pid=$!
    started "$T/race.log" $pid || fail "$tool: the resumed run never started: $(cat "$T/r1.err")"
    refused "cannot write '$o': another run (pid $pid)" "$B/$tool" "$T/a.st" -o "$o" "${LONG[@]}" \
        --steps 300 -f
    wait $pid || fail "$tool: the resumed run failed: $(cat "$T/r1.err")"
    # killed with -9 mid-run
    rm -f "$T/race.log"
    "$B/$tool" "$T/a.st" -o "$o" "${LONG[@]}" --steps 100000 -f --log "$T/race.log" \
        >"$T/r1.out" 2>"$T/r1.err" &
    pid=$!
    started "$T/race.log" $pid || fail "$tool: the run to kill never started: $(cat "$T/r1.err")"
    kill -9 $pid
    { wait $pid; } 2>/dev/null
    rc=$?
    [ $rc -eq 137 ] || fail "$tool: the run was not killed (exit $rc)"
    [ -e "$o.lock" ] || fail "$tool: a killed run left no lock file (nothing tested)"
    ok "$B/$tool" "$T/a.st" -o "$o" "${LONG[@]}" --steps 2 -f
    [ -e "$o.lock" ] && fail "$tool: the stale lock file was not cleared"
done
# an output's state that appears while a run without -f trains is left alone
rm -f "$T/race.log" "$T/ex.st" "$T/ex.st.state"
"$B/hm-finetune" "$T/a.st" -o "$T/ex.st" "${LONG[@]}" --steps 300 --log "$T/race.log" \
    >"$T/r1.out" 2>"$T/r1.err" &
pid=$!
started "$T/race.log" $pid || fail "the run never started: $(cat "$T/r1.err")"
echo "another writer's state" > "$T/ex.st.state"
wait $pid
rc=$?
[ $rc -eq 1 ] || fail "a state that appeared while training: exit $rc (want 1)"
grep -q "cannot write state '$T/ex.st.state': output \(exists\|appeared while\)" "$T/r1.err" ||
    fail "no race message: $(cat "$T/r1.err")"
[ "$(cat "$T/ex.st.state")" = "another writer's state" ] || fail "the state that appeared was replaced"

# the honest resume continues and equals an uninterrupted run
cp "$T/good.state" "$T/out.st.state"
ok "$B/hm-finetune" "$T/a.st" -o "$T/out.st" "${RUN[@]}" --resume -f
ok "$B/hm-finetune" "$T/a.st" -o "$T/full.st" "${RUN[@]}"
cmp -s <(tail -c 200000 "$T/out.st") <(tail -c 200000 "$T/full.st") ||
    fail "resumed weights differ from an uninterrupted run"
rm -rf "$T"
[ $fails -eq 0 ] || { echo "resume_trust.sh: $fails failure(s)"; exit 1; }
echo "resume_trust.sh: ok"
