#!/usr/bin/env bash
# ranks.sh — issue 32: many processes, one truth. A run of several processes
# agrees at its start on every input, flag and the resume state (a
# difference is refused before the first step, naming the process and the
# file or flag; nothing hangs: every such run has a timeout); process 0
# alone reads the state and checks the output folder, so two folders with
# their own copies and no shared file system train, stop, resume and end
# bit-identical to one process. Locks own their file (release only the
# inode held, refuse a hard-linked lock, OUT.state held by the run, a live
# lock is no -o). Streams: '-' twice, stdin under a launcher. Flags:
# --val-every without --val-data.
# Env: HM_BIN, HM_TMP, HM_HAVE_MPI.
set -u
B="$HM_BIN"
T="${HM_TMP:-/tmp}/cli_ranks.$$"
rm -rf "$T" && mkdir -p "$T"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { "$@" >"$T/out" 2>"$T/err" || { fail "exit $?: $* :: $(tail -5 "$T/err")"; return 1; }; }
# refused RC WANT CMD...: exit RC and stderr holding WANT
refused() {
    local want_rc="$1" want="$2"; shift 2
    "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    [ $rc -eq "$want_rc" ] || fail "exit $rc (want $want_rc): $* :: $(head -3 "$T/err")"
    grep -q -- "$want" "$T/err" || fail "stderr lacks '$want': $(head -5 "$T/err")"
}

for i in $(seq 1 300); do echo "some words to train on, line $i of the test text"; done > "$T/text.txt"
ok "$B/hm-tokenize" --bytes "$T/text.txt" -o "$T/train.tok"
for i in $(seq 1 300); do echo "other words, line $i"; done > "$T/text2.txt"
ok "$B/hm-tokenize" --bytes "$T/text2.txt" -o "$T/other.tok"
ok "$B/hm-init" --preset tiny -o "$T/teacher.st" -q
RUN=(--steps 4 --batch 2 --seq-len 32 --lr 1e-3 --warmup 1 --threads 1 -q --no-progress)

# ---- flags and streams (every build) ----
refused 2 "needs --val-data" "$B/hm-finetune" "$T/teacher.st" -o "$T/v.st" --data "$T/train.tok" \
    "${RUN[@]}" --val-every 2
refused 2 "needs --val-data" "$B/hm-linearize" "$T/teacher.st" -o "$T/v.st" --data "$T/train.tok" \
    "${RUN[@]}" --val-every 2
refused 2 "the input checkpoint and --data are both '-'" "$B/hm-finetune" - -o "$T/v.st" \
    --data - "${RUN[@]}" </dev/null
[ ! -e "$T/v.st" ] || fail "a refused run wrote its output"

# -o - --json: one rule in every tool that writes data (exit 2, no output)
for c in "hm-init --preset tiny" "hm-map-ssm $T/teacher.st" "hm-pack $T/teacher.st --bytes --format tar" \
         "hm-tokenize --bytes $T/text.txt" "hm-finetune $T/teacher.st --data $T/train.tok --steps 1"; do
    $B/$c -o - --json >"$T/out" 2>"$T/err"
    rc=$?
    [ $rc -eq 2 ] && [ ! -s "$T/out" ] || fail "$c -o - --json: exit $rc, $(wc -c <"$T/out") bytes on stdout"
done
# hm-eval --dump-logits -: the safetensors alone on stdout, the report on stderr
EV=(--data "$T/train.tok" --seq-len 32 --threads 1)
"$B/hm-eval" "$T/teacher.st" "${EV[@]}" --dump-logits - >"$T/dump.st" 2>"$T/err" ||
    fail "hm-eval --dump-logits -: exit $?: $(cat "$T/err")"
grep -q "mean nll" "$T/err" || fail "hm-eval --dump-logits -: no report on stderr: $(cat "$T/err")"
ok "$B/hm-eval" "$T/teacher.st" "${EV[@]}" --dump-logits "$T/dump_file.st"
cmp -s "$T/dump.st" "$T/dump_file.st" || fail "hm-eval --dump-logits - differs from the file it writes"
refused 2 "both want stdout" "$B/hm-eval" "$T/teacher.st" "${EV[@]}" --dump-logits - --json
refused 2 "the checkpoint and --data are both '-'" "$B/hm-eval" - --data - --seq-len 32 </dev/null

# no NVIDIA driver at all (this machine, when it has none): say so, not
# "driver version is insufficient"
if [ ! -e /proc/driver/nvidia/version ] && ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
    "$B/hm-eval" "$T/teacher.st" "${EV[@]}" --device cuda >"$T/out" 2>"$T/err"
    grep -q "insufficient" "$T/err" && fail "no driver, yet: $(cat "$T/err")"
    grep -q "no NVIDIA driver found\|no CUDA backend" "$T/err" || fail "no driver: $(cat "$T/err")"
