# narrow_fixture.sh — sourced by tests/cli/narrow*.sh (narrow frozen weights,
# SPEC §11) after B (the tools) is set. Makes T (a temporary folder, removed
# at exit) and fail=0, sources peak_rss.sh, writes $T/text.tok and the
# configs $T/neox.json, $T/llama.json; defines narrow_model FAM DT (a random
# checkpoint $T/FAM-DT.safetensors in DT and the same values in fp32 as the
# bundle $T/FAM-DT.b32) and close.
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
. "$(dirname "${BASH_SOURCE[0]}")/peak_rss.sh"
head -c 3000 /dev/urandom | base64 > "$T/text.txt"
"$B/hm-tokenize" --bytes "$T/text.txt" -o "$T/text.tok" -q
cat > "$T/neox.json" <<'J'
{"model_type": "gpt_neox", "hidden_size": 512, "num_hidden_layers": 6, "num_attention_heads": 8,
 "intermediate_size": 2048, "vocab_size": 20000, "max_position_embeddings": 512,
 "rotary_pct": 0.25, "use_parallel_residual": true, "layer_norm_eps": 1e-5}
J
cat > "$T/llama.json" <<'J'
{"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 6, "num_attention_heads": 8,
 "num_key_value_heads": 2, "intermediate_size": 1536, "vocab_size": 20000,
 "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "tie_word_embeddings": true}
J
narrow_model() {
    local n="$T/$1-$2"
    "$B/hm-init" --config "$T/$1.json" --dtype $2 --seed 3 -o "$n.safetensors" -q
    # the same values in fp32 (widening is exact)
    "$B/hm-pack" --bytes --dtype f32 "$n.safetensors" -o "$n.b32" -q
}
# close A B TOL: two logits dumps (F32 safetensors) agree within TOL as
# max |a - b| / max |b| over every tensor (TOL 0: bit for bit). The fast
# backend's narrow head multiplies tiles of the vocabulary where the fp32 head
# multiplies it whole: OpenBLAS may sum those in another order on another CPU,
# so there the check is 1e-6; ref and checked compute each logit by one loop
# and must agree exactly.
close() {
    python3 - "$@" <<'P'
import array, json, struct, sys
def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        a = array.array("f"); a.frombytes(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
        out[k] = a
    return out
a, b, tol = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
assert a.keys() == b.keys() and a, "tensors differ"
for k in a:
    assert len(a[k]) == len(b[k]), k
    d = max(abs(x - y) for x, y in zip(a[k], b[k]))
    m = max(abs(y) for y in b[k]) or 1.0
    assert d / m <= tol, "%s: %g relative" % (k, d / m)
P
}
