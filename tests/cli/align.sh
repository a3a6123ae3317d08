#!/usr/bin/env bash
# align.sh — stage 1b, `hm-finetune STUDENT --align TEACHER`, on both families:
# the layer-wise loss falls; only mixer tensors change (norms, MLP and
# embeddings are the input's bytes); per-layer losses are logged; a resume
# is bit-exact and refuses another teacher; misuse exits 2 (with
# --kd-teacher) or 1 (a teacher that is not softmax, naming it). The same for
# --align-loss block (whole blocks: MOHAWK's hidden-state alignment).
# Env: HM_BIN, HM_TMP.
set -u
B="$HM_BIN"
T="${HM_TMP:-/tmp}/cli_align.$$"
rm -rf "$T" && mkdir -p "$T"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { "$@" >"$T/out" 2>"$T/err" || { fail "exit $?: $* :: $(cat "$T/err")"; return 1; }; }
# exits WANT_RC WANT_TEXT CMD...: exit status WANT_RC and stderr holding WANT_TEXT
exits() {
    local rc_want="$1" want="$2"; shift 2
    "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    [ $rc -eq "$rc_want" ] || fail "exit $rc (want $rc_want): $*"
    grep -q -- "$want" "$T/err" || fail "stderr lacks '$want': $(cat "$T/err")"
}
# tensors A B: "NAME same" / "NAME differ" per tensor of A, by the xxh3 of its
# bytes (hm-inspect --tensors --hash: name ... group hash)
tensors() {
    "$B/hm-inspect" --tensors --hash "$1" | awk 'NF >= 6 && $1 ~ /\./ { print $1, $NF }' > "$T/ha"
    "$B/hm-inspect" --tensors --hash "$2" | awk 'NF >= 6 && $1 ~ /\./ { print $1, $NF }' > "$T/hb"
    awk 'NR == FNR { h[$1] = $2; next } { print $1, (h[$1] == $2 ? "same" : "differ") }' \
        "$T/hb" "$T/ha"
}

for i in $(seq 1 300); do echo "the quick brown fox $i jumps over the lazy dog"; done > "$T/text.txt"
ok "$B/hm-tokenize" --bytes "$T/text.txt" -o "$T/train.tok"
for fam in tiny llama-tiny; do
    ok "$B/hm-init" --preset "$fam" --vocab-size 257 -o "$T/$fam.st" --seed 1 || continue
    # a random mixer (the naive baseline's init) starts far from the teacher;
    # the mapped one starts near it (a random teacher's attention is almost
    # uniform, like the identity feature maps')
    ok "$B/hm-map-ssm" "$T/$fam.st" -o "$T/$fam-init.st" --init random --seed 1
    RUN=(--align "$T/$fam.st" --data "$T/train.tok" --steps 8 --batch 2 --seq-len 32
         --lr 1e-3 --warmup 1 --seed 3 --no-progress -q --threads 1)
    ok "$B/hm-finetune" "$T/$fam-init.st" -o "$T/$fam-1b.st" "${RUN[@]}" --log "$T/$fam.log" ||
        continue
    first=$(head -1 "$T/$fam.log" | sed 's/.*"loss": \([0-9.e-]*\).*/\1/')
    last=$(tail -1 "$T/$fam.log" | sed 's/.*"loss": \([0-9.e-]*\).*/\1/')
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a && a > 0) }' ||
        fail "$fam: the alignment loss did not fall ($first -> $last)"
    layers=$(head -1 "$T/$fam.log" | sed 's/.*"layer_loss": \[\([^]]*\)\].*/\1/' | tr ',' '\n' | wc -l)
    [ "$layers" -ge 2 ] || fail "$fam: no per-layer losses in the log"
    tensors "$T/$fam-init.st" "$T/$fam-1b.st" > "$T/diff"
    [ "$(grep -c ' same$' "$T/diff")" -ge 5 ] || fail "$fam: could not compare the tensors"
    grep -v -E 'attention\.|self_attn\.' "$T/diff" | grep -q ' differ$' &&
        fail "$fam: a tensor outside the mixers changed: $(grep -v -E 'attention\.|self_attn\.' "$T/diff" | grep ' differ$' | head -3)"
    for t in dense A gate_proj conv1d dt_proj feature_map_q; do
        grep -E "(attention|self_attn)\.($t|o_proj)" "$T/diff" | grep -q ' differ$' ||
            fail "$fam: no '$t' tensor trained"
    done
    # resume: stop after 4 steps, resume, equal to the uninterrupted run
    ok "$B/hm-finetune" "$T/$fam-init.st" -o "$T/$fam-r.st" "${RUN[@]}" --stop-after 4
    ok "$B/hm-finetune" "$T/$fam-init.st" -o "$T/$fam-r.st" "${RUN[@]}" --resume
    tensors "$T/$fam-1b.st" "$T/$fam-r.st" > "$T/diff"
    [ -s "$T/diff" ] || fail "$fam: could not compare the tensors"
    grep -q ' differ$' "$T/diff" &&
        fail "$fam: resumed alignment differs from an uninterrupted one"
    # the squared-error loss: falls too; a resume with the other loss is refused
    ok "$B/hm-finetune" "$T/$fam-init.st" -o "$T/$fam-mse.st" "${RUN[@]}" --align-loss mse \
        --log "$T/$fam-mse.log"
    first=$(head -1 "$T/$fam-mse.log" | sed 's/.*"loss": \([0-9.e-]*\).*/\1/')
    last=$(tail -1 "$T/$fam-mse.log" | sed 's/.*"loss": \([0-9.e-]*\).*/\1/')
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a && a > 0) }' ||
        fail "$fam: the mse alignment loss did not fall ($first -> $last)"
    ok "$B/hm-finetune" "$T/$fam-init.st" -o "$T/$fam-m.st" "${RUN[@]}" --align-loss mse --stop-after 2
    exits 1 "align_loss" "$B/hm-finetune" "$T/$fam-init.st" -o "$T/$fam-m.st" "${RUN[@]}" --resume
    # whole blocks (MOHAWK's hidden-state alignment): the loss falls, only the
    # mixers train, a resume equals the uninterrupted run, a resume with mse refused
    ok "$B/hm-finetune" "$T/$fam-init.st" -o "$T/$fam-blk.st" "${RUN[@]}" --align-loss block \
        --log "$T/$fam-blk.log"
    first=$(head -1 "$T/$fam-blk.log" | sed 's/.*"loss": \([0-9.e-]*\).*/\1/')
    last=$(tail -1 "$T/$fam-blk.log" | sed 's/.*"loss": \([0-9.e-]*\).*/\1/')
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a && a > 0) }' ||
        fail "$fam: the block alignment loss did not fall ($first -> $last)"
    tensors "$T/$fam-init.st" "$T/$fam-blk.st" > "$T/diff"
    grep ' differ$' "$T/diff" | grep -vqE "(attention|self_attn)\." &&
        fail "$fam: block alignment trained a tensor outside the mixers"
    ok "$B/hm-finetune" "$T/$fam-init.st" -o "$T/$fam-br.st" "${RUN[@]}" --align-loss block \
        --stop-after 3
    exits 1 "align_loss" "$B/hm-finetune" "$T/$fam-init.st" -o "$T/$fam-br.st" "${RUN[@]}" \
        --align-loss mse --resume
    ok "$B/hm-finetune" "$T/$fam-init.st" -o "$T/$fam-br.st" "${RUN[@]}" --align-loss block --resume
    tensors "$T/$fam-blk.st" "$T/$fam-br.st" > "$T/diff"
    grep -q ' differ$' "$T/diff" && fail "$fam: a resumed block alignment differs"
    # another teacher (another seed) is refused before any work, naming the
    # first frozen tensor that differs (issue 32: it used to train)
    ok "$B/hm-init" --preset "$fam" --vocab-size 257 -o "$T/$fam-other.st" --seed 2
    ok "$B/hm-finetune" "$T/$fam-init.st" -o "$T/$fam-s.st" "${RUN[@]}" --stop-after 2
    exits 1 "is not the teacher of" "$B/hm-finetune" "$T/$fam-init.st" -o "$T/$fam-s.st" \
        "${RUN[@]/$fam.st/$fam-other.st}" --resume
    exits 1 "is not the teacher of" "$B/hm-finetune" "$T/$fam-init.st" -o "$T/$fam-o.st" \
        "${RUN[@]/$fam.st/$fam-other.st}"
    [ ! -e "$T/$fam-o.st" ] || fail "$fam: an alignment to another teacher wrote its output"