fi
# under a launcher every message line is one write(2): lines of several
# processes never interleave mid-line (strace: the error line's write)
if command -v strace >/dev/null; then
    strace -f -s 4096 -e trace=write -o "$T/strace" "$B/hm-finetune" /nonexistent/x.st -o "$T/w.st" \
        --data "$T/train.tok" "${RUN[@]}" 2>/dev/null
    grep -q 'write(2, "hm-finetune: error: cannot read .*\\n", [0-9]*) = ' "$T/strace" ||
        fail "the error line is not one write: $(grep 'write(2' "$T/strace" | head -5)"
fi

# ---- metadata of others ----
# a foreign hm.provenance: hm-inspect shows it, hm-eval evaluates the weights
python3 - "$T/teacher.st" "$T/foreign.st" <<'PY'
import json, struct, sys
b = open(sys.argv[1], 'rb').read(); n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n]); h['__metadata__']['hm.provenance'] = '{"made_by": "another tool"}'
hb = json.dumps(h).encode(); open(sys.argv[2], 'wb').write(struct.pack('<Q', len(hb)) + hb + b[8 + n:])
PY
ok "$B/hm-inspect" "$T/foreign.st"
grep -q "provenance: *foreign" "$T/out" && grep -qF '{"made_by": "another tool"}' "$T/out" ||
    fail "hm-inspect does not show the foreign chain: $(cat "$T/out")"
ok "$B/hm-eval" "$T/foreign.st" "${EV[@]}" --json
grep -q '"mean_nll": [0-9]' "$T/out" || fail "hm-eval of a foreign-provenance checkpoint: $(cat "$T/out")"
# a config.json beside the weights that disagrees with hm.config: said, and
# the file's own hm.config wins (the same numbers as without it)
mkdir -p "$T/cfg" && cp "$T/teacher.st" "$T/cfg/model.safetensors"
"$B/hm-eval" "$T/cfg/model.safetensors" "${EV[@]}" --json 2>/dev/null | sed 's/, "tokens_per_s": [^,}]*//' >"$T/e0"
"$B/hm-inspect" --json "$T/cfg/model.safetensors" 2>/dev/null |
    python3 -c 'import json,sys; c=json.load(sys.stdin)["config"]; c["layer_norm_eps"]=0.5; c["rotary_emb_base"]=99.0; print(json.dumps(c))' \
    >"$T/cfg/config.json" || fail "no config from hm-inspect --json"
"$B/hm-eval" "$T/cfg/model.safetensors" "${EV[@]}" --json 2>"$T/err" | sed 's/, "tokens_per_s": [^,}]*//' >"$T/e1"
grep -q "disagree on .*layer_norm_eps" "$T/err" && grep -q "hm.config (a file is read as hm wrote it) wins" "$T/err" ||
    fail "a disagreeing config.json is not named: $(cat "$T/err")"
cmp -s "$T/e0" "$T/e1" || fail "config.json overrode hm.config: $(cat "$T/e0") vs $(cat "$T/e1")"

# ---- one position-limit rule: training refuses, evaluation warns ----
"$B/hm-init" --preset tiny -n --json 2>/dev/null |
    python3 -c 'import json,sys; c=json.load(sys.stdin); c["max_position_embeddings"]=16; print(json.dumps(c))' \
    >"$T/p16.json"
ok "$B/hm-init" --config "$T/p16.json" -o "$T/p16.st" -q
refused 1 "exceeds the position limit of the model '$T/p16.st'" "$B/hm-finetune" "$T/p16.st" \
    -o "$T/p.st" --data "$T/train.tok" "${RUN[@]}"
refused 1 "exceeds the position limit of the teacher '$T/p16.st'" "$B/hm-linearize" "$T/p16.st" \
    -o "$T/p.st" --data "$T/train.tok" "${RUN[@]}"
refused 1 "exceeds the position limit of --kd-teacher '$T/p16.st'" "$B/hm-finetune" "$T/teacher.st" \
    -o "$T/p.st" --data "$T/train.tok" "${RUN[@]}" --kd-teacher "$T/p16.st" --kd-weight 1
[ ! -e "$T/p.st" ] || fail "a run past the position limit wrote its output"
refused 0 "exceeds its position limit" "$B/hm-eval" "$T/p16.st" "${EV[@]}"

# ---- locks own their file ----
# a lock path that is a hard link to a user's file: refused, the file untouched
: > "$T/users.txt"
ln "$T/users.txt" "$T/hl.st.lock"
refused 1 "other hard links" "$B/hm-finetune" "$T/teacher.st" -o "$T/hl.st" --data "$T/train.tok" \
    "${RUN[@]}"
