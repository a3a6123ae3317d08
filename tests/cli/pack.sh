#!/usr/bin/env bash
# pack.sh — hm-pack bundles through the real pipeline (contract §5 "Bundles",
# docs/bundle.md): hm-init teachers (tiny, llama-tiny), hm-linearize and
# hm-map-ssm students, each packed in every format → hm-verify bundle (0) →
# hm-inspect → hm-eval on the bundle (the same PPL) → hm-verify logits with
# tolerance 0 against the checkpoint's --dump-logits → hm-generate on the
# bundle (its tokenizer) gives the checkpoint's greedy and seeded sampled
# ids; the model card shows
# the chain tool by tool with its losses; packing twice gives the same
# bytes; a tampered bundle gives 1 naming the member; refusals.
# Env: HM_BIN, HM_TMP.
set -u
T="${HM_TMP:-/tmp}/cli_pack.$$"
rm -rf "$T" && mkdir -p "$T"
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { "$@" >"$T/out" 2>"$T/err" || { fail "exit $?: $* :: $(cat "$T/err")"; return 1; }; }
B="$HM_BIN"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}" # ctest runs tests side by side

# byte-level training text (no shared data needed)
for i in $(seq 1 24); do
    echo "line $i: the quick brown fox jumps over the lazy dog; bundles carry their checksums."
done >"$T/text.txt"
ok "$B/hm-tokenize" --bytes "$T/text.txt" -o "$T/train.tok"

ok "$B/hm-init" --preset tiny -o "$T/neox.st"
ok "$B/hm-init" --preset llama-tiny -o "$T/llama.st"
for f in neox llama; do
    ok "$B/hm-linearize" "$T/$f.st" -o "$T/$f-hedgehog.st" --data "$T/train.tok" --steps 2 \
        --batch 2 --seq-len 32
    ok "$B/hm-map-ssm" "$T/$f-hedgehog.st" -o "$T/$f-hedgemamba.st"
done

ppl() { sed -n 's/.*"ppl": *\([0-9.e+-]*\).*/\1/p' "$T/out"; }

for m in neox neox-hedgehog neox-hedgemamba llama llama-hedgehog llama-hedgemamba; do
    ok "$B/hm-eval" "$T/$m.st" --data "$T/train.tok" --seq-len 32 --max-tokens 128 --json \
        --dump-logits "$T/$m.ref.st" || continue
    want=$(ppl)
    # greedy and seeded sampling from the checkpoint (its tokenizer given)
    gen=(--prompt "line 3: the" --max-new-tokens 24 --ignore-eot)
    ok "$B/hm-generate" "$T/$m.st" --bytes "${gen[@]}" --temperature 0 --ids || continue
    want_greedy=$(cat "$T/out")
    [ "$(echo "$want_greedy" | wc -w)" -eq 24 ] || fail "$m: greedy gave '$want_greedy'"
    # (ids, not text: a random model emits invalid UTF-8, which the bundle's
    # tokenizer.json decodes as HuggingFace does, to U+FFFD, and --bytes raw)
    ok "$B/hm-generate" "$T/$m.st" --bytes "${gen[@]}" --temperature 0.8 --top-k 20 --seed 7 \
        --ids || continue
    want_text=$(cat "$T/out")
    for fmt in dir tar tar.gz tar.xz tar.zst zip; do
        out="$T/$m.bundle.$fmt"
        ok "$B/hm-pack" "$T/$m.st" -o "$out" --bytes --format "$fmt" || continue
        "$B/hm-verify" bundle "$out" >"$T/out" 2>&1 || fail "$m $fmt: hm-verify bundle: $(cat "$T/out")"
        ok "$B/hm-inspect" "$out"
        grep -q "^bundle:      $fmt, 5 files" "$T/out" || fail "$m $fmt: hm-inspect shows no bundle"
        ok "$B/hm-eval" "$out" --data "$T/train.tok" --seq-len 32 --max-tokens 128 --json
        [ "$(ppl)" = "$want" ] || fail "$m $fmt: PPL $(ppl) on the bundle, $want on the checkpoint"
        "$B/hm-verify" logits "$out" --reference "$T/$m.ref.st" --data "$T/train.tok" \
            --tolerance 0 >"$T/out" 2>&1 || fail "$m $fmt: logits differ: $(cat "$T/out")"
        # generation from the bundle (its own tokenizer) = from the checkpoint
        ok "$B/hm-generate" "$out" "${gen[@]}" --temperature 0 --ids &&
            [ "$(cat "$T/out")" = "$want_greedy" ] ||
            fail "$m $fmt: greedy from the bundle '$(cat "$T/out")' != checkpoint '$want_greedy'"
        ok "$B/hm-generate" "$out" "${gen[@]}" --temperature 0.8 --top-k 20 --seed 7 --ids &&
            [ "$(cat "$T/out")" = "$want_text" ] ||
            fail "$m $fmt: sampled ids from the bundle differ from the checkpoint's"
    done
