#!/usr/bin/env bash
# hybrid.sh — hybrid students (contract §11 layer_mixers): kept layers keep
# the teacher's softmax attention, every other layer is the student mixer.
# For both families:
# - hm-linearize --keep-attention makes a hedgehog hybrid whose kept layer has
#   no feature maps and the teacher's tensors byte for byte; hm-map-ssm
#   carries the kept set; hm-verify mapping proves the mapped layers and the
#   kept bytes, and fails (exit 1) on a kept layer that changed or another set;
# - hm-verify recurrent holds for the mixed state (KV cache + constant state);
# - CE, KD and stage 1b train it on ref, checked and fast, with the same
#   result on ref and checked, and with and without --recompute (kept layer
#   0); stage 1b leaves the kept layer's bytes alone;
# - the decoding state grows with the context by the kept layers' KV cache
#   exactly (a pure student's not at all);
# - hm-pack writes config.json with layer_types; the bundle verifies; its
#   ONNX graph has a KV cache for the kept layer only.
# Env: HM_BIN, HM_TMP.
set -u
B="$HM_BIN"
T=$(mktemp -d "${HM_TMP:-/tmp}/cli_hybrid.XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { "$@" >"$T/out" 2>"$T/err" || { fail "exit $?: $* :: $(cat "$T/err")"; return 1; }; }
rc_is() { # rc_is WANT CMD...: the command exits WANT
    local want=$1; shift
    "$@" >"$T/out" 2>"$T/err"; local rc=$?
    [ "$rc" = "$want" ] || fail "exit $rc (want $want): $* :: $(cat "$T/err")"
}
# name → hash of a checkpoint's tensors
hashes() { "$B/hm-inspect" --tensors --hash "$1" | awk '/^  [a-z]/ {print $1, $NF}'; }
hash_of() { hashes "$1" | awk -v n="$2" '$1 == n {print $2}'; }
table() { "$B/hm-inspect" --tensors --hash "$1" | sed -n '/^tensors:/,$p'; }

head -c 20000 /dev/urandom | base64 > "$T/text.txt"
ok "$B/hm-tokenize" --bytes "$T/text.txt" -o "$T/text.tok"
cat > "$T/neox.json" <<'J'
{"model_type": "gpt_neox", "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4,
 "intermediate_size": 256, "vocab_size": 300, "max_position_embeddings": 512,
 "rotary_pct": 0.25, "use_parallel_residual": true, "layer_norm_eps": 1e-5}
J
cat > "$T/llama.json" <<'J'
{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4,
 "num_key_value_heads": 2, "intermediate_size": 160, "vocab_size": 300,
 "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "tie_word_embeddings": false}
J
RUN=(--data "$T/text.tok" --steps 2 --batch 2 --seq-len 32 --lr 1e-3 --warmup 1 --seed 5 -q)
for fam in neox llama; do
    if [ $fam = neox ]; then pre=gpt_neox.layers; att=attention; q=attention.query_key_value.weight
    else pre=model.layers; att=self_attn; q=self_attn.q_proj.weight; fi
    t="$T/$fam.st" hh="$T/$fam.hh.st" hm="$T/$fam.hm.st"
    ok "$B/hm-init" --config "$T/$fam.json" --seed 2 -o "$t"
    rc_is 2 "$B/hm-linearize" "$t" --data "$T/text.tok" --steps 1 --keep-attention 3 -o "$T/x.st"
    rc_is 2 "$B/hm-linearize" "$t" --data "$T/text.tok" --steps 1 --keep-attention 1, -o "$T/x.st"
    ok "$B/hm-linearize" "$t" --data "$T/text.tok" --steps 2 --batch 1 --seq-len 32 \
        --keep-attention 1 -o "$hh" -q
    ok "$B/hm-inspect" --json "$hh"
    python3 - "$T/out" <<'P' || fail "$fam: hm.config layer_mixers"
import json, sys
c = json.load(open(sys.argv[1]))["config"]
assert c["layer_mixers"] == ["hedgehog", "softmax", "hedgehog"], c.get("layer_mixers")
P
    ok "$B/hm-inspect" "$hh"
    grep -q "hybrid: softmax attention kept in layer 1 (1 of 3)" "$T/out" ||
        fail "$fam: hm-inspect does not show the kept layer: $(cat "$T/out")"
    hashes "$hh" | grep -q "^$pre.1.$att.feature_map" && fail "$fam: kept layer 1 has feature maps"
    hashes "$hh" | grep -q "^$pre.0.$att.feature_map_q.weight" || fail "$fam: layer 0 lacks maps"
    [ "$(hash_of "$hh" "$pre.1.$q")" = "$(hash_of "$t" "$pre.1.$q")" ] ||
        fail "$fam: kept layer 1's attention is not the teacher's"
    # stage 2's start carries the kept set; verify proves the mapping and the kept bytes
    ok "$B/hm-map-ssm" "$hh" -o "$hm" -q
    rc_is 1 "$B/hm-map-ssm" "$hh" --keep-attention 0 -o "$T/x.st"
    grep -q "layer 0 of the hedgehog input is linear attention" "$T/err" ||
        fail "$fam: map-ssm message: $(cat "$T/err")"
    ok "$B/hm-verify" mapping "$hh" "$hm" --random-tokens 48
    grep -q "^equivalent" "$T/out" || fail "$fam: mapping not equivalent: $(cat "$T/out")"
    grep -q "kept softmax layers: [1-9][0-9]* tensors byte-identical" "$T/err" ||
        fail "$fam: no kept-layer check: $(cat "$T/err")"
    ok "$B/hm-map-ssm" "$t" --keep-attention 0 -o "$T/$fam.k0.st" -q
    rc_is 1 "$B/hm-verify" mapping "$hh" "$T/$fam.k0.st" --random-tokens 48
    grep -q "keeps softmax in layers \[1\]" "$T/err" || fail "$fam: kept-set mismatch: $(cat "$T/err")"
    ok "$B/hm-verify" recurrent "$hm" --random-tokens 48
    grep -q "^equivalent" "$T/out" || fail "$fam: recurrent: $(cat "$T/out")"
    # training: CE on ref, checked (bit for bit the same) and fast; KD; stage 1b
    for be in ref checked fast; do
        ok "$B/hm-finetune" "$hm" "${RUN[@]}" --backend $be -o "$T/$fam.ce.$be.st"
    done
    [ "$(table "$T/$fam.ce.ref.st")" = "$(table "$T/$fam.ce.checked.st")" ] ||
        fail "$fam: CE on checked differs from ref"
    [ "$(hash_of "$T/$fam.ce.fast.st" "$pre.1.$q")" != "$(hash_of "$hm" "$pre.1.$q")" ] ||
        fail "$fam: CE did not train the kept layer"
    rc_is 1 "$B/hm-verify" mapping "$hh" "$T/$fam.ce.fast.st" --random-tokens 48
    grep -q "kept layer 1's '$pre.1." "$T/err" || fail "$fam: changed kept layer: $(cat "$T/err")"
    ok "$B/hm-finetune" "$hm" "${RUN[@]}" --kd-teacher "$t" --kd-weight 1 -o "$T/$fam.kd.st"
    # --recompute's shared activations serve both kinds of layer (layer 0 kept here)
    ok "$B/hm-finetune" "$T/$fam.k0.st" "${RUN[@]}" -o "$T/$fam.k0a.st"
    ok "$B/hm-finetune" "$T/$fam.k0.st" "${RUN[@]}" --recompute -o "$T/$fam.k0b.st"
    [ "$(table "$T/$fam.k0a.st")" = "$(table "$T/$fam.k0b.st")" ] ||
        fail "$fam: --recompute differs on a hybrid"
    ok "$B/hm-finetune" "$hh" "${RUN[@]}" --align "$t" --backend checked -o "$T/$fam.al.st"
    [ "$(hash_of "$T/$fam.al.st" "$pre.1.$q")" = "$(hash_of "$t" "$pre.1.$q")" ] ||
        fail "$fam: stage 1b changed the kept layer"
    [ "$(hash_of "$T/$fam.al.st" "$pre.0.$q")" != "$(hash_of "$t" "$pre.0.$q")" ] ||
        fail "$fam: stage 1b did not train layer 0"
    ok "$B/hm-eval" "$T/$fam.ce.fast.st" --data "$T/text.tok" --seq-len 32 --max-tokens 128
    # decoding memory: only the kept layer's KV cache grows with the context
    ok "$B/hm-map-ssm" "$t" -o "$T/$fam.pure.st" -q
    for m in hm pure; do
        for n in 64 320; do
            ok "$B/hm-generate" --bench --context $n --batch 2 --decode-tokens 4 --json \
                "$T/$fam.$m.st"
            python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["state_bytes"])' \
                "$T/out" > "$T/$m.$n"
        done
        grow=$(( $(cat "$T/$m.320") - $(cat "$T/$m.64") ))
        kv=$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print(c.get("num_key_value_heads", c["num_attention_heads"]) * c["hidden_size"] // c["num_attention_heads"])' "$T/$fam.json")
        want=0; [ $m = hm ] && want=$(( 2 * 2 * 256 * kv * 4 )) # batch 2, K and V, 1 layer
        [ "$grow" = "$want" ] || fail "$fam $m: state grows by $grow bytes, want $want"
    done
    # past the 512 positions the kept layer was trained on: a warning, not a refusal
    ok "$B/hm-generate" --bench --context 510 --batch 1 --decode-tokens 4 "$hm"
    grep -q "kept softmax layers were trained on" "$T/err" || fail "$fam: no position warning"
    # bundles: config.json carries the pattern
    ok "$B/hm-pack" "$T/$fam.ce.fast.st" --bytes -o "$T/$fam.bundle"
    python3 - "$T/$fam.bundle/config.json" <<'P' || fail "$fam: config.json layer_types"
import json, sys
c = json.load(open(sys.argv[1]))
assert c["layer_types"] == ["hedgemamba", "softmax", "hedgemamba"], c.get("layer_types")
P
    ok "$B/hm-verify" bundle "$T/$fam.bundle"
    ok "$B/hm-eval" "$T/$fam.bundle" --data "$T/text.tok" --seq-len 32 --max-tokens 128
    # ONNX: a KV cache for the kept layer only (run in ONNX Runtime: cli_onnx)
    ok "$B/hm-pack" "$T/$fam.ce.fast.st" --bytes --onnx -o "$T/$fam.onnx.bundle"
    grep -qa "past_key.1" "$T/$fam.onnx.bundle/onnx/model.onnx" && \
        ! grep -qa "past_key.0" "$T/$fam.onnx.bundle/onnx/model.onnx" ||
        fail "$fam: the ONNX graph's KV caches are not layer 1's alone"
done
# a pure student's config has no layer_mixers (its bytes are unchanged)
"$B/hm-inspect" --json "$T/llama.pure.st" | grep -q layer_mixers && fail "pure student has layer_mixers"
[ $fails -eq 0 ] && echo "hybrid: all passed"
exit $((fails > 0))
