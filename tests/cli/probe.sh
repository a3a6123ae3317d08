#!/usr/bin/env bash
# probe.sh — hm probed as a careless user and as an attacker would: at least
# 60 hostile situations across every tool. For each: the run must end on
# its own (no signal, no hang: 60 s) within 4 GB of address space, exit 0,
# 1 or 2 (never a crash), leave every input file's bytes as they were
# (sha256 before and after, over all of them), and never touch a device or a
# FIFO. The count of situations is printed. Env: HM_BIN, HM_TMP.
set -u
B="$HM_BIN"
T="${HM_TMP:-/tmp}/cli_probe.$$"
rm -rf "$T" && mkdir -p "$T/in" "$T/out"
fails=0 count=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
I="$T/in"
O="$T/out"

# the inputs a user has: a teacher, students, folders, token files, texts, configs
for i in $(seq 1 200); do echo "some words to train on, line $i"; done > "$I/text.txt"
"$B/hm-tokenize" --bytes "$I/text.txt" -o "$I/train.tok" 2>/dev/null
cp "$I/train.tok" "$I/val.tok"
"$B/hm-init" --preset tiny -o "$I/teacher.st" 2>/dev/null
"$B/hm-linearize" "$I/teacher.st" -o "$I/hedgehog.st" --data "$I/train.tok" --steps 0 -q 2>/dev/null
"$B/hm-map-ssm" "$I/hedgehog.st" -o "$I/hedgemamba.st" 2>/dev/null
mkdir -p "$I/hf" && cp "$I/teacher.st" "$I/hf/model.safetensors"
"$B/hm-init" --preset tiny -n --json > "$I/config.json" 2>/dev/null
printf '{"context": "a", "choices": ["b", "c"], "label": 0}\n' > "$I/mc.jsonl"
head -c 100 "$I/teacher.st" > "$I/cut.st"
printf 'not a checkpoint at all' > "$I/garbage.st"
: > "$I/empty.st"
ln -s "$I/teacher.st" "$I/link.st"
mkfifo "$I/fifo"
# a real tokenizer when the shared data is at hand (the --tokenizer cases)
[ -r "${HM_SHARED_DATA:-/nonexistent}/llama2c_tok512.bin" ] &&
    cp "$HM_SHARED_DATA/llama2c_tok512.bin" "$I/tok.bin"
for f in teacher hedgehog hedgemamba; do [ -s "$I/$f.st" ] || { echo "setup failed: $f"; exit 1; }; done
snapshot() { (cd "$I" && find . -type f -print0 | sort -z | xargs -0 sha256sum); }
before=$(snapshot)

# 4 GB of address space per run; ASan builds reserve terabytes of it for
# their shadow memory, so there the limit is left to ASan's own checks
if case "$(ldd "$B/hm-init" 2>/dev/null)" in *libasan*) true ;; *) false ;; esac; then VLIMIT=unlimited; else VLIMIT=4194304; fi

# probe CMD...: one hostile situation
probe() {
    count=$((count + 1))
    timeout 60 bash -c "ulimit -v $VLIMIT; "'exec "$0" "$@"' "$@" </dev/null >"$T/o" 2>"$T/e"
    local rc=$?
    if [ $rc -eq 124 ]; then fail "hung (60 s): $*"
    elif [ $rc -ge 3 ]; then fail "exit $rc (crash or signal): $* :: $(head -c 300 "$T/e")"; fi
    [ -c /dev/null ] || fail "/dev/null is no longer a device after: $*"
    [ -p "$I/fifo" ] || fail "the FIFO is no longer a FIFO after: $*"
    local now
    now=$(snapshot)
    if [ "$now" != "$before" ]; then
        fail "an input changed after: $*"
        before=$now
    fi
}

TR=(--data "$I/train.tok" --steps 1 --batch 2 --seq-len 16 --no-progress -q)
# 1. outputs that are inputs, with -f
for tool in hm-finetune hm-linearize; do
    probe "$B/$tool" "$I/teacher.st" -o "$I/teacher.st" -f "${TR[@]}"
    probe "$B/$tool" "$I/teacher.st" -o "$I/link.st" -f "${TR[@]}"
    probe "$B/$tool" "$I/teacher.st" -o "$I/train.tok" -f "${TR[@]}"
    probe "$B/$tool" "$I/teacher.st" -o "$O/x.st" -f --log "$I/teacher.st" "${TR[@]}"
    probe "$B/$tool" "$I/teacher.st" -o "$O/x.st" -f --log "$I/train.tok" "${TR[@]}"
    probe "$B/$tool" "$I/teacher.st" -o "$O/x.st" -f --val-data "$I/val.tok" --log "$I/val.tok" "${TR[@]}"
    probe "$B/$tool" "$I/hf" -o "$I/hf/model.safetensors" -f "${TR[@]}"
