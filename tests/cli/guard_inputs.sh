#!/usr/bin/env bash
# guard_inputs.sh — nothing a user gives hm is destroyed, and error paths
# tell the truth: the files a training run reads (checkpoint, --data,
# --val-data) are never its --log or -o, with or without -f; -f never
# replaces a device; a missing output directory is found before any work;
# non-finite weights are warned about and reported as JSON null; a
# tokenizer.json cannot make hm allocate tables for ids its size cannot hold.
# Every input's bytes are compared before and after. Env: HM_BIN, HM_TMP.
set -u
B="$HM_BIN"
T="${HM_TMP:-/tmp}/cli_guard_inputs.$$"
rm -rf "$T" && mkdir -p "$T"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { "$@" >"$T/out" 2>"$T/err" || { fail "exit $?: $* :: $(cat "$T/err")"; return 1; }; }
refused() {
    local want="$1"; shift
    timeout 60 "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    [ $rc -eq 1 ] || fail "exit $rc (want 1): $*"
    grep -q -- "$want" "$T/err" || fail "stderr lacks '$want': $(cat "$T/err")"
}
sum() { sha256sum "$@" | cut -d' ' -f1; }

for i in $(seq 1 300); do echo "line $i of some text to train on"; done > "$T/text.txt"
ok "$B/hm-tokenize" --bytes "$T/text.txt" -o "$T/train.tok"
cp "$T/train.tok" "$T/val.tok"
ok "$B/hm-init" --preset tiny -o "$T/m.st"
before=$(sum "$T/m.st" "$T/train.tok" "$T/val.tok")
RUN=(--data "$T/train.tok" --val-data "$T/val.tok" --steps 2 --batch 2 --seq-len 16 --no-progress -q)

refused "is the input checkpoint" "$B/hm-finetune" "$T/m.st" -o "$T/x.st" -f --log "$T/m.st" "${RUN[@]}"
refused "is --data" "$B/hm-finetune" "$T/m.st" -o "$T/x.st" -f --log "$T/train.tok" "${RUN[@]}"
refused "is --val-data" "$B/hm-finetune" "$T/m.st" -o "$T/val.tok" -f "${RUN[@]}"
refused "is --data" "$B/hm-finetune" "$T/m.st" -o "$T/train.tok" -f "${RUN[@]}"
refused "is the input" "$B/hm-finetune" "$T/m.st" -o "$T/m.st" -f "${RUN[@]}"
ln -s "$T/m.st" "$T/link.st"
refused "is the input checkpoint" "$B/hm-finetune" "$T/m.st" -o "$T/x.st" -f --log "$T/link.st" \
    "${RUN[@]}"
refused "is the input checkpoint" "$B/hm-linearize" "$T/m.st" -o "$T/x.st" -f --log "$T/m.st" \
    "${RUN[@]}"
cp "$T/m.st" "$T/teacher.st"
refused "kd-teacher" "$B/hm-finetune" "$T/m.st" -o "$T/teacher.st" -f --kd-teacher "$T/teacher.st" --kd-weight 1 \
    "${RUN[@]}"
refused "kd-teacher" "$B/hm-finetune" "$T/m.st" -o "$T/x.st" -f --log "$T/teacher.st" \
    --kd-teacher "$T/teacher.st" --kd-weight 1 "${RUN[@]}"
ok "$B/hm-init" --preset tiny -n --json
cp "$T/out" "$T/cfg.json"
refused "is the --config" "$B/hm-init" --config "$T/cfg.json" -o "$T/cfg.json" -f
cmp -s "$T/m.st" "$T/teacher.st" || fail "the --kd-teacher changed"
[ "$(sum "$T/m.st" "$T/train.tok" "$T/val.tok")" = "$before" ] || fail "an input changed"
[ ! -e "$T/x.st" ] || fail "a refused run wrote its output"

