#!/usr/bin/env bash
# mpi.sh — data-parallel runs under MPI (contract §10, README "Training on
# several machines"): 2 processes equal 1 process with the accumulation
# doubled, bit for bit (every tensor of the output and the state, every
# logged loss), for the teacher, stage 1 and stage 2 of both families and for
# hm-eval; a killed process ends the run with no partial output and a state
# that resumes; a state resumes under another number of processes; tools
# that run as one process refuse a launcher. Equal bits need equal --threads
# per process (the fast kernels split some sums by thread), so every run
# here takes --threads 1.
# Env: HM_BIN, HM_TMP, HM_HAVE_MPI (the build's, from CMake).
set -u
B="$HM_BIN"
T="${HM_TMP:-/tmp}/cli_mpi.$$"
rm -rf "$T" && mkdir -p "$T"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { "$@" >"$T/out" 2>"$T/err" || { fail "exit $?: $* :: $(tail -5 "$T/err")"; return 1; }; }

# tools that run as one process refuse a launcher, in every build (no MPI
# starts: the launcher's environment is enough)
"$B/hm-init" --preset tiny -o "$T/teacher.st" -q 2>/dev/null
OMPI_COMM_WORLD_SIZE=2 "$B/hm-map-ssm" "$T/teacher.st" -o "$T/x.st" >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 2 ] || fail "hm-map-ssm under a 2-process launcher: exit $rc, want 2"
grep -q "runs as one process" "$T/err" || fail "hm-map-ssm's refusal: $(cat "$T/err")"
[ ! -e "$T/x.st" ] || fail "a refused hm-map-ssm wrote its output"

if [ "${HM_HAVE_MPI:-OFF}" != "ON" ]; then
    # a build without MPI refuses to run as N copies
    OMPI_COMM_WORLD_SIZE=2 "$B/hm-finetune" "$T/teacher.st" -o "$T/y.st" --data /dev/null \
        --steps 1 >"$T/out" 2>"$T/err"
    rc=$?
    [ $rc -eq 2 ] && grep -q "this build has no MPI" "$T/err" ||
        fail "hm-finetune without MPI under a launcher: exit $rc: $(cat "$T/err")"
    echo "SKIP: built without MPI (HM_MPI): only the refusals were checked"
    [ $fails -eq 0 ] || exit 1
    exit 0
fi
command -v mpirun >/dev/null || { echo "FAIL: an MPI build but no mpirun"; exit 1; }
# ASan builds: Open MPI's own allocations are not ours to report
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
MPI=(mpirun --oversubscribe --allow-run-as-root -x ASAN_OPTIONS)
mpi() { local n="$1"; shift; ok "${MPI[@]}" -np "$n" "$@"; }

for i in $(seq 1 300); do echo "some words to train on, line $i of the test text"; done > "$T/text.txt"
ok "$B/hm-tokenize" --bytes "$T/text.txt" -o "$T/train.tok"
head -c 4000 "$T/text.txt" > "$T/val.txt"
ok "$B/hm-tokenize" --bytes "$T/val.txt" -o "$T/val.tok"
ok "$B/hm-init" --preset llama-tiny -o "$T/lteacher.st"

# the tensors (names, dtypes, shapes, xxh3 of the bytes) of a checkpoint or state
tensors() { "$B/hm-inspect" --tensors --hash "$1" 2>&1 | sed -n '/^tensors:/,$p'; }
same() {
    local what="$1" a="$2" b="$3"
    [ -s "$a" ] && [ -s "$b" ] || { fail "$what: missing $a or $b"; return; }
    [ "$(tensors "$a" | wc -l)" -gt 4 ] || fail "$what: no tensors listed for $a"
    [ "$(tensors "$a")" = "$(tensors "$b")" ] || fail "$what: tensors of $(basename "$a") and $(basename "$b") differ"
}
# the log without its timings
steps() { sed 's/, "tokens_per_s": [^,}]*//' "$1"; }
same_log() {
    [ "$(steps "$2")" = "$(steps "$3")" ] && [ -s "$2" ] || fail "$1: the logs differ"
}

RUN=(--data "$T/train.tok" --val-data "$T/val.tok" --val-every 2 --steps 4 --batch 2
     --seq-len 32 --lr 1e-3 --warmup 1 --threads 1 -q)