done
# misuse
exits 2 "cos, mse or block" "$B/hm-finetune" "$T/tiny-init.st" -o "$T/x.st" --align "$T/tiny.st" \
    --align-loss attn-ce --data "$T/train.tok" --steps 1
exits 2 "needs --align" "$B/hm-finetune" "$T/tiny-init.st" -o "$T/x.st" --align-loss mse \
    --data "$T/train.tok" --steps 1
exits 2 "separate runs" "$B/hm-finetune" "$T/tiny-init.st" -o "$T/x.st" --align "$T/tiny.st" \
    --kd-teacher "$T/tiny.st" --kd-weight 1 --data "$T/train.tok" --steps 1
exits 1 "$T/tiny-init.st" "$B/hm-finetune" "$T/tiny-init.st" -o "$T/x.st" --align "$T/tiny-init.st" \
    --data "$T/train.tok" --steps 1 --batch 1 --seq-len 8
exits 1 "is not the teacher of" "$B/hm-finetune" "$T/tiny-init.st" -o "$T/x.st" \
    --align "$T/llama-tiny.st" --data "$T/train.tok" --steps 1 --batch 1 --seq-len 8
# the student itself as its teacher (a copy too), a student without a
# student mixer, and the KD/CE flags that stage 1b would ignore
cp "$T/tiny-init.st" "$T/tiny-copy.st"
exits 1 "is the student itself" "$B/hm-finetune" "$T/tiny-init.st" -o "$T/x.st" \
    --align "$T/tiny-copy.st" --data "$T/train.tok" --steps 1 --batch 1 --seq-len 8
exits 1 "needs a student" "$B/hm-finetune" "$T/tiny.st" -o "$T/x.st" --align "$T/tiny.st" \
    --data "$T/train.tok" --steps 1 --batch 1 --seq-len 8
exits 2 "--ce-weight does not apply" "$B/hm-finetune" "$T/tiny-init.st" -o "$T/x.st" \
    --align "$T/tiny.st" --ce-weight 0.5 --data "$T/train.tok" --steps 1
exits 2 "--kd-temperature does not apply" "$B/hm-finetune" "$T/tiny-init.st" -o "$T/x.st" \
    --align "$T/tiny.st" --kd-temperature 2 --data "$T/train.tok" --steps 1
[ ! -e "$T/x.st" ] || fail "a refused run wrote its output"
rm -rf "$T"
[ $fails -eq 0 ] && echo "align: all passed" || { echo "align: $fails failed"; exit 1; }