done
probe "$B/hm-finetune" "$I/hedgemamba.st" -o "$I/teacher.st" -f --kd-teacher "$I/teacher.st" --kd-weight 1 "${TR[@]}"
probe "$B/hm-map-ssm" "$I/hedgehog.st" -o "$I/hedgehog.st" -f
probe "$B/hm-map-ssm" "$I/hf" -o "$I/hf/model.safetensors" -f
probe "$B/hm-map-ssm" "$I/hf" -o "$I/hf/config.json" -f
probe "$B/hm-init" --config "$I/config.json" -o "$I/config.json" -f
probe "$B/hm-tokenize" --bytes "$I/text.txt" -o "$I/text.txt" -f
probe "$B/hm-tokenize" --bytes "$I/text.txt" -o "$I/train.tok" --val-fraction 0.5 --val-output "$I/text.txt" -f
probe "$B/hm-eval" "$I/teacher.st" --data "$I/val.tok" --seq-len 16 --dump-logits "$I/teacher.st" -f
probe "$B/hm-eval" "$I/teacher.st" --data "$I/val.tok" --seq-len 16 --dump-logits "$I/val.tok" -f
probe "$B/hm-import" llama2c "$I/teacher.st" -o "$I/teacher.st" -f
if [ -f "$I/tok.bin" ]; then
    probe "$B/hm-tokenize" --tokenizer "$I/tok.bin" "$I/text.txt" -o "$I/tok.bin" -f
    probe "$B/hm-tokenize" --tokenizer "$I/tok.bin" "$I/text.txt" -o "$O/t.tok" --val-fraction 0.5 \
        --val-output "$I/tok.bin" -f
fi
# 2. devices and FIFOs as outputs, with -f
for out in /dev/null "$I/fifo"; do
    probe "$B/hm-init" --preset tiny -o "$out" -f
    probe "$B/hm-map-ssm" "$I/hedgehog.st" -o "$out" -f
    probe "$B/hm-finetune" "$I/teacher.st" -o "$out" -f "${TR[@]}"
    probe "$B/hm-tokenize" --bytes "$I/text.txt" -o "$out" -f
    probe "$B/hm-finetune" "$I/teacher.st" -o "$O/y.st" -f --log "$out" "${TR[@]}"
done
# 3. devices and FIFOs (no writer) as inputs
for in in /dev/zero /dev/urandom "$I/fifo"; do
    probe "$B/hm-inspect" "$in"
    probe "$B/hm-eval" "$in" --data "$I/val.tok" --seq-len 16
    probe "$B/hm-eval" "$I/teacher.st" --data "$in" --seq-len 16
    probe "$B/hm-finetune" "$I/teacher.st" -o "$O/z.st" -f --data "$in" --steps 1 --batch 1 --seq-len 8 -q
    probe "$B/hm-tokenize" --tokenizer "$in" --print-ids "$I/text.txt"
    probe "$B/hm-tokenize" --bytes "$in" -o "$O/z.tok" -f
    probe "$B/hm-map-ssm" "$in" -o "$O/z.st" -f
    probe "$B/hm-import" llama2c "$in" -o "$O/z.st" -f
    probe "$B/hm-init" --config "$in" -o "$O/z.st" -f
done
# 4. malformed, cut, empty and missing inputs
for in in "$I/cut.st" "$I/garbage.st" "$I/empty.st" "$I/missing.st" "$I"; do
    probe "$B/hm-inspect" "$in"
    probe "$B/hm-eval" "$in" --data "$I/val.tok" --seq-len 16
    probe "$B/hm-verify" recurrent "$in" --random-tokens 8
    probe "$B/hm-linearize" "$in" -o "$O/w.st" -f "${TR[@]}"