# teacher, stage 1, stage 2 on both families; accumulation 1 and 2 per process
for fam in neox llama; do
    t="$T/teacher.st"; [ $fam = llama ] && t="$T/lteacher.st"
    for a in 1 2; do
        g=$((2 * a))
        ok "$B/hm-finetune" "$t" -o "$T/$fam.ft1.$a.st" "${RUN[@]}" --grad-accum $g --log "$T/$fam.ft1.$a.log"
        mpi 2 "$B/hm-finetune" "$t" -o "$T/$fam.ft2.$a.st" "${RUN[@]}" --grad-accum $a --log "$T/$fam.ft2.$a.log"
        same "$fam teacher, 2 x accum $a vs 1 x accum $g" "$T/$fam.ft1.$a.st" "$T/$fam.ft2.$a.st"
        same "$fam teacher state" "$T/$fam.ft1.$a.st.state" "$T/$fam.ft2.$a.st.state"
        same_log "$fam teacher, accum $a" "$T/$fam.ft1.$a.log" "$T/$fam.ft2.$a.log"
    done
    ok "$B/hm-linearize" "$t" -o "$T/$fam.s1a.st" "${RUN[@]}" --grad-accum 2 --log "$T/$fam.s1a.log"
    mpi 2 "$B/hm-linearize" "$t" -o "$T/$fam.s1b.st" "${RUN[@]}" --log "$T/$fam.s1b.log"
    same "$fam stage 1" "$T/$fam.s1a.st" "$T/$fam.s1b.st"
    same_log "$fam stage 1" "$T/$fam.s1a.log" "$T/$fam.s1b.log"
    ok "$B/hm-map-ssm" "$T/$fam.s1a.st" -o "$T/$fam.hm.st"
    ok "$B/hm-finetune" "$T/$fam.hm.st" -o "$T/$fam.s2a.st" "${RUN[@]}" --grad-accum 2 --log "$T/$fam.s2a.log"
    mpi 2 "$B/hm-finetune" "$T/$fam.hm.st" -o "$T/$fam.s2b.st" "${RUN[@]}" --log "$T/$fam.s2b.log"
    same "$fam stage 2" "$T/$fam.s2a.st" "$T/$fam.s2b.st"
    same_log "$fam stage 2" "$T/$fam.s2a.log" "$T/$fam.s2b.log"
    # evaluation: the windows shared, the numbers of one process
    for m in "$t" "$T/$fam.s2a.st"; do
        EV=(--data "$T/train.tok" --seq-len 32 --batch 3 --threads 1 --json)
        "$B/hm-eval" "$m" "${EV[@]}" 2>"$T/err" | sed 's/, "tokens_per_s": [^,}]*//' > "$T/e1"
        "${MPI[@]}" -np 2 "$B/hm-eval" "$m" "${EV[@]}" 2>"$T/err" |
            sed 's/, "tokens_per_s": [^,}]*//' > "$T/e2"
        grep -q '"mean_nll": [0-9]' "$T/e1" && cmp -s "$T/e1" "$T/e2" ||
            fail "$fam eval of $(basename "$m"): $(cat "$T/e1") vs $(cat "$T/e2")"
    done
done

# resume under another number of processes: 2 processes stop after 2 steps;
# 1 process (accum 2) and 4 processes (2 x accum 1 ... as 4 x 1 with accum
# halved) continue; both equal the uninterrupted run
ok "$B/hm-finetune" "$T/teacher.st" -o "$T/r_full.st" "${RUN[@]}" --grad-accum 4 --log "$T/r_full.log"
for n in 1 4; do
    mpi 2 "$B/hm-finetune" "$T/teacher.st" -o "$T/r$n.st" "${RUN[@]}" --grad-accum 2 --stop-after 2 --log "$T/r$n.log"
    if [ $n = 1 ]; then
        ok "$B/hm-finetune" "$T/teacher.st" -o "$T/r$n.st" "${RUN[@]}" --grad-accum 4 --resume --log "$T/r$n.log"
    else
        mpi 4 "$B/hm-finetune" "$T/teacher.st" -o "$T/r$n.st" "${RUN[@]}" --grad-accum 1 --resume --log "$T/r$n.log"
    fi
    same "2 processes resumed in $n" "$T/r_full.st" "$T/r$n.st"
    same_log "2 processes resumed in $n" "$T/r_full.log" "$T/r$n.log"
done
# ZeRO-1: the moments sharded, the same bits (output, state, log) for 2 and
# 4 processes; its state resumes without ZeRO-1 in 1 process
ok "$B/hm-finetune" "$T/teacher.st" -o "$T/z_full.st" "${RUN[@]}" --grad-accum 4 --log "$T/z_full.log"
mpi 2 "$B/hm-finetune" "$T/teacher.st" -o "$T/z2.st" "${RUN[@]}" --grad-accum 2 --zero1 --log "$T/z2.log"
mpi 4 "$B/hm-finetune" "$T/teacher.st" -o "$T/z4.st" "${RUN[@]}" --grad-accum 1 --zero1 --log "$T/z4.log"
for n in 2 4; do
    same "ZeRO-1 on $n processes" "$T/z_full.st" "$T/z$n.st"
    same "ZeRO-1 on $n processes: state" "$T/z_full.st.state" "$T/z$n.st.state"
    same_log "ZeRO-1 on $n processes" "$T/z_full.log" "$T/z$n.log"