# the files inside an input folder (a shard, model.safetensors) are inputs too
mkdir -p "$T/hf"
ok "$B/hm-init" --preset tiny -o "$T/hf/model.safetensors"
hf_before=$(sum "$T/hf/model.safetensors")
refused "input folder" "$B/hm-map-ssm" "$T/hf" -o "$T/hf/model.safetensors" -f
cp "$T/m.st" "$T/hf/model-00002-of-00002.safetensors"
refused "input folder" "$B/hm-map-ssm" "$T/hf" -o "$T/hf/model-00002-of-00002.safetensors" -f
refused "input folder" "$B/hm-map-ssm" "$T/hf" -o "$T/hf/config.json" -f
rm "$T/hf/model-00002-of-00002.safetensors"
refused "input folder" "$B/hm-finetune" "$T/hf" -o "$T/hf/model.safetensors" -f "${RUN[@]}"
[ "$(sum "$T/hf/model.safetensors")" = "$hf_before" ] || fail "the folder's model changed"

# devices are never read as inputs; a FIFO without a writer never blocks
# (it reads as empty); a pipe is a stream, capped
refused "is a device" "$B/hm-finetune" "$T/m.st" -o "$T/z.st" --data /dev/zero --steps 1 \
    --batch 1 --seq-len 8 --no-progress -q
refused "is a device" "$B/hm-inspect" /dev/zero
refused "is a device" "$B/hm-eval" /dev/zero --data "$T/val.tok" --seq-len 8
refused "is a device" "$B/hm-tokenize" --tokenizer /dev/zero --print-ids "$T/text.txt"
refused "is a device" "$B/hm-tokenize" --bytes /dev/zero -o "$T/z.tok"
mkfifo "$T/nowriter"
refused "nowriter" "$B/hm-inspect" "$T/nowriter"
refused "nowriter" "$B/hm-eval" "$T/m.st" --data "$T/nowriter" --seq-len 8
refused "nowriter" "$B/hm-tokenize" --tokenizer "$T/nowriter" --print-ids "$T/text.txt"
refused "nowriter" "$B/hm-finetune" "$T/nowriter" -o "$T/z.st" "${RUN[@]}"
[ -p "$T/nowriter" ] || fail "the FIFO was touched"
"$B/hm-inspect" <(cat "$T/m.st") >"$T/out" 2>"$T/err" || fail "a checkpoint through a pipe: $(cat "$T/err")"

# devices and FIFOs are never replaced, even with -f
refused "not a regular file" "$B/hm-finetune" "$T/m.st" -o /dev/null -f "${RUN[@]}"
[ -c /dev/null ] || fail "/dev/null is no longer a character device"
mkfifo "$T/fifo"
refused "not a regular file" "$B/hm-finetune" "$T/m.st" -o "$T/x.st" -f --log "$T/fifo" "${RUN[@]}"
[ -p "$T/fifo" ] || fail "the FIFO was replaced"
refused "not a regular file" "$B/hm-finetune" "$T/m.st" -o "$T/x.st" -f --log /dev/full "${RUN[@]}"

# a missing output directory is found before training starts
refused "does not exist" "$B/hm-finetune" "$T/m.st" -o "$T/no/such/dir/x.st" "${RUN[@]}"
refused "does not exist" "$B/hm-finetune" "$T/m.st" -o "$T/x.st" --log "$T/nodir/log.jsonl" \
    "${RUN[@]}"

# non-finite weights: a warning naming the tensor, and JSON null (valid JSON)
cp "$T/m.st" "$T/nan.st"
python3 - "$T/nan.st" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
b[-4:] = bytes([0x00, 0x00, 0xc0, 0x7f])  # the last float: NaN
open(p, 'wb').write(b)
PY
"$B/hm-eval" "$T/nan.st" --data "$T/val.tok" --seq-len 16 --json >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 0 ] || fail "hm-eval on NaN weights exit $rc"
grep -q "non-finite" "$T/err" || fail "no warning for NaN weights: $(cat "$T/err")"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["ppl"] is None, d' "$T/out" ||
    fail "hm-eval --json on NaN weights is not valid JSON with ppl null: $(cat "$T/out")"

# a tokenizer.json id its size cannot hold is refused, quickly, in bounded memory
cat > "$T/tok.json" <<'JS'
{"version": "1.0", "added_tokens": [], "normalizer": null,
 "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
 "post_processor": null, "decoder": {"type": "ByteLevel"},
 "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
           "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
           "vocab": {"a": 0, "b": 300000000}, "merges": []}}