done
probe "$B/hm-eval" "$I/teacher.st" --data "$I/text.txt" --seq-len 16
probe "$B/hm-finetune" "$I/teacher.st" -o "$O/w.st" -f --data "$I/teacher.st" --steps 1 -q
probe "$B/hm-eval" "$I/teacher.st" --mc "$I/teacher.st" --bytes
probe "$B/hm-tokenize" --tokenizer "$I/teacher.st" --print-ids "$I/text.txt"
# 5. absurd numbers, bad flags
probe "$B/hm-finetune" "$I/teacher.st" -o "$O/v.st" -f --data "$I/train.tok" --steps 1 --batch 1000000000 --seq-len 1000000000
probe "$B/hm-finetune" "$I/teacher.st" -o "$O/v.st" -f --data "$I/train.tok" --steps -1
probe "$B/hm-eval" "$I/teacher.st" --data "$I/val.tok" --seq-len 0
probe "$B/hm-eval" "$I/teacher.st" --data "$I/val.tok" --seq-len 99999999999
probe "$B/hm-verify" recurrent "$I/hedgemamba.st" --random-tokens 999999999999
probe "$B/hm-init" --preset no-such-preset -o "$O/u.st"
probe "$B/hm-finetune" "$I/teacher.st" -o "$O/no/such/dir/x.st" "${TR[@]}"
probe "$B/hm-finetune" "$I/teacher.st" -o "$O/x.st" -f --resume "${TR[@]}"

# ---- round 3: text, eval and generate inputs ----
# an HF folder whose config.json / model.safetensors / index is a device or
# a FIFO: said as such (never read, never "no config.json")
for member in config.json model.safetensors model.safetensors.index.json; do
    for target in /dev/zero "$I/fifo"; do
        rm -rf "$O/hfdev" && mkdir -p "$O/hfdev"
        cp "$I/teacher.st" "$O/hfdev/model.safetensors"
        cp "$I/config.json" "$O/hfdev/config.json"
        rm -f "$O/hfdev/$member"
        ln -s "$target" "$O/hfdev/$member"
        for tool in hm-inspect hm-generate; do
            args=("$O/hfdev")
            [ $tool = hm-generate ] && args+=(--bytes --prompt a --max-new-tokens 1)
            probe "$B/$tool" "${args[@]}"
            grep -q "'$O/hfdev/$member' is not a regular file" "$T/e" ||
                fail "$tool, $member -> $target: $(head -c 300 "$T/e")"
        done
    done
done
rm -rf "$O/hfdev" && mkdir -p "$O/hfdev"
cp "$I/teacher.st" "$O/hfdev/model.safetensors" && cp "$I/config.json" "$O/hfdev/config.json"
ln -s /dev/zero "$O/hfdev/tokenizer.json"
probe "$B/hm-inspect" "$O/hfdev"
cat "$T/o" "$T/e" | grep -q "'$O/hfdev/tokenizer.json' is not a regular file" || fail "inspect, tokenizer.json -> /dev/zero: $(head -c 300 "$T/e")"
probe "$B/hm-pack" "$O/hfdev" -o "$O/p.tar" -f
grep -q "'$O/hfdev/tokenizer.json' is not a regular file" "$T/e" || fail "pack, tokenizer.json -> /dev/zero: $(head -c 300 "$T/e")"
# hostile text inputs: concatenated tars, external compressions, NUL in jsonl
(cd "$O" && tar cf a.tar -C "$I" text.txt && cat a.tar a.tar > aa.tar)
probe "$B/hm-tokenize" --bytes "$O/aa.tar" -o "$O/t.tok" -f
grep -q "end-of-archive" "$T/e" || fail "concatenated tar: $(head -c 300 "$T/e")"
printf 'LRZI\0\6xxxxxxxxxxxxxxxxxxxxxx' > "$O/l.txt"
probe "$B/hm-tokenize" --bytes "$O/l.txt" -o "$O/t.tok" -f
grep -q "external program" "$T/e" || fail "lrzip magic: $(head -c 300 "$T/e")"
printf '{"text": "a\\u0000b"}\n' > "$O/n.jsonl"
probe "$B/hm-tokenize" --bytes "$O/n.jsonl" -o "$O/t.tok" -f
# a token file declaring 2^31 ids: the unigram baseline stays small
echo "0 1 2 3 1 256" > "$O/ids.txt"
probe "$B/hm-tokenize" --ids-in --vocab-size 2147483648 "$O/ids.txt" -o "$O/big.tok" -f
probe "$B/hm-eval" --unigram "$O/big.tok" --data "$I/val.tok" --seq-len 16 --json
grep -q '"ppl"' "$T/o" || fail "unigram with a declared vocabulary of 2^31: $(head -c 300 "$T/e")"
probe "$B/hm-generate" "$I/teacher.st" --bytes --prompt a --temperature 1e-300