done

# the model card: the chain with arguments, the training losses
card="$T/neox-hedgemamba.bundle.dir/README.md"
grep -q '^hm-linearize .*--steps 2' "$card" || fail "card: no hm-linearize command line"
grep -q '^hm-map-ssm ' "$card" || fail "card: no hm-map-ssm step"
grep -q '^hm-pack .*--bytes --format dir' "$card" || fail "card: no hm-pack step"
grep -q '| hm-linearize | 128 | .*(mean 1 - cos over layers)' "$card" || fail "card: no hm-linearize tokens/loss row"
grep -q '| arch | `hedgemamba` |' "$card" || fail "card: no arch"
grep -q '"model_type":	"hedgemamba"' "$T/neox-hedgemamba.bundle.dir/config.json" ||
    fail "config.json: model_type is not hedgemamba"

# deterministic: the same input and flags give the same bytes
for fmt in tar.gz zip; do
    ok "$B/hm-pack" "$T/llama-hedgehog.st" -o "$T/again.$fmt" --bytes
    cmp -s "$T/again.$fmt" "$T/llama-hedgehog.bundle.$fmt" || fail "$fmt: a second pack differs"
done

# tampering: one flipped byte in a copy → exit 1 naming the member
cp -r "$T/llama.bundle.dir" "$T/tampered"
printf 'X' | dd of="$T/tampered/config.json" bs=1 seek=20 conv=notrunc 2>/dev/null
"$B/hm-verify" bundle "$T/tampered" >"$T/out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "'config.json'" "$T/out" || fail "tampered config.json: exit $rc $(cat "$T/out")"
"$B/hm-verify" bundle "$T/neox.st" >"$T/out" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "a checkpoint is no bundle: exit $rc (want 2)"

# refusals
"$B/hm-pack" "$T/neox.st" -o "$T/neox.bundle.zip" --bytes >"$T/out" 2>&1
[ $? -eq 1 ] && grep -q "exists" "$T/out" || fail "an existing output was not refused"
"$B/hm-pack" "$T/neox.st" -o "$T/x.zip" --format tar --bytes >"$T/out" 2>&1
[ $? -eq 2 ] || fail "--format contradicting the suffix is not a usage error"
"$B/hm-pack" "$T/neox.st" -o "$T/x.tar" >"$T/out" 2>&1
[ $? -eq 1 ] && grep -q -- "--tokenizer" "$T/out" || fail "no tokenizer: $(cat "$T/out")"
[ ! -e "$T/x.tar" ] || fail "a failed pack left its output"

# ---- hostile bundles, inputs and outputs ----
# refused WANT_RC FRAGMENT CMD...: exits WANT_RC within 60 s, no crash, FRAGMENT on stderr
refused() {
    local want=$1 frag=$2
    shift 2
    timeout 60 "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    [ $rc -eq "$want" ] && grep -qF -- "$frag" "$T/out" "$T/err" ||
        fail "exit $rc (want $want, '$frag'): $* :: $(head -c 300 "$T/err")"
}
. "$(dirname "$0")/../support/hostile_bundles.sh"
# 1. hm.provenance of another shape is another tool's (issue 32): the weights
#    still load; hm-inspect shows it verbatim as foreign, the writers warn
#    and start a fresh chain (hm-pack crashed on [[0]] in its model card)
for chain in '[[0]]' '[1]' '{"a": 1}' '[{"tool": 5}]' '[{"args": [1]}]' '[{"inputs": [7]}]' 'nope'; do
    hm_badprov "$chain" "$T/neox.st" "$T/bp.st" && hm_badprov "$chain" "$T/neox-hedgehog.st" "$T/bph.st" ||
        { fail "badprov $chain"; continue; }
    rm -f "$T/bp.tar" "$T/bpf.st" "$T/bpf.st.state" "$T/bpm.st"
    refused 0 "fresh chain" "$B/hm-pack" "$T/bp.st" -o "$T/bp.tar" --bytes
    refused 0 "foreign" "$B/hm-inspect" "$T/bp.st"
    grep -qF -- "$chain" "$T/out" || fail "hm-inspect does not show the foreign chain $chain verbatim"
    refused 0 "fresh chain" "$B/hm-finetune" "$T/bp.st" -o "$T/bpf.st" --data "$T/train.tok" \
        --steps 1 --batch 1 --seq-len 8 -q
    refused 0 "fresh chain" "$B/hm-map-ssm" "$T/bph.st" -o "$T/bpm.st"
    [ -e "$T/bp.tar" ] && [ -e "$T/bpf.st" ] && [ -e "$T/bpm.st" ] ||
        fail "provenance $chain: an output is missing"
    "$B/hm-inspect" --json "$T/bpf.st" 2>/dev/null | grep -q '"tool":[[:space:]]*"hm-finetune"' ||
        fail "provenance $chain: the fresh chain lacks its hm-finetune entry"