JS
# (1 GB of address space; ASan builds reserve terabytes for their shadow)
if case "$(ldd "$B/hm-tokenize" 2>/dev/null)" in *libasan*) true ;; *) false ;; esac; then VLIMIT=unlimited; else VLIMIT=1000000; fi
refused "larger than a file" bash -c "ulimit -v $VLIMIT; "'exec "$0" "$@"' "$B/hm-tokenize" \
    --tokenizer "$T/tok.json" --print-ids "$T/text.txt"
# two writers of one output: the second to finish does not silently win
mkfifo "$T/in.fifo"
"$B/hm-tokenize" --bytes - -o "$T/race.tok" < "$T/in.fifo" > "$T/race.out" 2> "$T/race.err" &
pid=$!
exec 3> "$T/in.fifo"
echo "hello world" >&3
for i in $(seq 1 200); do ls -a "$T" | grep -q '^\.race\.tok\.tmp\.' && break; sleep 0.05; done
ls -a "$T" | grep -q '^\.race\.tok\.tmp\.' || fail "the writer's temporary file never appeared"
echo "the other writer" > "$T/race.tok"
exec 3>&-
wait $pid
rc=$?
[ $rc -eq 1 ] || fail "a run whose output appeared meanwhile: exit $rc (want 1)"
grep -q "appeared while this run was writing" "$T/race.err" || fail "no race message: $(cat "$T/race.err")"
[ "$(cat "$T/race.tok")" = "the other writer" ] || fail "the other writer's output was replaced"
ls -a "$T" | grep -q '^\.race\.tok\.tmp\.' && fail "the temporary file was left behind"

# one output, two runs (issue: two writers both win): a run holds its output
# for its whole life (a lock beside it), so a second run of the same output
# fails at once naming it, with -f too, while the first — held up here
# reading its input from a FIFO — still finishes and wins. Every tool that
# writes an output, folder bundles included.
# race OUT FEED CMD...: CMD reads FEED from stdin ("-") and writes OUT
race() {
    local out="$1" feed="$2"; shift 2
    rm -f "$T/race.fifo" && mkfifo "$T/race.fifo"
    "$@" < "$T/race.fifo" > "$T/r1.out" 2> "$T/r1.err" &
    local pid=$!
    exec 4> "$T/race.fifo"
    for i in $(seq 1 400); do [ -e "$out.lock" ] && break; sleep 0.05; done
    [ -e "$out.lock" ] || fail "the first writer holds no lock on '$out': $*"
    for f in "" -f; do
        "$@" $f < /dev/null > "$T/r2.out" 2> "$T/r2.err"
        local rc=$?
        [ $rc -eq 1 ] || fail "a second writer of '$out' ($f): exit $rc (want 1): $*"
        grep -q "cannot write '$out': another run (pid $pid) is writing it" "$T/r2.err" ||
            fail "the second writer's message: $(cat "$T/r2.err")"
    done
    cat "$feed" >&4
    exec 4>&-
    wait $pid
    local rc1=$?
    [ $rc1 -eq 0 ] || fail "the first writer of '$out': exit $rc1: $(cat "$T/r1.err")"
    [ -e "$out" ] || fail "the first writer wrote no '$out'"
    [ -e "$out.lock" ] && fail "'$out.lock' left behind by a finished run"
    return 0
}
ok "$B/hm-linearize" "$T/m.st" -o "$T/hh0.st" --data "$T/train.tok" --steps 0 -q
race "$T/w-init.st" "$T/cfg.json" "$B/hm-init" --config - -o "$T/w-init.st" -q
race "$T/w-map.st" "$T/hh0.st" "$B/hm-map-ssm" - -o "$T/w-map.st" -q
race "$T/w-tok.tok" "$T/text.txt" "$B/hm-tokenize" --bytes - -o "$T/w-tok.tok" -q
race "$T/w-dump.st" "$T/m.st" "$B/hm-eval" - --data "$T/val.tok" --seq-len 16 --max-tokens 32 \
    --dump-logits "$T/w-dump.st"
