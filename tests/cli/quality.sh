#!/usr/bin/env bash
# quality.sh — hm-eval --teacher (SPEC §11 "Generation quality",
# libconvert/decode/quality.h), every figure against an independent
# computation on ref (each logit one loop: the same bits in every tool):
# - kl and agreement: Python from both models' --dump-logits of the windows;
# - greedy common prefix: hm-generate --temperature 0 of each model;
# - teacher-scored NLL: hm-generate's samples at temperature 1, seed s + i
#   (the same sampler), scored in Python from the teacher's --dump-logits of
#   prompt + continuation;
# - a teacher against itself: KL 0, agreement 1, the whole prefix, the two
#   NLLs equal;
# - bad usage exits 2, too few windows exits 1 naming the file.
# Env: HM_BIN, HM_TMP.
set -u
B="$HM_BIN"
T=$(mktemp -d "${HM_TMP:-/tmp}/cli_quality.XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { "$@" >"$T/out" 2>"$T/err" || { fail "exit $?: $* :: $(cat "$T/err")"; return 1; }; }

head -c 20000 /dev/urandom | base64 > "$T/text.txt"
ok "$B/hm-tokenize" --bytes "$T/text.txt" -o "$T/text.tok"
ok "$B/hm-init" --preset tiny --seed 1 -o "$T/tea.st"
# two students, hedgemambas (decoded with their constant state): one of this
# teacher (close: agreement near 1, long common prefixes) and one of another
# teacher (far), so that no figure passes at a trivial value
ok "$B/hm-init" --preset tiny --seed 2 -o "$T/other.st"
for src in tea other; do
    ok "$B/hm-linearize" "$T/$src.st" --data "$T/text.tok" --steps 4 --batch 2 --seq-len 32 \
        -o "$T/hh.$src.st" -q
    ok "$B/hm-map-ssm" "$T/hh.$src.st" -o "$T/hm.$src.st" -q
done
L=32 P=3 p=8 n=12 s=7
E=(--data "$T/text.tok" --seq-len $L --max-tokens 256 --backend ref --batch 1)
ok "$B/hm-eval" "$T/tea.st" "${E[@]}" --dump-logits "$T/zt.st"
# each prompt: window i's first p ids
python3 - "$T/text.tok" $P $L $p > "$T/prompts" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
w = struct.unpack("<I", b[12:16])[0]
ids = struct.unpack("<%d%s" % ((len(b) - 48) // w, "H" if w == 2 else "I"), b[48:])
P, L, p = map(int, sys.argv[2:])
for i in range(P):
    print(",".join(str(x) for x in ids[i * L:i * L + p]))
PY
# check STUDENT: its figures against hm-generate's ids and Python's sums
check() {
    local st=$1 i=0 pr m
    ok "$B/hm-eval" "$st" "${E[@]}" --teacher "$T/tea.st" --prompts $P --prompt-len $p \
        --new-tokens $n --seed $s --json && cp "$T/out" "$T/q.json"
    ok "$B/hm-eval" "$st" "${E[@]}" --dump-logits "$T/zs.st" -f
    cp "$st" "$T/student.st"
    while read -r pr; do
        for m in student tea; do
            G=("$B/hm-generate" "$T/$m.st" --prompt-ids "$pr" --max-new-tokens $n --ignore-eot
               --ids --backend ref)
            "${G[@]}" --temperature 0 > "$T/greedy.$m.$i" 2>"$T/err" ||
                fail "greedy $m: $(cat "$T/err")"
            "${G[@]}" --temperature 1 --seed $((s + i)) > "$T/cont.$m.$i" 2>"$T/err" ||
                fail "sample $m: $(cat "$T/err")"
            # prompt + continuation as a token file: the teacher's logits of it
            echo "$pr $(cat "$T/cont.$m.$i")" | tr ',' ' ' > "$T/seq.$m.$i.txt"
            ok "$B/hm-tokenize" --ids-in --vocab-size 257 "$T/seq.$m.$i.txt" -f \
                -o "$T/seq.$m.$i.tok"
            ok "$B/hm-eval" "$T/tea.st" --data "$T/seq.$m.$i.tok" --seq-len $((p + n - 1)) \
                --backend ref --dump-logits "$T/score.$m.$i.st" -f
        done
        i=$((i + 1))
    done < "$T/prompts"
    python3 - "$T" $P $p $n <<'PY' || fail "$st: the figures differ from the independent computation"
import array, json, math, struct, sys
d, P, p, n = sys.argv[1], *map(int, sys.argv[2:])
def logits(path):
    b = open(path, "rb").read()
    k = struct.unpack("<Q", b[:8])[0]
    t = json.loads(b[8:8 + k])["logits"]
    a = array.array("f"); a.frombytes(b[8 + k + t["data_offsets"][0]:8 + k + t["data_offsets"][1]])
    V = t["shape"][-1]
    return [a[i:i + V] for i in range(0, len(a), V)]
def lsm(z):
    m = max(z); s = math.fsum(math.exp(x - m) for x in z); return [x - m - math.log(s) for x in z]
def argmax(z):
    return max(range(len(z)), key=lambda i: (z[i], -i))
q = json.load(open(d + "/q.json"))["quality"]
zs, zt = logits(d + "/zs.st"), logits(d + "/zt.st")
kl = agree = 0.0
for a, b in zip(zs, zt):
    la, lb = lsm(a), lsm(b)
    kl += math.fsum(math.exp(y) * (y - x) for x, y in zip(la, lb))
    agree += argmax(a) == argmax(b)
kl /= len(zs); agree /= len(zs)
assert q["positions"] == len(zs), (q["positions"], len(zs))
assert abs(q["kl"] - kl) <= 1e-9 * max(1.0, kl), ("kl", q["kl"], kl)
assert q["agreement"] == agree, ("agreement", q["agreement"], agree)
def ids(path):
    return [int(x) for x in open(path).read().split()]
pref = sum(next((k for k, (x, y) in enumerate(zip(ids("%s/greedy.student.%d" % (d, i)),
                ids("%s/greedy.tea.%d" % (d, i)))) if x != y), n) for i in range(P)) / P
assert abs(q["common_prefix"] - pref) <= 1e-12, ("common_prefix", q["common_prefix"], pref)
for m, key in (("student", "student_nll"), ("tea", "teacher_nll")):
    tot = 0.0
    for i in range(P):
        z = logits("%s/score.%s.%d.st" % (d, m, i))
        seq = [int(x) for x in open("%s/seq.%s.%d.txt" % (d, m, i)).read().split()]
        assert len(seq) == p + n and len(z) == p + n - 1, (len(seq), len(z))
        tot += sum(-lsm(z[k])[seq[k + 1]] for k in range(p - 1, p + n - 1))
    tot /= P * n
    assert abs(q[key] - tot) <= 1e-6 * tot, (key, q[key], tot)
print("ok kl %.6g, agreement %.4f, prefix %.2f, nll %.4f / %.4f" % (kl, agree, pref,
      q["student_nll"], q["teacher_nll"]))
PY
}
check "$T/hm.tea.st"
check "$T/hm.other.st"
# the teacher against itself
ok "$B/hm-eval" "$T/tea.st" "${E[@]}" --teacher "$T/tea.st" --prompts $P --prompt-len $p \
    --new-tokens $n --json &&
python3 - "$T/out" $n <<'PY' || fail "the teacher against itself: $(cat "$T/out")"
import json, sys
q = json.load(open(sys.argv[1]))["quality"]
assert q["kl"] == 0 and q["agreement"] == 1 and q["common_prefix"] == int(sys.argv[2]), q
assert q["student_nll"] == q["teacher_nll"], q
print("ok the teacher against itself")
PY
# bad usage (exit 2) and too few windows (exit 1)
usage() {
    "$B/hm-eval" "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    [ $rc -eq 2 ] || fail "exit $rc (want 2): $* :: $(cat "$T/err")"
}
usage "$T/hm.tea.st" "${E[@]}" --prompts 2
usage "$T/hm.tea.st" "${E[@]}" --teacher "$T/tea.st" --prompt-len 40
usage "$T/hm.tea.st" --data - --seq-len 32 --teacher "$T/tea.st" < "$T/text.tok"
"$B/hm-eval" "$T/hm.tea.st" "${E[@]}" --teacher "$T/tea.st" --prompts 9 >"$T/out" 2>"$T/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "text.tok" "$T/err" && grep -q "prompts 9" "$T/err"; then
    echo "ok too few windows for the prompts: exit 1"
else fail "--prompts 9 of 8 windows: exit $rc, $(cat "$T/err")"; fi
[ $fails -eq 0 ] && echo "quality.sh: ok"
exit $((fails > 0))