done
# ...and in a bundle's weights, hm-verify bundle names it
cp -r "$T/neox.bundle.dir" "$T/bpb"
hm_badprov '[[0]]' "$T/neox.bundle.dir/model.safetensors" "$T/bpb/model.safetensors"
refused 1 "hm.provenance entry 1 is not a JSON object" "$B/hm-verify" bundle "$T/bpb"
refused 0 "foreign" "$B/hm-inspect" "$T/bpb" # hm-inspect diagnoses it (issue 32)

# 2. a full disk (writes failing with EFBIG under ulimit -f, SIGXFSZ
#    ignored) at every stage of the weights: exit 1 with the reason, no
#    temporary file or folder left (the fopencookie tee returned -1: SIGSEGV)
kb=$(($(stat -c %s "$T/neox.st") / 1024))
mkdir "$T/full"
for fmt in dir tar zip; do
    lims="4 64 $((kb / 2))"
    # (zip deflates: only the stages a plain copy surely reaches)
    [ $fmt = zip ] || lims="$lims $((kb - 400)) $((kb - 300)) $((kb - 200)) $((kb - 100)) $((kb - 20))"
    for lim in $lims; do
        (ulimit -f "$lim" && trap '' XFSZ && exec timeout 60 "$B/hm-pack" "$T/neox.st" \
            -o "$T/full/b" --format "$fmt" --bytes) >"$T/out" 2>"$T/err"
        rc=$?
        [ $rc -eq 1 ] && grep -q "cannot pack .*File too large" "$T/err" ||
            fail "full disk ($fmt, $lim KB): exit $rc :: $(head -c 300 "$T/err")"
        [ -z "$(ls -A "$T/full")" ] || { fail "full disk ($fmt, $lim KB) left: $(ls -A "$T/full")"; rm -rf "$T/full"/* "$T/full"/.[!.]*; }
    done
done

# 3. symlink fan-out: 10 links per level to the next level's folder, 8
#    levels (10^8 paths, no cycle): refused at once as a folder reached twice
cp -r "$T/neox.bundle.dir" "$T/fan"
hm_fanout "$T/fan" "$T/lvl"
refused 1 "reached twice" "$B/hm-verify" bundle "$T/fan"
refused 1 "reached twice" "$B/hm-inspect" "$T/fan"
refused 1 "reached twice" "$B/hm-eval" "$T/fan" --data "$T/train.tok" --seq-len 8
# ...and more than 10000 entries in all
cp -r "$T/neox.bundle.dir" "$T/many" && mkdir "$T/many/x"
(cd "$T/many/x" && seq 1 10001 | xargs touch)
refused 1 "more than 10000 files and folders" "$B/hm-verify" bundle "$T/many"

# 4. zip bombs: a member MANIFEST.json does not list is refused before it
#    is inflated, and a listed one is read no further than its listed bytes
#    (1 GiB of zeros each; every tool inflated them into memory first)
hm_zip_bomb "$T/neox.bundle.zip" "$T/bomb-extra.zip" zeros.bin &&
    hm_zip_bomb "$T/neox.bundle.zip" "$T/bomb-listed.zip" README.md || fail "cannot build the zip bombs"
# peak_rss CMD...: runs CMD (stdout/stderr to $T/out, $T/err), prints "RC MAXRSS_KB"
peak_rss() {
    python3 -c 'import resource, subprocess, sys
t = sys.argv[1]
rc = subprocess.call(sys.argv[2:], stdout=open(t + "/out", "w"), stderr=open(t + "/err", "w"), timeout=60)
print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$T" "$@"
}
for c in "bomb-extra.zip:entry 'zeros.bin' is not listed in MANIFEST.json" \
         "bomb-listed.zip:entry 'README.md' declares 1073741824 bytes, more than MANIFEST.json lists"; do
    z=${c%%:*} frag=${c#*:}
    for tool in "hm-verify bundle" hm-inspect; do
        read -r rc rss < <(peak_rss $B/$tool "$T/$z")
        [ "$rc" -eq 1 ] && grep -qF "$frag" "$T/out" "$T/err" && [ "$rss" -lt 262144 ] ||
            fail "$tool $z: exit $rc, peak RSS $rss KB :: $(cat "$T/out" "$T/err" | head -c 300)"
    done
done

# 5. bytes after a tar's end (or a gzip stream's, or a zip's central
#    directory): refused by hm-verify bundle and every reader; a tar's zero
#    padding stays fine
for f in tar tar.gz zip; do
    { cat "$T/neox.bundle.$f"; echo "appended"; } >"$T/trail.$f"
    refused 1 "other data follows the end of the" "$B/hm-verify" bundle "$T/trail.$f"
    refused 1 "other data follows the end of the" "$B/hm-inspect" "$T/trail.$f"
    refused 1 "other data follows the end of the" "$B/hm-eval" "$T/trail.$f" --data "$T/train.tok" --seq-len 8
done
{ cat "$T/neox.bundle.tar"; head -c 10240 /dev/zero; } >"$T/padded.tar"
ok "$B/hm-verify" bundle "$T/padded.tar"

# 6. -f never deletes what is not the bundle's; no output inside an input bundle
cp -r "$T/neox.bundle.dir" "$T/repo" && mkdir "$T/repo/.git" && echo notes >"$T/repo/NOTES"
echo ref >"$T/repo/.git/HEAD"
refused 1 "which is not part of the bundle" "$B/hm-pack" "$T/llama.st" -o "$T/repo" --bytes -f
[ -f "$T/repo/NOTES" ] && [ -f "$T/repo/.git/HEAD" ] && grep -q neox "$T/repo/config.json" ||
    fail "-f on a bundle folder with foreign files changed it"
rm -rf "$T/repo/.git" "$T/repo/NOTES"
ok "$B/hm-pack" "$T/llama.st" -o "$T/repo" --bytes -f
grep -q llama "$T/repo/config.json" || fail "-f did not replace a clean bundle folder"
for out in "$T/repo/sub" "$T/repo/sub.tar" "$T/repo/onnx/x.zip"; do
    refused 1 "is inside the input folder" "$B/hm-pack" "$T/repo/" -o "$out" --bytes
    [ ! -e "$out" ] || fail "$out was written inside the input bundle"
done
refused 2 "is an input" "$B/hm-eval" "$T/repo" --data "$T/train.tok" --seq-len 8 --dump-logits "$T/repo/l.st"
ok "$B/hm-verify" bundle "$T/repo"

# 7. VCS and HuggingFace housekeeping in a bundle folder: ignored alike by
#    hm-verify bundle and the readers
echo "*.safetensors filter=lfs" >"$T/repo/.gitattributes"
mkdir -p "$T/repo/.cache/huggingface/download" "$T/repo/.git"
echo x >"$T/repo/.cache/huggingface/download/model.safetensors.metadata"
echo x >"$T/repo/.git/HEAD"
ok "$B/hm-verify" bundle "$T/repo" || cat "$T/out"
ok "$B/hm-inspect" "$T/repo" && grep -q "^bundle:      dir, 5 files" "$T/out" ||
    fail "hm-inspect on a bundle with housekeeping: $(head -5 "$T/out")"

# 8. hm-eval --mc on a bundle takes its own tokenizer (as hm-generate does)
printf '{"context": "line 3: the", "choices": [" quick", " lazy dog"], "label": 0}\n' >"$T/mc.jsonl"
ok "$B/hm-eval" "$T/neox.st" --mc "$T/mc.jsonl" --bytes --json && want=$(cat "$T/out")
ok "$B/hm-eval" "$T/neox.bundle.tar" --mc "$T/mc.jsonl" --json &&
    [ "$(cat "$T/out")" = "$want" ] || fail "--mc with the bundle's tokenizer: '$(cat "$T/out")' != '$want'"
refused 1 "holds no tokenizer" "$B/hm-eval" "$T/neox.st" --mc "$T/mc.jsonl"

[ $fails -eq 0 ] || { echo "pack.sh: $fails failure(s)"; exit 1; }
echo "pack.sh: ok"