race "$T/w-pack" "$T/m.st" "$B/hm-pack" - --bytes -o "$T/w-pack" -q
race "$T/w-pack.tar" "$T/m.st" "$B/hm-pack" - --bytes -o "$T/w-pack.tar" -q
# hm-import reads its file by offset (no stream): a lock held by another
# process stands for a running writer; killed (-9), its lock file stays but
# holds no lock, and the next run reuses it
printf 'x' > "$T/fake.bin"
# (the holder waits for the lock: the probe below holds it for an instant, and
# a non-blocking try there would make the holder give up under load)
(exec 9> "$T/w-imp.st.lock"; flock 9 && exec sleep 60) &
holder=$!
held=0
for i in $(seq 1 400); do flock -n "$T/w-imp.st.lock" true || { held=1; break; }; sleep 0.05; done
[ $held -eq 1 ] || fail "the lock holder never took the lock"
refused "cannot write '$T/w-imp.st': another run" "$B/hm-import" llama2c "$T/fake.bin" \
    -o "$T/w-imp.st" -f
kill -9 $holder
wait $holder 2>/dev/null
[ $? -eq 137 ] || fail "the lock holder was not killed"
[ -e "$T/w-imp.st.lock" ] || fail "no stale lock file to test with"
refused "cannot read" "$B/hm-import" llama2c "$T/fake.bin" -o "$T/w-imp.st" -f
grep -q "another run" "$T/err" && fail "a killed holder's lock blocked: $(cat "$T/err")"
[ -e "$T/w-imp.st.lock" ] && fail "the stale lock file was not cleared by the next run"

# output names up to NAME_MAX (255 bytes) work: the temporary and lock names
# beside them are shortened to fit; a file where a folder should be is named
long=$(printf 'n%.0s' $(seq 1 252)).st   # 255 bytes
base=$(printf 'b%.0s' $(seq 1 236))        # + suffixes: 239-241 bytes
ok "$B/hm-init" --preset tiny -o "$T/$long" -q
ok "$B/hm-init" --preset tiny -o "$T/$long" -q -f
ok "$B/hm-map-ssm" "$T/hh0.st" -o "$T/$long" -q -f
ok "$B/hm-pack" "$T/hh0.st" --bytes -o "$T/$base.tar" -q
ok "$B/hm-pack" "$T/hh0.st" --bytes -o "$T/$base.d" -q
ok "$B/hm-pack" "$T/hh0.st" --bytes -o "$T/$base.d" -q -f
ok "$B/hm-tokenize" --bytes "$T/text.txt" -o "$T/$base.tok" -q
ok "$B/hm-finetune" "$T/m.st" -o "$T/$base.st" "${RUN[@]}"
ok "$B/hm-eval" "$T/m.st" --data "$T/val.tok" --seq-len 16 --max-tokens 32 --dump-logits "$T/$long" -f
[ -s "$T/$base.st.state" ] || fail "no state beside a long output name"
ls -a "$T" | grep -q '\.lock$\|\.tmp\.' && fail "temporary or lock files left: $(ls -a "$T" | grep '\.lock$\|\.tmp\.')"
for tool in "hm-init --preset tiny" "hm-map-ssm $T/hh0.st" "hm-pack $T/hh0.st --bytes"; do
    refused "cannot write '$T/m.st/x': '$T/m.st' is not a directory" $B/$tool -o "$T/m.st/x"
    refused "'$T/m.st' is not a directory" $B/$tool -o "$T/m.st/deeper/x"
done
refused "cannot write '$T/m.st/x.st': '$T/m.st' is not a directory" "$B/hm-finetune" "$T/m.st" \
    -o "$T/m.st/x.st" "${RUN[@]}"
refused "'$T/m.st' is not a directory" "$B/hm-tokenize" --bytes "$T/text.txt" -o "$T/m.st/x.tok"

# a checkpoint's tensors must be the ones its config describes: a hedgemamba
# file whose hm.config says gpt_neox is refused by every loader, naming a
# tensor (it used to train as a teacher, dropping 48 tensors without a word)
ok "$B/hm-map-ssm" "$T/hh0.st" -o "$T/hm0.st" -q
python3 - "$T/hm0.st" "$T/liar.st" <<'PY'
import json, struct, sys
b = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n])
c = json.loads(h['__metadata__']['hm.config'])
c['arch'] = 'gpt_neox'
for k in ('components', 'conv_width', 'feature_dim'):
    c.pop(k, None)
