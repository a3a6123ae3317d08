#!/usr/bin/env bash
# rank_layers.sh — hm-rank-layers (SPEC §11 KL-guided layer choice). For
# both families, on ref:
# - each layer's restored KL equals hm-eval --teacher's KL of S(l) built
#   independently (Python edits the student's safetensors: layer l's
#   attention tensors from the teacher, its student-only tensors dropped,
#   hm.config layer_mixers with l softmax), and gain = KL(S) − KL(S(l));
# - the ranking is by gain, largest first, and --keep k is its head;
# - a hybrid student ranks only its student layers; bad usage exits 2.
# Env: HM_BIN, HM_TMP.
set -u
B="$HM_BIN"
T=$(mktemp -d "${HM_TMP:-/tmp}/cli_rank_layers.XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { "$@" >"$T/out" 2>"$T/err" || { fail "exit $?: $* :: $(cat "$T/err")"; return 1; }; }

head -c 30000 /dev/urandom | base64 > "$T/text.txt"
ok "$B/hm-tokenize" --bytes "$T/text.txt" -o "$T/text.tok"
cat > "$T/neox.json" <<'J'
{"model_type": "gpt_neox", "hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4,
 "intermediate_size": 64, "vocab_size": 300, "max_position_embeddings": 256,
 "rotary_pct": 0.25, "use_parallel_residual": true, "layer_norm_eps": 1e-5}
J
cat > "$T/llama.json" <<'J'
{"model_type": "llama", "hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4,
 "num_key_value_heads": 2, "intermediate_size": 64, "vocab_size": 300,
 "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "tie_word_embeddings": false}
J
W=(--data "$T/text.tok" --seq-len 32 --backend ref)
for fam in neox llama; do
    t="$T/$fam.st" s="$T/$fam.s.st"
    ok "$B/hm-init" --config "$T/$fam.json" --seed 3 --init-std 0.3 -o "$t"
    ok "$B/hm-map-ssm" "$t" -o "$T/$fam.m.st" -q
    # a student unlike its start: a few steps of CE at a large rate
    ok "$B/hm-finetune" "$T/$fam.m.st" --data "$T/text.tok" --steps 3 --batch 2 --seq-len 32 \
        --lr 3e-2 --warmup 1 --seed 1 -q -o "$s"
    ok "$B/hm-rank-layers" "$s" --teacher "$t" "${W[@]}" --windows 4 --keep 2 --json
    cp "$T/out" "$T/$fam.rank.json"
    for l in 0 1 2; do
        python3 - "$s" "$t" $l "$T/$fam.s$l.st" <<'P' || fail "$fam: cannot build S($l)"
import json, struct, sys
def read(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = h.pop("__metadata__", {})
    return meta, {k: (v, b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in h.items()}
ms, s = read(sys.argv[1]); _, t = read(sys.argv[2]); l = int(sys.argv[3])
pre = ("gpt_neox.layers.%d.attention." if "gpt_neox.embed_in.weight" in s else "model.layers.%d.self_attn.") % l
attn = ("query_key_value.", "dense.", "q_proj.", "k_proj.", "v_proj.", "o_proj.")
out = {}
for k, v in s.items():
    if k.startswith(pre) and not k[len(pre):].startswith(attn):
        continue  # the student mixer's own tensors: gone from a softmax layer
    out[k] = t[k] if k.startswith(pre) else v
cfg = json.loads(ms["hm.config"])
cfg["layer_mixers"] = ["softmax" if i == l else cfg["arch"] for i in range(cfg["num_hidden_layers"])]
hdr, data, off = {"__metadata__": {"hm.config": json.dumps(cfg)}}, b"", 0
for k in sorted(out):
    info, raw = out[k]
    hdr[k] = {"dtype": info["dtype"], "shape": info["shape"], "data_offsets": [off, off + len(raw)]}
    data += raw; off += len(raw)
h = json.dumps(hdr).encode(); h += b" " * (-len(h) % 8)
open(sys.argv[4], "wb").write(struct.pack("<Q", len(h)) + h + data)
P
        ok "$B/hm-eval" "$T/$fam.s$l.st" "${W[@]}" --max-tokens 128 --teacher "$t" --prompts 0 --json
        cp "$T/out" "$T/$fam.e$l.json"
    done
    ok "$B/hm-eval" "$s" "${W[@]}" --max-tokens 128 --teacher "$t" --prompts 0 --json
    python3 - "$T/$fam.rank.json" "$T/out" "$T/$fam".e{0,1,2}.json <<'P' || fail "$fam: gains"
import json, sys
r = json.load(open(sys.argv[1])); base = json.load(open(sys.argv[2]))["quality"]["kl"]
ev = [json.load(open(p))["quality"]["kl"] for p in sys.argv[3:]]
assert abs(r["kl"] - base) <= 1e-12 * base, (r["kl"], base)
assert [x["layer"] for x in r["layers"]] == [0, 1, 2]
for x in r["layers"]:
    assert abs(x["kl"] - ev[x["layer"]]) <= 1e-12 * ev[x["layer"]], (x, ev)
    assert abs(x["gain"] - (r["kl"] - x["kl"])) <= 1e-15 + 1e-12 * r["kl"], x
order = sorted(range(3), key=lambda l: (-(r["kl"] - ev[l]), l))
assert r["ranking"] == order and r["keep"] == order[:2], (r["ranking"], order)
assert r["kl"] > 1e-3, r["kl"]  # a student far enough from its teacher to rank
print(sys.argv[1].split("/")[-1], "kl", r["kl"], "gains", [round(x["gain"], 6) for x in r["layers"]])
P
    # a hybrid ranks only its student layers
    ok "$B/hm-rank-layers" "$T/$fam.s1.st" --teacher "$t" "${W[@]}" --windows 4 --json
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert sorted(r["ranking"])==[0,2], r' \
        "$T/out" || fail "$fam: hybrid ranking"
done
"$B/hm-rank-layers" "$T/neox.s.st" --data "$T/text.tok" --seq-len 32 >/dev/null 2>&1
[ $? = 2 ] || fail "no --teacher: not exit 2"
"$B/hm-rank-layers" "$T/neox.s.st" --teacher "$T/llama.st" "${W[@]}" >/dev/null 2>"$T/err"
[ $? = 1 ] && grep -q "skeleton" "$T/err" || fail "another teacher: $(cat "$T/err")"
[ $fails -eq 0 ] && echo "rank_layers: all passed"
exit $((fails > 0))