done
mpi 2 "$B/hm-finetune" "$T/teacher.st" -o "$T/zr.st" "${RUN[@]}" --grad-accum 2 --zero1 --stop-after 2
mpi 4 "$B/hm-finetune" "$T/teacher.st" -o "$T/zr.st" "${RUN[@]}" --grad-accum 1 --zero1 --resume
same "ZeRO-1 2 processes resumed in 4" "$T/z_full.st" "$T/zr.st"
mpi 2 "$B/hm-finetune" "$T/teacher.st" -o "$T/zs.st" "${RUN[@]}" --grad-accum 2 --zero1 --stop-after 2
ok "$B/hm-finetune" "$T/teacher.st" -o "$T/zs.st" "${RUN[@]}" --grad-accum 4 --resume
same "ZeRO-1 2 processes resumed in 1 without it" "$T/z_full.st" "$T/zs.st"

# another global batch is refused, naming it
mpi 2 "$B/hm-finetune" "$T/teacher.st" -o "$T/rb.st" "${RUN[@]}" --grad-accum 2 --stop-after 2
"${MPI[@]}" -np 2 "$B/hm-finetune" "$T/teacher.st" -o "$T/rb.st" "${RUN[@]}" --grad-accum 1 --resume \
    >"$T/out" 2>"$T/err" && fail "a resume with another global batch ran"
grep -q "accum" "$T/err" || fail "the refused resume does not name the accumulation: $(head -3 "$T/err")"

# kill -9 one process: the run ends within a bounded time, leaves no partial
# output, the last saved state resumes and the result is the uninterrupted one
KR=(--data "$T/train.tok" --steps 40 --batch 2 --seq-len 64 --lr 1e-3 --warmup 1 --threads 1
    -q --save-every 2)
ok "$B/hm-finetune" "$T/teacher.st" -o "$T/k_full.st" "${KR[@]}" --grad-accum 2
"${MPI[@]}" -np 2 "$B/hm-finetune" "$T/teacher.st" -o "$T/k.st" "${KR[@]}" --log "$T/k.log" \
    >"$T/kout" 2>"$T/kerr" &
mpipid=$!
for _ in $(seq 1 600); do
    [ -f "$T/k.st.state" ] && [ "$(wc -l < "$T/k.log" 2>/dev/null || echo 0)" -ge 3 ] && break
    sleep 0.1
done
victim=""
for p in $(pgrep -f "hm-finetune.*$T/k.st"); do
    grep -qz '^OMPI_COMM_WORLD_RANK=1$' "/proc/$p/environ" 2>/dev/null && victim=$p
done
if [ -z "$victim" ]; then
    fail "kill test: no process of rank 1 found (the run ended before the kill?)"
    wait $mpipid
else
    kill -9 "$victim"
    t0=$(date +%s)
    while kill -0 $mpipid 2>/dev/null && [ $(($(date +%s) - t0)) -lt 60 ]; do sleep 0.2; done
    if kill -0 $mpipid 2>/dev/null; then
        fail "kill test: the run still runs 60 s after a process was killed"
        pkill -9 -f "hm-finetune.*$T/k.st"
    fi
    wait $mpipid
    rc=$?
    [ $rc -ne 0 ] || fail "kill test: mpirun exited 0 after a process was killed"
    kill -0 "$victim" 2>/dev/null && fail "kill test: the victim still lives"
    done_steps=$(wc -l < "$T/k.log")
    [ "$done_steps" -lt 40 ] || fail "kill test: the run finished all 40 steps: the kill came too late"
    echo "kill test: rank 1 killed after $done_steps logged steps; mpirun exit $rc in $(($(date +%s) - t0)) s"
    ls -a "$T" | grep -q '\.tmp\.' && fail "kill test: temporary files left: $(ls -a "$T" | grep '\.tmp\.')"
    mpi 2 "$B/hm-finetune" "$T/teacher.st" -o "$T/k.st" "${KR[@]}" --resume --log "$T/k.log"
    same "killed, then resumed" "$T/k_full.st" "$T/k.st"
fi

rm -rf "$T"
[ $fails -eq 0 ] || { echo "mpi.sh: $fails failure(s)"; exit 1; }
echo "mpi.sh: ok"