[ ! -s "$T/users.txt" ] || fail "the hard-linked lock's other name was written: $(cat "$T/users.txt")"
[ ! -e "$T/hl.st" ] || fail "a refused run wrote its output"
# a long run holds OUT, OUT.state and OUT.lock
LONG=(--data "$T/train.tok" --steps 100000 --batch 2 --seq-len 32 --lr 1e-3 --warmup 1 --threads 1
      -q --no-progress --save-every 1)
"$B/hm-finetune" "$T/teacher.st" -o "$T/live.st" "${LONG[@]}" >/dev/null 2>"$T/live.err" &
live=$!
for _ in $(seq 1 300); do [ -f "$T/live.st.state" ] && break; sleep 0.1; done
[ -f "$T/live.st.state" ] || fail "the long run wrote no state: $(cat "$T/live.err")"
cp "$T/live.st.state" "$T/live.copy" 2>/dev/null
# another tool cannot take the live run's state or lock as its output
refused 1 "another run" "$B/hm-init" --preset tiny -o "$T/live.st.state" -f -q
refused 1 "locked by another process" "$B/hm-init" --preset tiny -o "$T/live.st.lock" -f -q
grep -qE '^[0-9]+$' "$T/live.st.lock" || fail "the live run's lock file was replaced"
# the lock's name taken by another file while the run lives: the run's
# release leaves that file alone
mv "$T/live.st.lock" "$T/live.old.lock"
echo "someone else's file" > "$T/live.st.lock"
kill -TERM $live
wait $live
[ -f "$T/live.st.lock" ] && grep -q "someone else" "$T/live.st.lock" ||
    fail "the run's release removed a lock file that was not its own"

if [ "${HM_HAVE_MPI:-OFF}" != "ON" ]; then
    echo "SKIP: built without MPI (HM_MPI): the agreement of several processes was not checked"
    rm -rf "$T"
    [ $fails -eq 0 ] || { echo "ranks.sh: $fails failure(s)"; exit 1; }
    exit 0
fi
command -v mpirun >/dev/null || { echo "FAIL: an MPI build but no mpirun"; exit 1; }
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
MPI=(timeout -k 5 120 mpirun --oversubscribe --allow-run-as-root -x ASAN_OPTIONS)
# two folders, one per process (MPMD: no shared file system is assumed: the
# relative paths name each process's own copies)
mkdir -p "$T/A" "$T/B"
for d in A B; do cp "$T/teacher.st" "$T/train.tok" "$T/$d/"; done
two() { # two "flags of process 0" "flags of process 1" COMMON... (the own ones go last: they win)
    local a="$1" b="$2"; shift 2
    "${MPI[@]}" -np 1 --wdir "$T/A" "$B/hm-finetune" "$@" $a : \
                -np 1 --wdir "$T/B" "$B/hm-finetune" "$@" $b >"$T/out" 2>"$T/err"
}
# refused_two WANT A B ARGS...: a non-zero exit (no hang, no timeout) naming WANT
refused_two() {
    local want="$1"; shift
    two "$@"
    local rc=$?
    [ $rc -ne 0 ] || fail "two processes ran: $want"
    [ $rc -ne 124 ] && [ $rc -ne 137 ] || fail "two processes hung (timeout): $want"
    grep -q -- "$want" "$T/err" || fail "the refusal lacks '$want': $(head -5 "$T/err")"
    [ ! -e "$T/A/o.st" ] || fail "a refused run wrote its output ($want)"
    rm -f "$T/A/o.st" "$T/A/o.st.state"
}
C=(teacher.st -o o.st --data train.tok "${RUN[@]}")
# one differing input: another --data at the same path on process 1
cp "$T/other.tok" "$T/B/train.tok"
refused_two "process 1 of 2 reads --data 'train.tok'" "" "" "${C[@]}"
cp "$T/train.tok" "$T/B/train.tok"
# another checkpoint at the same path
cp "$T/A/teacher.st" "$T/B/teacher.st.keep"
ok "$B/hm-init" --preset tiny --seed 7 -o "$T/B/teacher.st" -f -q
refused_two "process 1 of 2 reads the input checkpoint 'teacher.st'" "" "" "${C[@]}"
mv "$T/B/teacher.st.keep" "$T/B/teacher.st"
# one differing flag each: the batch (used silently before), the steps, ZeRO-1
refused_two "process 1 of 2 was started with --batch 4, process 0 with --batch 2" \
    "--batch 2" "--batch 4" "${C[@]}"
