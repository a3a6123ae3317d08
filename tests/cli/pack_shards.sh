#!/usr/bin/env bash
# pack_shards.sh — hm-pack --shard-size (contract §11 "Sharded checkpoints",
# docs/bundle.md): a teacher of each family and a hedgemamba student packed
# with a tiny shard size → HF's file names, split and index (checked in
# python3 against the spec and json.dumps) → hm-verify bundle (0) → hm-eval,
# hm-verify logits, hm-generate, hm-inspect, hm-finetune on the folder and
# the archives give what the checkpoint gives; below the size one
# model.safetensors; deterministic; a full disk leaves nothing; bad sizes are
# usage errors; hm-verify bundle streams an archive (peak RSS far below it).
# Env: HM_BIN, HM_TMP.
set -u
T="${HM_TMP:-/tmp}/cli_pack_shards.$$"
rm -rf "$T" && mkdir -p "$T"
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { "$@" >"$T/out" 2>"$T/err" || { fail "exit $?: $* :: $(cat "$T/err")"; return 1; }; }
B="$HM_BIN"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"

for i in $(seq 1 24); do
    echo "line $i: the quick brown fox jumps over the lazy dog; shards carry their index."
done >"$T/text.txt"
ok "$B/hm-tokenize" --bytes "$T/text.txt" -o "$T/train.tok"
ok "$B/hm-init" --preset tiny -o "$T/neox.st"
ok "$B/hm-init" --preset llama-tiny -o "$T/llama.st"
ok "$B/hm-linearize" "$T/llama.st" -o "$T/llama-hh.st" --data "$T/train.tok" --steps 2 \
    --batch 2 --seq-len 32 && ok "$B/hm-map-ssm" "$T/llama-hh.st" -o "$T/llama-hm.st"

# check_layout BUNDLE_DIR SHARD_BYTES: the layout of contract §11, HF's split
check_layout() {
    python3 - "$1" "$2" <<'PY'
import json, os, re, struct, sys
d, limit = sys.argv[1], int(sys.argv[2])
names = sorted(os.listdir(d))
shards = [n for n in names if n.endswith(".safetensors")]
n = len(shards)
assert n > 2, f"only {n} weights files: {names}"
assert "model.safetensors" not in names, "model.safetensors beside the shards"
want = [f"model-{i:05d}-of-{n:05d}.safetensors" for i in range(1, n + 1)]
assert shards == want, f"shard names {shards}"
text = open(os.path.join(d, "model.safetensors.index.json")).read()
ix = json.loads(text)
assert text == json.dumps(ix, indent=2, sort_keys=True) + "\n", "not json.dumps(indent=2, sort_keys=True)"
assert set(ix) == {"metadata", "weight_map"} and set(ix["metadata"]) == {"total_size"}, ix.keys()
sizes, where, cfgs = {}, {}, set()
for s in shards:
    with open(os.path.join(d, s), "rb") as f:
        hl = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(hl))
    meta = h.pop("__metadata__")
    assert meta.get("format") == "pt" and "hm.provenance" in meta, f"{s}: metadata {list(meta)}"
    json.loads(meta["hm.provenance"])
    cfgs.add(meta["hm.config"])
    assert h, f"{s} holds no tensor"
    for t, e in h.items():
        assert t not in where, f"{t} in {where.get(t)} and {s}"
        where[t] = s
        sizes[t] = e["data_offsets"][1] - e["data_offsets"][0]
assert len(cfgs) == 1, "shards' hm.config differ"
assert ix["weight_map"] == where, "weight_map is not the shards' tensors"
assert ix["metadata"]["total_size"] == sum(sizes.values()), "total_size"
# transformers' shard_checkpoint over the tensors in order
plan, cur, size = [], [], 0
for t in sorted(sizes):
    if cur and size + sizes[t] > limit:
        plan.append(cur); cur, size = [], 0
    cur.append(t); size += sizes[t]
plan.append(cur)
got = [[t for t in sorted(where) if where[t] == s] for s in shards]
assert got == plan, "not HF's split"
print(n)
PY
}