h['__metadata__']['hm.config'] = json.dumps(c)
hdr = json.dumps(h).encode()
hdr += b' ' * (-len(hdr) % 8)
open(sys.argv[2], 'wb').write(struct.pack('<Q', len(hdr)) + hdr + b[8 + n:])
PY
L="$T/liar.st"
refused "not part of a gpt_neox model" "$B/hm-finetune" "$L" -o "$T/x.st" "${RUN[@]}"
refused "not part of a gpt_neox model" "$B/hm-finetune" "$T/m.st" -o "$T/x.st" "${RUN[@]}" \
    --kd-teacher "$L" --kd-weight 1
refused "not part of a gpt_neox model" "$B/hm-linearize" "$L" -o "$T/x.st" "${RUN[@]}"
refused "not part of a gpt_neox model" "$B/hm-map-ssm" "$L" -o "$T/x.st"
refused "not part of a gpt_neox model" "$B/hm-pack" "$L" --bytes -o "$T/x.tar"
refused "not part of a gpt_neox model" "$B/hm-eval" "$L" --data "$T/val.tok" --seq-len 16
refused "not part of a gpt_neox model" "$B/hm-generate" "$L" --prompt-ids 1,2 --max-new-tokens 2
grep -q "conv1d\|dt_proj\|gate_proj\|'.*\.A'\|\.D'" "$T/err" || fail "no tensor named: $(cat "$T/err")"
[ ! -e "$T/x.st" ] && [ ! -e "$T/x.tar" ] || fail "a refused load wrote an output"

# hm-verify mapping of a thing against itself proves nothing: exit 2 (could
# not check) with the reason — the same file, a copy, or not a stage-1 →
# stage-2 pair (two teachers, two hedgehogs); the real pair is equivalent
verify2() {
    local want="$1"; shift
    "$B/hm-verify" mapping "$@" --random-tokens 8 >"$T/out" 2>"$T/err"
    local rc=$?
    [ $rc -eq 2 ] || fail "hm-verify mapping $*: exit $rc (want 2)"
    grep -q -- "$want" "$T/err" || fail "hm-verify mapping $*: stderr lacks '$want': $(cat "$T/err")"
}
cp "$T/hh0.st" "$T/hh0-copy.st"
ln -sf "$T/hh0.st" "$T/hh0-link.st"
ok "$B/hm-init" --preset tiny -o "$T/m2.st" --seed 4
verify2 "same file" "$T/hh0.st" "$T/hh0.st"
verify2 "same file" "$T/hh0.st" "$T/hh0-link.st"
verify2 "same bytes" "$T/hh0.st" "$T/hh0-copy.st"
verify2 "not a stage-1" "$T/m.st" "$T/m2.st"
verify2 "not a stage-1" "$T/hm0.st" "$T/hh0.st"
ok "$B/hm-verify" mapping "$T/hh0.st" "$T/hm0.st" --random-tokens 8

# leftovers of killed runs are removed by the next run of the same output
# (a dead pid's), never a live run's
touch "$T/.x.st.tmp.999999999.AbCdEf" "$T/.x.st.tmp.$$.AbCdEf"
ok "$B/hm-init" --preset tiny -o "$T/x.st"
[ ! -e "$T/.x.st.tmp.999999999.AbCdEf" ] || fail "a dead run's leftover was not removed"
[ -e "$T/.x.st.tmp.$$.AbCdEf" ] || fail "a live run's temporary file was removed"
# hm-verify follows cmp(1): a result it cannot write is "could not check"
ok "$B/hm-linearize" "$T/m.st" -o "$T/hh.st" --data "$T/train.tok" --steps 0 -q
"$B/hm-verify" recurrent "$T/hh.st" --random-tokens 8 > /dev/full 2>"$T/err"
rc=$?
[ $rc -eq 2 ] || fail "hm-verify > /dev/full: exit $rc (want 2)"
: > "$T/empty.txt"
refused "file is empty" "$B/hm-tokenize" --bytes "$T/empty.txt" -o "$T/e.tok"
grep -q "multibyte\|wide character" "$T/err" && fail "a stale errno in: $(cat "$T/err")"
rm -rf "$T"
[ $fails -eq 0 ] || { echo "guard_inputs.sh: $fails failure(s)"; exit 1; }
echo "guard_inputs.sh: ok"