refused_two "was started with --steps 5" "" "--steps 5" "${C[@]}"
refused_two "was started with --zero1 on" "" "--zero1" "${C[@]}"
cp "$T/train.tok" "$T/A/val.tok"; cp "$T/train.tok" "$T/B/val.tok"
refused_two "reads --val-data" "--val-data val.tok" "" "${C[@]}"
# stdin reaches process 0 only: '-' is refused under a launcher
"${MPI[@]}" -np 2 "$B/hm-finetune" - -o "$T/s.st" --data "$T/train.tok" "${RUN[@]}" \
    <"$T/teacher.st" >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 2 ] || fail "'-' under mpirun -np 2: exit $rc, want 2"
grep -q "stdin reaches process 0 only" "$T/err" || fail "the stdin refusal: $(head -3 "$T/err")"

"${MPI[@]}" -np 2 "$B/hm-eval" - "${EV[@]}" <"$T/teacher.st" >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 2 ] && grep -q "stdin reaches process 0 only" "$T/err" ||
    fail "hm-eval - under mpirun -np 2: exit $rc: $(head -3 "$T/err")"
# hm-eval: another --data on process 1, another --batch
cp "$T/other.tok" "$T/B/train.tok"
"${MPI[@]}" -np 1 --wdir "$T/A" "$B/hm-eval" teacher.st --data train.tok --seq-len 32 : \
    -np 1 --wdir "$T/B" "$B/hm-eval" teacher.st --data train.tok --seq-len 32 >"$T/out" 2>"$T/err"
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "process 1 of 2 reads --data 'train.tok'" "$T/err" ||
    fail "hm-eval with another --data on process 1: exit $rc: $(head -3 "$T/err")"
cp "$T/train.tok" "$T/B/train.tok"
"${MPI[@]}" -np 1 --wdir "$T/A" "$B/hm-eval" teacher.st --data train.tok --seq-len 32 --batch 2 : \
    -np 1 --wdir "$T/B" "$B/hm-eval" teacher.st --data train.tok --seq-len 32 --batch 3 >"$T/out" 2>"$T/err"
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "started with --batch 3, process 0 with --batch 2" "$T/err" ||
    fail "hm-eval with another --batch on process 1: exit $rc: $(head -3 "$T/err")"

# two folders, no shared file system: train, stop, resume; the result is
# one process's with --grad-accum 2, bit for bit
tensors() { "$B/hm-inspect" --tensors --hash "$1" 2>&1 | sed -n '/^tensors:/,$p'; }
ok "$B/hm-finetune" "$T/teacher.st" -o "$T/one.st" --data "$T/train.tok" "${RUN[@]}" --grad-accum 2
two "" "" "${C[@]}" --stop-after 2 || fail "two folders, first half: $(head -5 "$T/err")"
[ -f "$T/A/o.st.state" ] || fail "process 0 wrote no state"
[ ! -e "$T/B/o.st.state" ] && [ ! -e "$T/B/o.st" ] || fail "process 1 wrote into its folder"
cp "$T/A/o.st.state" "$T/A/half.state"
two "" "" "${C[@]}" --resume || fail "two folders, resumed: $(head -5 "$T/err")"
[ "$(tensors "$T/one.st")" = "$(tensors "$T/A/o.st")" ] && [ "$(tensors "$T/one.st" | wc -l)" -gt 4 ] ||
    fail "two folders resumed differ from one process"
# a stale copy of the state on process 1 is refused before the first step
cp "$T/A/half.state" "$T/B/o.st.state"
rm -f "$T/A/o.st"
cp "$T/A/o.st.state" "$T/A/full.state"
refused_two "process 1 of 2 has a copy of the state 'o.st.state' that differs" "" "" \
    "${C[@]}" --steps 6 --resume
# a resume under another process count names it
mkdir -p "$T/N" && cp "$T/teacher.st" "$T/train.tok" "$T/N/"
(cd "$T/N" && "${MPI[@]}" -np 2 "$B/hm-finetune" "${C[@]}" --stop-after 2 >"$T/out" 2>"$T/err") ||
    fail "2 processes, first half: $(head -3 "$T/err")"
(cd "$T/N" && "$B/hm-finetune" "${C[@]}" --resume >"$T/out" 2>"$T/err")
rc=$?
[ $rc -eq 1 ] || fail "a resume with another G in one process: exit $rc"
grep -q "process count changed" "$T/err" && grep -q "G = 1 (--grad-accum 1 x 1 process)" "$T/err" ||
    fail "the resume under another -np does not say so: $(head -3 "$T/err")"

rm -rf "$T"
[ $fails -eq 0 ] || { echo "ranks.sh: $fails failure(s)"; exit 1; }
echo "ranks.sh: ok"