# ---- round 3: bundles and archives ----
# inputs: a folder bundle holding a user's notes and a .git, one whose 80
# symlinks fan out to 10^8 paths, a zip with 1 GiB of unlisted zeros, a tar
# with bytes after its end, a checkpoint whose hm.provenance holds [[0]]
"$B/hm-pack" "$I/teacher.st" -o "$I/bundle" --bytes 2>/dev/null
"$B/hm-pack" "$I/teacher.st" -o "$I/bundle.zip" --bytes 2>/dev/null
"$B/hm-pack" "$I/teacher.st" -o "$I/bundle.tar" --bytes 2>/dev/null
for f in bundle bundle.zip bundle.tar; do [ -e "$I/$f" ] || { echo "setup failed: $f"; exit 1; }; done
cp -r "$I/bundle" "$I/repo" && echo notes >"$I/repo/NOTES" && mkdir "$I/repo/.git" &&
    echo ref >"$I/repo/.git/HEAD"
. "$(dirname "$0")/../support/hostile_bundles.sh"
cp -r "$I/bundle" "$I/fan" && hm_fanout "$I/fan" "$I/lvl"
{ cat "$I/bundle.tar"; echo "appended"; } >"$I/trail.tar"
hm_zip_bomb "$I/bundle.zip" "$I/bomb.zip" zeros.bin && hm_badprov '[[0]]' "$I/teacher.st" "$I/badprov.st" ||
    { echo "setup failed: python3"; exit 1; }
before=$(snapshot)
for in in "$I/fan" "$I/bomb.zip" "$I/trail.tar" "$I/badprov.st"; do
    probe "$B/hm-inspect" "$in"
    probe "$B/hm-verify" bundle "$in"
    probe "$B/hm-eval" "$in" --data "$I/val.tok" --seq-len 16
    probe "$B/hm-eval" "$in" --mc "$I/mc.jsonl"
    probe "$B/hm-generate" "$in" --prompt "a" --max-new-tokens 2
    probe "$B/hm-pack" "$in" -o "$O/p.tar" -f --bytes
    probe "$B/hm-finetune" "$in" -o "$O/f.st" -f "${TR[@]}"
done
probe "$B/hm-map-ssm" "$I/badprov.st" -o "$O/m.st" -f
# outputs inside an input bundle folder, -f over a folder with foreign files
probe "$B/hm-pack" "$I/bundle/" -o "$I/bundle/sub" --bytes
probe "$B/hm-pack" "$I/bundle" -o "$I/bundle/x.tar" --bytes -f
probe "$B/hm-eval" "$I/bundle" --data "$I/val.tok" --seq-len 16 --dump-logits "$I/bundle/l.st" -f
probe "$B/hm-pack" "$I/teacher.st" -o "$I/repo" --bytes -f
# a full disk at each stage of a folder bundle's weights (EFBIG, SIGXFSZ ignored)
kb=$(($(stat -c %s "$I/teacher.st") / 1024))
for lim in 8 $((kb / 2)) $((kb - 200)) $((kb - 60)); do
    probe bash -c 'ulimit -f '"$lim"' && trap "" XFSZ && exec "$0" "$@"' \
        "$B/hm-pack" "$I/teacher.st" -o "$O/full" --bytes -f
    [ -z "$(ls -A "$O" | grep '^\.full\.tmp')" ] || fail "a full disk left $(ls -A "$O")"
done

# ---- round 3: output ownership and resume ----
# Two runs of one output at once, a run killed mid-write, resumes with
# changed distillation or frozen set, a config that lies about its tensors,
# self-comparisons: each ends on its own, within bounds, inputs untouched.
# The exit codes are asserted here too (the helper itself only bounds).
rc_is() { [ "$(cat "$T/rc" 2>/dev/null)" = "$1" ] ||
    fail "exit $(cat "$T/rc" 2>/dev/null) (want $1): $2 :: $(head -c 300 "$T/e")"; }