gen=(--prompt "line 3: the" --max-new-tokens 16 --ignore-eot --temperature 0 --ids)
evals=(--data "$T/train.tok" --seq-len 32 --max-tokens 128 --json)
nospeed() { sed 's/, "tokens_per_s": [0-9.e+-]*//' "$T/out"; }
# name and XXH3 of every tensor (the table after "tensors:", not the provenance)
hashes() { "$B/hm-inspect" --tensors --hash "$1" | awk '/^tensors:/ { t = 1; next } t && NF >= 6 { print $1, $NF }'; }
for m in neox llama llama-hm; do
    ok "$B/hm-eval" "$T/$m.st" "${evals[@]}" --dump-logits "$T/$m.ref.st" || continue
    want_eval=$(nospeed)
    ok "$B/hm-generate" "$T/$m.st" --bytes "${gen[@]}" && want_gen=$(cat "$T/out")
    ok "$B/hm-finetune" "$T/$m.st" -o "$T/$m.ft.st" --data "$T/train.tok" --steps 2 --batch 2 \
        --seq-len 16 --seed 3 -q && want_ft=$(hashes "$T/$m.ft.st")
    [ "$(echo "$want_ft" | wc -l)" -gt 10 ] || fail "$m: no tensor hashes from hm-inspect"
    for fmt in dir tar.zst zip; do
        out="$T/$m.b.$fmt"
        ok "$B/hm-pack" "$T/$m.st" -o "$out" --bytes --format "$fmt" --shard-size 100KB --json ||
            continue
        grep -q '"shards":[ ]*[1-9]' "$T/out" || fail "$m $fmt: --json names no shards: $(cat "$T/out")"
        if [ "$fmt" = dir ]; then
            n=$(check_layout "$out" 100000 2>"$T/err") || fail "$m: layout: $(tail -3 "$T/err")"
        fi
        ok "$B/hm-verify" bundle "$out" || fail "$m $fmt: hm-verify bundle: $(cat "$T/out")"
        ok "$B/hm-inspect" "$out" && grep -q "^bundle:      $fmt, $((n + 5)) files" "$T/out" ||
            fail "$m $fmt: hm-inspect: $(grep bundle: "$T/out")"
        ok "$B/hm-eval" "$out" "${evals[@]}" && [ "$(nospeed)" = "$want_eval" ] ||
            fail "$m $fmt: eval '$(nospeed)' != checkpoint '$want_eval'"
        "$B/hm-verify" logits "$out" --reference "$T/$m.ref.st" --data "$T/train.tok" \
            --tolerance 0 >"$T/out" 2>&1 || fail "$m $fmt: logits differ: $(cat "$T/out")"
        ok "$B/hm-generate" "$out" "${gen[@]}" && [ "$(cat "$T/out")" = "$want_gen" ] ||
            fail "$m $fmt: greedy '$(cat "$T/out")' != checkpoint '$want_gen'"
        ok "$B/hm-finetune" "$out" -o "$T/$m.$fmt.ft.st" --data "$T/train.tok" --steps 2 \
            --batch 2 --seq-len 16 --seed 3 -q &&
            [ "$(hashes "$T/$m.$fmt.ft.st")" = "$want_ft" ] || fail "$m $fmt: finetuned tensors differ"
    done
done
# a sharded bundle is also an input of hm-pack: repacked unsharded, the same tensors
ok "$B/hm-pack" "$T/neox.b.zip" -o "$T/repacked" &&
    [ "$(hashes "$T/repacked")" = "$(hashes "$T/neox.st")" ] || fail "repacked tensors differ"

# below the size: one model.safetensors, no index
ok "$B/hm-pack" "$T/neox.st" -o "$T/single" --bytes --shard-size 5GB
[ -f "$T/single/model.safetensors" ] && [ ! -e "$T/single/model.safetensors.index.json" ] &&
    [ "$(ls "$T/single" | grep -c safetensors)" = 1 ] || fail "below the size: $(ls "$T/single")"
# a tensor bigger than the size gets a shard of its own
ok "$B/hm-pack" "$T/neox.st" -o "$T/big-tensors" --bytes --shard-size 1KiB &&
    check_layout "$T/big-tensors" 1024 >/dev/null 2>"$T/err" || fail "1KiB shards: $(tail -3 "$T/err")"

# deterministic
ok "$B/hm-pack" "$T/llama.st" -o "$T/again.tar.zst" --bytes --shard-size 100KB
cmp -s "$T/again.tar.zst" "$T/llama.b.tar.zst" || fail "a second sharded pack differs"

# bad sizes: usage errors, nothing written
for bad in 0 abc 5Gb -1 100QB 99999999999999999999GB; do
    "$B/hm-pack" "$T/neox.st" -o "$T/bad" --bytes --shard-size "$bad" >"$T/out" 2>"$T/err"
    rc=$?
    [ $rc -eq 2 ] && grep -q -- "--shard-size" "$T/err" || fail "--shard-size '$bad': exit $rc $(cat "$T/err")"
done
[ ! -e "$T/bad" ] || fail "a bad size left an output"

# a full disk while writing the shards: exit 1, nothing left behind
mkdir "$T/full"
for lim in 64 150 200; do # (KB per file: the shards are up to 263 KB)
    (ulimit -f "$lim" && trap '' XFSZ && exec timeout 60 "$B/hm-pack" "$T/neox.st" -o "$T/full/b" \
        --bytes --shard-size 100KB) >"$T/out" 2>"$T/err"
    rc=$?
    [ $rc -eq 1 ] && grep -q "File too large" "$T/err" || fail "full disk ($lim KB): exit $rc $(cat "$T/err")"
    [ -z "$(ls -A "$T/full")" ] || { fail "full disk ($lim KB) left: $(ls -A "$T/full")"; rm -rf "${T:?}/full/"* "$T/full"/.[!.]*; }
done

# hm-verify bundle streams an archive: a ~140 MB tar checked in a bounded RSS
peak_rss() {
    python3 -c 'import resource, subprocess, sys
t = sys.argv[1]
rc = subprocess.call(sys.argv[2:], stdout=open(t + "/out", "w"), stderr=open(t + "/err", "w"), timeout=300)
print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$T" "$@"
}
if ok "$B/hm-init" --preset pythia-70m --dtype f16 -o "$T/big.st" &&
    ok "$B/hm-pack" "$T/big.st" -o "$T/big.tar" --bytes --shard-size 50MB; then
    rm -f "$T/big.st"
    kb=$(($(stat -c %s "$T/big.tar") / 1024))
    read -r rc rss < <(peak_rss "$B/hm-verify" bundle "$T/big.tar")
    [ "$rc" -eq 0 ] && [ "$rss" -lt 65536 ] ||
        fail "hm-verify bundle on a $kb KB tar: exit $rc, peak RSS $rss KB (want < 64 MB)"
    echo "hm-verify bundle: $kb KB archive, peak RSS $rss KB"
fi

[ $fails -eq 0 ] || { echo "pack_shards.sh: $fails failure(s)"; exit 1; }
echo "pack_shards.sh: ok"