# probe_rc WANT CMD...: a probe whose exit status must be WANT
probe_rc() {
    local want="$1"; shift
    rm -f "$T/rc"
    probe bash -c '"$@"; r=$?; echo $r > "'"$T/rc"'"; exit $r' probe-rc "$@"
    rc_is "$want" "$*"
}
R3=(--data "$I/train.tok" --batch 2 --seq-len 16 --no-progress -q --threads 1)
# a long run holds O/own.st; every second writer, with -f or --resume, is refused
"$B/hm-finetune" "$I/teacher.st" -o "$O/own.st" "${R3[@]}" --steps 100000 --log "$O/own.log" \
    >/dev/null 2>&1 &
holder=$!
for i in $(seq 1 1200); do [ -s "$O/own.log" ] && break; sleep 0.05; done
[ -s "$O/own.log" ] || fail "the long run never logged a step"
probe_rc 1 "$B/hm-finetune" "$I/teacher.st" -o "$O/own.st" "${R3[@]}" --steps 2 -f
probe_rc 1 "$B/hm-finetune" "$I/teacher.st" -o "$O/own.st" "${R3[@]}" --steps 100000 --resume -f
probe_rc 1 "$B/hm-linearize" "$I/teacher.st" -o "$O/own.st" "${R3[@]}" --steps 2 -f
probe_rc 1 "$B/hm-init" --preset tiny -o "$O/own.st" -f
probe_rc 1 "$B/hm-map-ssm" "$I/hedgehog.st" -o "$O/own.st" -f
probe_rc 1 "$B/hm-finetune" "$I/teacher.st" -o "$O/other.st" "${R3[@]}" --steps 2 -f --log "$O/own.log"
probe_rc 1 "$B/hm-eval" "$I/teacher.st" --data "$I/val.tok" --seq-len 16 --dump-logits "$O/own.st" -f
# killed with -9: its lock file is left and holds nothing; the next run goes ahead
kill -9 $holder
{ wait $holder; } 2>/dev/null
[ $? -eq 137 ] || fail "the long run was not killed"
[ -e "$O/own.st.lock" ] || fail "the killed run left no lock file (nothing tested)"
probe_rc 0 "$B/hm-finetune" "$I/teacher.st" -o "$O/own.st" "${R3[@]}" --steps 2 -f --stop-after 1
# resumes that change the trajectory are refused, naming the field
probe_rc 1 "$B/hm-finetune" "$I/teacher.st" -o "$O/own.st" "${R3[@]}" --steps 2 --resume \
    --kd-teacher "$I/teacher.st" --kd-weight 1
probe_rc 1 "$B/hm-finetune" "$I/teacher.st" -o "$O/own.st" "${R3[@]}" --steps 2 --resume \
    --freeze embeddings
grep -q "trainable set" "$T/e" || fail "a changed --freeze is not named: $(cat "$T/e")"
probe_rc 2 "$B/hm-finetune" "$I/teacher.st" -o "$O/kd.st" "${R3[@]}" --steps 2 --kd-teacher "$I/teacher.st"
# names at NAME_MAX, a file where a folder should be
probe_rc 0 "$B/hm-init" --preset tiny -o "$O/$(printf 'x%.0s' $(seq 1 252)).st"
probe_rc 1 "$B/hm-init" --preset tiny -o "$I/teacher.st/x.st"
grep -q "'$I/teacher.st' is not a directory" "$T/e" || fail "ENOTDIR not named: $(cat "$T/e")"
# a check of a thing against itself proves nothing
probe_rc 2 "$B/hm-verify" mapping "$I/hedgehog.st" "$I/hedgehog.st" --random-tokens 8
probe_rc 2 "$B/hm-verify" mapping "$I/teacher.st" "$I/link.st" --random-tokens 8
probe_rc 2 "$B/hm-verify" mapping "$I/teacher.st" "$I/hf" --random-tokens 8
probe_rc 0 "$B/hm-verify" mapping "$I/hedgehog.st" "$I/hedgemamba.st" --random-tokens 8

now=$(snapshot)
[ "$now" = "$before" ] || fail "inputs changed over the run"
echo "probe.sh: $count hostile situations"
[ "$count" -ge 60 ] || fail "only $count situations (want at least 60)"
rm -rf "$T"
[ $fails -eq 0 ] || { echo "probe.sh: $fails failure(s)"; exit 1; }
echo "probe.sh: ok"
