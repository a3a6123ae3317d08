#!/usr/bin/env python3
"""make_bad_samples.py - regenerate samples/bad/ (malformed inputs) and the
fuzz seed corpora.

    python3 tests/gen/make_bad_samples.py [REPO_ROOT]

Deterministic (no randomness, no timestamps), python3 standard library only.
Writes:
  samples/bad/*.safetensors    files that hm_st_open() must refuse
  samples/bad/ckpt/...         single files and HF folders that open as
                               safetensors but that hm_ckpt_open() must refuse
                               (index cross-checks, config errors)
  samples/bad/expected.tsv     path <TAB> level <TAB> status <TAB> message fragment
                               (read by tests/test_safetensors.c,
                               tests/test_checkpoint.c and tests/cli/malformed.sh)
  samples/bad/README.md        the same as a table
  fuzz/corpus/fuzz_*/          seeds: small valid files plus the bad samples
Cases that need the file system (a directory given as a file) are built by
the tests themselves.
"""
import json
import os
import shutil
import struct
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), "..", ".."))
BAD = os.path.join(ROOT, "samples", "bad")
CORPUS = os.path.join(ROOT, "fuzz", "corpus")

rows = []  # (relative path, level, status, what is wrong, fragment)


def pad8(h):
    return h + b" " * (-len(h) % 8)


def st_bytes(header, data=b"", hlen=None, pad=True):
    """A safetensors file. header: dict (dumped compactly), str or bytes."""
    if isinstance(header, dict):
        header = json.dumps(header, separators=(",", ":"))
    if isinstance(header, str):
        header = header.encode("utf-8")
    if pad:
        header = pad8(header)
    n = len(header) if hlen is None else hlen
    return struct.pack("<Q", n) + header + data


def f32(*vals):
    return struct.pack("<%df" % len(vals), *vals)


def tensor(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def put(rel, content, level, status, what, fragment):
    path = os.path.join(BAD, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fp:
        fp.write(content)
    if level is not None:
        rows.append((rel, level, status, what, fragment))


def bad(name, content, what, fragment, status="FORMAT"):
    put(name + ".safetensors", content, "st", status, what, fragment)


# A small valid file used as the base of the truncation cases:
# a: F32 [2, 2] (16 bytes), b: F16 [3] (6 bytes), metadata format=pt.
VALID_HEADER = {"__metadata__": {"format": "pt"},
                "a": tensor("F32", [2, 2], 0, 16),
                "b": tensor("F16", [3], 16, 22)}
VALID_DATA = f32(1, 2, 3, 4) + bytes([0x00, 0x3c, 0x00, 0x40, 0x00, 0xc0])
VALID = st_bytes(VALID_HEADER, VALID_DATA)
VALID_N = struct.unpack("<Q", VALID[:8])[0]


def one(dtype="F32", shape=(2,), offs=(0, 8), extra=None, drop=None):
    t = {"dtype": dtype, "shape": list(shape), "data_offsets": list(offs)}
    for k in drop or []:
        del t[k]
    t.update(extra or {})
    return t


def gen_files():
    bad("empty", b"", "empty file", "file is empty")
    for k in range(1, 8):
        bad("short_%d" % k, VALID[:k], "only %d byte(s): no room for the length prefix" % k,
            "too short for a safetensors header")
    bad("hlen_past_eof", st_bytes('{"a":{}}', hlen=1000),
        "header length 1000 but the file has 16 bytes", "runs past the end of the file")
    bad("hlen_over_100mb", st_bytes("{}", hlen=200_000_000),
        "header length 200,000,000 > 100 MB", "exceeds the 100 MB limit")
    bad("hlen_u64_max", st_bytes("{}", hlen=2**64 - 1),
        "header length 2^64-1", "exceeds the 100 MB limit")
    bad("hlen_zero", st_bytes("", pad=False, hlen=0) + b"{}      ",
        "header length 0", "header is too short to be JSON")
    bad("hlen_one", st_bytes("{", pad=False), "header length 1 ('{')",
        "header is too short to be JSON")
    bad("header_not_json", st_bytes("{not json at all}"), "header is not JSON",
        "header is not valid JSON")
    bad("header_unterminated", st_bytes('{"a":{"dtype":"F32"'), "JSON object never closed",
        "header is not valid JSON")
    bad("header_leading_space", st_bytes(" {}"), "header starts with a space, not '{'",
        "header does not start with '{'")
    bad("header_bom", st_bytes(b"\xef\xbb\xbf{}"), "UTF-8 byte order mark before '{'",
        "header does not start with '{'")
    bad("header_array", st_bytes("[1,2,3]"), "header is a JSON array",
        "header does not start with '{'")
    bad("header_string", st_bytes('"{}"'), "header is a JSON string",
        "header does not start with '{'")
    bad("header_trailing_garbage", st_bytes("{}xyz"), "bytes after the JSON object",
        "trailing bytes after the JSON object")
    bad("header_two_objects", st_bytes("{}{}"), "two JSON objects",
        "trailing bytes after the JSON object")
    bad("header_nul_padding", st_bytes(b"{}\0\0\0\0\0\0", pad=False),
        "header padded with NUL bytes instead of spaces", "header contains a raw control byte")
    bad("header_control_byte", st_bytes(b'{\x01"a":' + json.dumps(one()).encode() + b"}",
                                        f32(1, 2)),
        "raw control byte 0x01 between JSON tokens", "header contains a raw control byte")
    bad("header_control_in_name", st_bytes(b'{"a\x1f":' + json.dumps(one()).encode() + b"}",
                                           f32(1, 2)),
        "raw control byte 0x1f inside a tensor name", "header contains a raw control byte")
    bad("header_deep_nesting", st_bytes('{"a":' + "[" * 3000 + "]" * 3000 + "}"),
        "arrays nested 3000 deep", "header is not valid JSON")
    bad("name_invalid_utf8", st_bytes(b'{"bad\xff":' + json.dumps(one()).encode() + b"}",
                                      f32(1, 2)),
        "byte 0xff in a tensor name", "header is not valid UTF-8")
    bad("name_overlong_utf8", st_bytes(b'{"\xc0\xaf":' + json.dumps(one()).encode() + b"}",
                                       f32(1, 2)),
        "overlong encoding of '/' in a tensor name", "header is not valid UTF-8")
    bad("name_surrogate_utf8", st_bytes(b'{"\xed\xa0\x80":' + json.dumps(one()).encode() + b"}",
                                        f32(1, 2)),
        "UTF-8-encoded surrogate U+D800 in a tensor name", "header is not valid UTF-8")
    bad("name_truncated_utf8", st_bytes(b'{"ab\xe2\x82":' + json.dumps(one()).encode() + b"}",
                                        f32(1, 2)),
        "tensor name ends inside a 3-byte UTF-8 sequence", "header is not valid UTF-8")
    bad("name_lone_surrogate_escape", st_bytes('{"\\ud800":' + json.dumps(one()) + "}", f32(1, 2)),
        "tensor name is the JSON escape of a lone surrogate", "header is not valid JSON")
    bad("name_empty", st_bytes({"": one()}, f32(1, 2)), "empty tensor name",
        "a tensor has an empty name")
    bad("name_nul_escape", st_bytes('{"\\u0000":' + json.dumps(one()) + "}", f32(1, 2)),
        "tensor name \\u0000 (empty as a C string)", "a tensor has an empty name")

    # truncations of VALID at every region
    bad("cut_in_length_prefix", VALID[:5], "cut inside the 8-byte length prefix",
        "too short for a safetensors header")
    bad("cut_in_header", VALID[:8 + VALID_N // 2], "cut in the middle of the header",
        "runs past the end of the file")
    bad("cut_at_header_end", VALID[:8 + VALID_N], "cut right after the header (no data)",
        "run past the end of the data section")
    bad("cut_in_first_tensor", VALID[:8 + VALID_N + 7], "cut in the middle of tensor 'a'",
        "run past the end of the data section")
    bad("cut_in_last_tensor", VALID[:len(VALID) - 1], "last byte of tensor 'b' missing",
        "run past the end of the data section")

    # offsets
    bad("offsets_reversed", st_bytes({"a": one(offs=(10, 4))}, bytes(10)),
        "data_offsets [10, 4]", "data_offsets [10, 4] are reversed")
    bad("offsets_overlap", st_bytes({"a": one(offs=(0, 8)), "b": one(offs=(4, 12))}, bytes(12)),
        "b [4, 12] overlaps a [0, 8]", "overlap the previous tensor")
    bad("offsets_same_range", st_bytes({"a": one(offs=(0, 8)), "b": one(offs=(0, 8))}, bytes(8)),
        "a and b both at [0, 8]", "overlap the previous tensor")
    bad("offsets_gap", st_bytes({"a": one(offs=(0, 8)), "b": one(offs=(12, 20))}, bytes(20)),
        "4 unused bytes between a and b", "gap of 4 bytes")
    bad("offsets_not_from_zero", st_bytes({"a": one(offs=(4, 12))}, bytes(12)),
        "the first tensor starts at 4", "gap of 4 bytes")
    bad("offsets_past_end", st_bytes({"a": one(offs=(0, 8))}, bytes(4)),
        "end 8 > data section length 4", "run past the end of the data section")
    bad("offsets_huge", st_bytes({"a": one(dtype="U8", shape=(2**40,), offs=(0, 2**40))}, bytes(4)),
        "a 1 TiB tensor in a tiny file", "run past the end of the data section")
    bad("data_trailing_bytes", st_bytes({"a": one(offs=(0, 8))}, bytes(12)),
        "4 data bytes after the last tensor", "not covered by any tensor")
    bad("data_no_tensors_trailing", st_bytes({}, bytes(3)),
        "no tensors but 3 data bytes", "not covered by any tensor")
    bad("offsets_three", st_bytes({"a": one(offs=(0, 4, 8))}, bytes(8)),
        "data_offsets with 3 entries", "data_offsets is not an array of two integers")
    bad("offsets_one", st_bytes({"a": one(offs=(8,))}, bytes(8)),
        "data_offsets with 1 entry", "data_offsets is not an array of two integers")
    bad("offsets_not_array", st_bytes({"a": one(extra={"data_offsets": "0-8"})}, bytes(8)),
        "data_offsets is a string", "data_offsets is not an array of two integers")
    bad("offsets_negative", st_bytes({"a": one(offs=(-8, 0))}, bytes(8)),
        "data_offsets [-8, 0]", "data_offsets are not non-negative integers")
    bad("offsets_fraction", st_bytes({"a": one(offs=(0, 7.5))}, bytes(8)),
        "data_offsets [0, 7.5]", "data_offsets are not non-negative integers")

    # shapes and sizes
    bad("size_mismatch", st_bytes({"a": one(shape=(3,), offs=(0, 8))}, bytes(8)),
        "F32 [3] needs 12 bytes, offsets give 8",
        "holds 8 bytes but dtype F32 and its shape need 12")
    bad("shape_overflow", st_bytes({"a": one(shape=(2**32, 2**32, 4), offs=(0, 8))}, bytes(8)),
        "shape product 2^66 overflows int64", "shape overflows the element count")
    bad("bytes_overflow", st_bytes({"a": one(shape=(2**31, 2**31), offs=(0, 8))}, bytes(8)),
        "2^62 F32 elements: byte size overflows int64", "byte size overflows")
    bad("shape_negative", st_bytes({"a": one(shape=(-2,), offs=(0, 8))}, bytes(8)),
        "dim -2", "shape[0] is not a non-negative integer")
    bad("shape_fraction", st_bytes({"a": one(shape=(2, 1.5), offs=(0, 8))}, bytes(8)),
        "dim 1.5", "shape[1] is not a non-negative integer")
    bad("shape_string_dim", st_bytes({"a": one(shape=("2",), offs=(0, 8))}, bytes(8)),
        "dim \"2\" is a string", "shape[0] is not a non-negative integer")
    bad("shape_above_2p53", st_bytes({"a": one(shape=(2**60, 0), offs=(0, 0))}),
        "dim 2^60 (not exact in a JSON double)", "shape[0] is not a non-negative integer")
    bad("shape_not_array", st_bytes({"a": one(extra={"shape": 2})}, bytes(8)),
        "shape is a number", "shape is not an array")

    # dtype
    bad("dtype_unknown_f8", st_bytes({"a": one(dtype="F8")}, bytes(8)), "dtype \"F8\"",
        "unknown dtype 'F8'")
    bad("dtype_lowercase", st_bytes({"a": one(dtype="f32")}, bytes(8)), "dtype \"f32\"",
        "unknown dtype 'f32'")
    bad("dtype_not_string", st_bytes({"a": one(dtype=32)}, bytes(8)), "dtype 32 (a number)",
        "dtype is not a string")

    # structure of entries
    bad("tensor_duplicate", st_bytes('{"a":%s,"a":%s}' % (json.dumps(one(offs=(0, 8))),
                                                          json.dumps(one(offs=(8, 16)))),
                                     bytes(16)),
        "tensor name 'a' twice", "tensor 'a' appears twice")
    bad("tensor_not_object", st_bytes({"a": [0, 8]}, bytes(8)), "tensor entry is an array",
        "tensor 'a' is not a JSON object")
    bad("tensor_missing_offsets", st_bytes({"a": one(drop=["data_offsets"])}, bytes(8)),
        "no data_offsets", "lacks 'data_offsets'")
    bad("tensor_missing_shape", st_bytes({"a": one(drop=["shape"])}, bytes(8)),
        "no shape", "lacks 'shape'")
    bad("tensor_missing_dtype", st_bytes({"a": one(drop=["dtype"])}, bytes(8)),
        "no dtype", "lacks 'dtype'")
    bad("tensor_extra_field", st_bytes({"a": one(extra={"offset": 0})}, bytes(8)),
        "unknown field 'offset'", "unexpected or repeated field 'offset'")
    bad("tensor_repeated_field",
        st_bytes('{"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}}', bytes(8)),
        "dtype given twice", "unexpected or repeated field 'dtype'")

    # __metadata__
    meta_t = json.dumps(one())
    bad("metadata_twice", st_bytes('{"__metadata__":{},"__metadata__":{},"a":%s}' % meta_t,
                                   f32(1, 2)),
        "two __metadata__ objects", "__metadata__ appears twice")
    bad("metadata_value_number", st_bytes({"__metadata__": {"n": 1}, "a": one()}, f32(1, 2)),
        "metadata value is a number", "__metadata__ value of 'n' is not a string")
    bad("metadata_value_object", st_bytes({"__metadata__": {"o": {"x": "y"}}, "a": one()},
                                          f32(1, 2)),
        "metadata value is an object", "__metadata__ value of 'o' is not a string")
    bad("metadata_value_null", st_bytes({"__metadata__": {"z": None}, "a": one()}, f32(1, 2)),
        "metadata value is null", "__metadata__ value of 'z' is not a string")
    bad("metadata_not_object", st_bytes({"__metadata__": "format=pt", "a": one()}, f32(1, 2)),
        "__metadata__ is a string", "__metadata__ is not a JSON object")
    bad("metadata_duplicate_key",
        st_bytes('{"__metadata__":{"k":"1","k":"2"},"a":%s}' % meta_t, f32(1, 2)),
        "metadata key 'k' twice", "__metadata__ key 'k' appears twice")


# ---- checkpoint level: HF folders and hm.config ----------------------------------

CONFIG = {"architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox",
          "vocab_size": 8, "hidden_size": 4, "num_hidden_layers": 1,
          "num_attention_heads": 2, "intermediate_size": 16,
          "max_position_embeddings": 32, "rotary_pct": 0.5, "rotary_emb_base": 10000,
          "layer_norm_eps": 1e-5, "use_parallel_residual": True, "hidden_act": "gelu",
          "tie_word_embeddings": False}


def shard(names, meta=None):
    """Valid safetensors with F32 [2] tensors named names."""
    h = {}
    if meta:
        h["__metadata__"] = meta
    for i, nm in enumerate(names):
        h[nm] = tensor("F32", [2], 8 * i, 8 * i + 8)
    return st_bytes(h, b"".join(f32(i + 1, -(i + 1)) for i in range(len(names))))


def shard_name(i, n):
    return "model-%05d-of-%05d.safetensors" % (i, n)


def folder(case, files, status, what, fragment, config=CONFIG):
    rel = "ckpt/" + case
    if config is not None:
        put(rel + "/config.json",
            (json.dumps(config, indent=2) + "\n").encode() if isinstance(config, dict)
            else config, None, None, None, None)
    for name, content in files.items():
        if content is None:
            os.makedirs(os.path.join(BAD, rel, name), exist_ok=True)
            put(rel + "/" + name + "/README", b"a directory where a shard should be\n",
                None, None, None, None)
        else:
            put(rel + "/" + name, content, None, None, None, None)
    rows.append((rel, "ckpt", status, what, fragment))


def index(wm):
    return (json.dumps({"metadata": {"total_size": 0}, "weight_map": wm}, indent=2)
            + "\n").encode()


def gen_ckpt():
    s1, s2, s3 = shard_name(1, 2), shard_name(2, 2), shard_name(3, 3)
    good = {s1: shard(["a", "b"]), s2: shard(["c"])}
    good_map = {"a": s1, "b": s1, "c": s2}
    folder("index_missing_shard", {"model.safetensors.index.json": index(good_map),
                                   s1: good[s1]}, "IO",
           "index names model-00002-of-00002.safetensors, which is absent", "named by index")
    folder("index_wrong_shard", dict(good, **{"model.safetensors.index.json":
                                              index({"a": s1, "b": s1, "c": s1})}), "FORMAT",
           "index maps 'c' to shard 1, but it is in shard 2", "which lacks it")
    folder("index_tensor_in_two_shards",
           {"model.safetensors.index.json": index(good_map), s1: shard(["a", "b"]),
            s2: shard(["a", "c"])}, "FORMAT",
           "tensor 'a' stored in both shards", "maps it to")
    folder("index_tensor_not_in_index",
           {"model.safetensors.index.json": index(good_map), s1: shard(["a", "b"]),
            s2: shard(["c", "d"])}, "FORMAT",
           "shard 2 holds 'd', which the index does not list", "is not in index")
    t1, t2 = shard_name(1, 3), shard_name(2, 3)
    folder("index_unnamed_shard",
           {"model.safetensors.index.json": index({"a": t1, "b": t1, "c": t2}),
            t1: shard(["a", "b"]), t2: shard(["c"]), s3: shard(["d"])}, "FORMAT",
           "model-00003-of-00003.safetensors present but not named by the index",
           "is not named by index")
    folder("index_not_json", dict(good, **{"model.safetensors.index.json": b"{weight_map: }\n"}),
           "FORMAT", "index is not JSON", "is not a JSON object")
    folder("index_array", dict(good, **{"model.safetensors.index.json": b"[\"a\"]\n"}),
           "FORMAT", "index is a JSON array", "is not a JSON object")
    folder("index_no_weight_map",
           dict(good, **{"model.safetensors.index.json": b'{"metadata": {}}\n'}), "FORMAT",
           "index lacks weight_map", "has no 'weight_map' object")
    folder("index_weight_map_array",
           dict(good, **{"model.safetensors.index.json": b'{"weight_map": ["a"]}\n'}), "FORMAT",
           "weight_map is an array", "has no 'weight_map' object")
    folder("index_empty_weight_map",
           dict(good, **{"model.safetensors.index.json": index({})}), "FORMAT",
           "weight_map is empty", "names no tensors")
    folder("index_value_not_string",
           dict(good, **{"model.safetensors.index.json": index({"a": 1})}), "FORMAT",
           "weight_map value is a number", "is not a string")
    folder("index_path_traversal",
           dict(good, **{"model.safetensors.index.json":
                         index({"a": "../index_wrong_shard/" + s1})}), "FORMAT",
           "shard name with '../' leaves the folder", "is not a file in the folder")
    folder("index_absolute_path",
           dict(good, **{"model.safetensors.index.json": index({"a": "/etc/passwd"})}), "FORMAT",
           "shard name is an absolute path", "is not a file in the folder")
    folder("index_dotdot", dict(good, **{"model.safetensors.index.json": index({"a": ".."})}),
           "FORMAT", "shard name '..'", "is not a file in the folder")
    folder("index_shard_is_dir",
           {"model.safetensors.index.json": index({"a": "sub"}), "sub": None}, "IO",
           "shard name is a directory", "is a directory")
    folder("index_shard_is_config",
           dict(good, **{"model.safetensors.index.json": index({"a": "config.json"})}), "FORMAT",
           "index names config.json as a shard", "named by index")
    folder("index_shard_malformed",
           {"model.safetensors.index.json": index({"a": s1}),
            s1: st_bytes({"a": one(offs=(10, 2))}, bytes(10))}, "FORMAT",
           "the named shard has reversed data_offsets", "are reversed")
    folder("config_missing", {"model.safetensors": shard(["a"])}, "INVALID",
           "model.safetensors without config.json", "no model config", config=None)
    folder("config_not_json", {"model.safetensors": shard(["a"])}, "FORMAT",
           "config.json is not JSON", "config is not valid JSON", config=b"{model_type: gpt_neox\n")
    folder("config_array", {"model.safetensors": shard(["a"])}, "FORMAT",
           "config.json is an array", "config is not a JSON object", config=b"[]\n")
    folder("config_heads_not_divisor", {"model.safetensors": shard(["a"])}, "INVALID",
           "hidden_size 4 with 3 heads", "is not a multiple of num_attention_heads",
           config=dict(CONFIG, num_attention_heads=3))
    folder("config_tied_embeddings", {"model.safetensors": shard(["a"])}, "UNSUPPORTED",
           "tie_word_embeddings true", "tie_word_embeddings is true",
           config=dict(CONFIG, tie_word_embeddings=True))
    folder("config_missing_hidden_size", {"model.safetensors": shard(["a"])}, "INVALID",
           "no hidden_size", "config lacks 'hidden_size'",
           config={k: v for k, v in CONFIG.items() if k != "hidden_size"})
    folder("config_hidden_size_string", {"model.safetensors": shard(["a"])}, "INVALID",
           "hidden_size \"4\" is a string", "config field 'hidden_size' is not an integer",
           config=dict(CONFIG, hidden_size="4"))
    folder("config_model_type_mistral", {"model.safetensors": shard(["a"])}, "UNSUPPORTED",
           "model_type mistral", "model_type 'mistral' is not supported",
           config=dict(CONFIG, model_type="mistral"))
    folder("config_is_dir", {"model.safetensors": shard(["a"]), "config.json": None},
           "INVALID", "config.json is a directory", "config.json' is not a regular file", config=None)
    folder("folder_without_model", {"notes.txt": b"no safetensors here\n"}, "INVALID",
           "a folder with config.json but no model file", "folder has neither")
    folder("model_malformed", {"model.safetensors": st_bytes({"a": one(dtype="F8")}, bytes(8))},
           "FORMAT", "model.safetensors has an unknown dtype", "unknown dtype 'F8'")

    # single files (no config.json beside them in ckpt/): hm.config metadata
    def hm_file(case, cfg_text, status, what, fragment):
        put("ckpt/%s.safetensors" % case, shard(["a"], {"hm.config": cfg_text}),
            "ckpt", status, what, fragment)

    hm_file("hmconfig_invalid_json", '{"arch": "gpt_neox", hidden_size: }', "FORMAT",
            "hm.config metadata is not JSON", "config is not valid JSON")
    hm_file("hmconfig_unknown_arch", json.dumps(dict(CONFIG, arch="mamba")), "UNSUPPORTED",
            "hm.config arch 'mamba'", "config 'arch' is not one of")
    hm_file("hmconfig_heads_not_divisor", json.dumps(dict(CONFIG, num_attention_heads=3)),
            "INVALID", "hm.config hidden_size 4 with 3 heads",
            "is not a multiple of num_attention_heads")
    put("ckpt/no_config.safetensors", shard(["a"]), "ckpt", "INVALID",
        "safetensors file without hm.config and without config.json beside it",
        "no model config")


def write_tables():
    rows.sort()
    with open(os.path.join(BAD, "expected.tsv"), "w") as fp:
        fp.write("# path\tlevel\tstatus\tmessage fragment  (generated by "
                 "tests/gen/make_bad_samples.py; level st = hm_st_open fails, "
                 "ckpt = hm_st_open may pass but hm_ckpt_open fails)\n")
        for rel, level, status, what, frag in rows:
            fp.write("%s\t%s\t%s\t%s\n" % (rel, level, status, frag))
    with open(os.path.join(BAD, "README.md"), "w") as fp:
        fp.write("# samples/bad — malformed inputs\n\n"
                 "Generated by `python3 tests/gen/make_bad_samples.py` (deterministic, "
                 "stdlib only); do not edit by hand. `expected.tsv` holds the same table "
                 "for the tests:\n\n"
                 "- `tests/test_safetensors.c`: every `st` row → `hm_st_open()` fails with "
                 "the status and a message containing the fragment;\n"
                 "- `tests/test_checkpoint.c`: every `ckpt` row → `hm_ckpt_open()` fails "
                 "likewise (the `st` rows fail there too);\n"
                 "- `tests/cli/malformed.sh`: `hm-inspect` on every row exits 1, names the "
                 "path on stderr, prints nothing on stdout and does not crash.\n\n"
                 "Cases built at test time instead: a directory given as a file, every "
                 "prefix of a valid file, unreadable files.\n\n"
                 "%d cases (%d file-level, %d checkpoint-level).\n\n"
                 "| file | what is wrong | status | expected message fragment |\n"
                 "| --- | --- | --- | --- |\n"
                 % (len(rows), sum(r[1] == "st" for r in rows),
                    sum(r[1] == "ckpt" for r in rows)))
        for rel, level, status, what, frag in rows:
            fp.write("| `%s` | %s | %s | %s |\n" % (rel, what.replace("|", "\\|"), status,
                                                   frag.replace("|", "\\|")))


def write_corpus():
    """Seeds for the fuzzers: small valid files plus the bad samples."""
    for target in ("fuzz_safetensors", "fuzz_config", "fuzz_index", "fuzz_checkpoint"):
        d = os.path.join(CORPUS, target)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    d = os.path.join(CORPUS, "fuzz_safetensors")
    seeds = {
        "valid_basic": VALID,
        "valid_empty_header": st_bytes({}),
        "valid_scalar_and_zero": st_bytes({"s": tensor("F32", [], 0, 4),
                                           "z": tensor("BF16", [0, 3], 4, 4),
                                           "u": tensor("U8", [3], 4, 7)}, f32(1.5) + b"\1\2\3"),
        "valid_all_dtypes": st_bytes(
            {dt: tensor(dt, [1], o, o + sz) for dt, sz, o in
             [("BOOL", 1, 0), ("U8", 1, 1), ("I8", 1, 2), ("I16", 2, 3), ("U16", 2, 5),
              ("F16", 2, 7), ("BF16", 2, 9), ("I32", 4, 11), ("U32", 4, 15), ("F32", 4, 19),
              ("F64", 8, 23), ("I64", 8, 31), ("U64", 8, 39)]}, bytes(range(47))),
        "valid_meta": shard(["x.weight", "x.bias"], {"format": "pt",
                                                     "hm.config": json.dumps(CONFIG)}),
        # found by fuzz_safetensors: the writer rounded this dim (cJSON printed
        # integers above 10^15 with 15 digits), so the re-read file differed
        "regress_dim_above_1e15": st_bytes('{"a":{"dtype":"F32","shape":[0008000000000000001,0],'
                                           '"data_offsets":[0,0]}}'),
    }
    for name, content in seeds.items():
        with open(os.path.join(d, name + ".safetensors"), "wb") as fp:
            fp.write(content)
    for rel, level, status, what, frag in rows:
        src = os.path.join(BAD, rel)
        if os.path.isfile(src):
            shutil.copyfile(src, os.path.join(d, rel.replace("/", "_")))
    d = os.path.join(CORPUS, "fuzz_config")
    cfgs = {
        "pythia70m.json": dict(CONFIG, vocab_size=50304, hidden_size=512, num_hidden_layers=6,
                               num_attention_heads=8, intermediate_size=2048,
                               max_position_embeddings=2048, rotary_pct=0.25),
        "hedgehog.json": dict(CONFIG, arch="hedgehog", feature_dim=64),
        "hedgemamba.json": dict(CONFIG, arch="hedgemamba", conv_width=4,
                                components=["ssm", "conv", "gate"]),
        "tied.json": dict(CONFIG, tie_word_embeddings=True),
        "rope_theta.json": {k: v for k, v in dict(CONFIG, rope_theta=500000.0).items()
                            if k != "rotary_emb_base"},
    }
    for name, c in cfgs.items():
        with open(os.path.join(d, name), "w") as fp:
            json.dump(c, fp, indent=1)
    d = os.path.join(CORPUS, "fuzz_index")
    s1, s2 = shard_name(1, 2), shard_name(2, 2)
    idx = {"good.json": {"metadata": {"total_size": 24}, "weight_map": {"a": s1, "b": s1, "c": s2}},
           "wrong_shard.json": {"weight_map": {"a": s1, "b": s1, "c": s1}},
           "traversal.json": {"weight_map": {"a": "../" + s1}},
           "missing.json": {"weight_map": {"a": shard_name(1, 3)}}}
    for name, c in idx.items():
        with open(os.path.join(d, name), "w") as fp:
            json.dump(c, fp)
    # fuzz_checkpoint: byte 0 even = a whole file (its hm.config and
    # hm.provenance), odd = a config.json beside the target's fixed file
    d = os.path.join(CORPUS, "fuzz_checkpoint")
    chain = json.dumps([{"tool": "hm-init", "version": "0.1.0", "args": ["hm-init"],
                         "inputs": [{"path": "x", "xxh3": "0123456789abcdef"}],
                         "start": "2026-12-07T00:00:00Z", "end": "2026-12-07T00:00:01Z"}])
    tiny = dict(CONFIG, hidden_size=8)  # the target's fixed hm.config (CONFIG's rotary dims are odd)
    cks = {"file_no_provenance": b"\0" + shard(["a"], {"hm.config": json.dumps(tiny)}),
           "file_provenance": b"\0" + shard(["a"], {"hm.config": json.dumps(tiny),
                                                    "hm.provenance": chain}),
           "file_foreign_object": b"\0" + shard(["a"], {"hm.config": json.dumps(tiny),
                                                        "hm.provenance": '{"tool": "other"}'}),
           "file_foreign_strings": b"\0" + shard(["a"], {"hm.config": json.dumps(tiny),
                                                         "hm.provenance": '["a", 1]'}),
           # found by fuzz_checkpoint: a key given twice is refused by the
           # reader (the file's shape), naming the key: the target's oracle
           # had taken that for a refusal because of the provenance
           "regress_provenance_twice": b"\0" + st_bytes(
               '{"__metadata__":{"hm.config":%s,"hm.provenance":"[]","hm.provenance":"[]"},'
               '"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}' % json.dumps(json.dumps(tiny)),
               f32(1, 2)),
           "json_same": b"\1" + json.dumps(tiny).encode(),
           "json_other_eps": b"\1" + json.dumps(dict(tiny, layer_norm_eps=1e-3)).encode(),
           "json_other_heads": b"\1" + json.dumps(dict(tiny, num_attention_heads=1)).encode(),
           "json_not_json": b"\1" + b"{not json"}
    for name, content in cks.items():
        with open(os.path.join(d, name), "wb") as fp:
            fp.write(content)


def main():
    if os.path.isdir(BAD):
        for entry in os.listdir(BAD):
            p = os.path.join(BAD, entry)
            shutil.rmtree(p) if os.path.isdir(p) else os.unlink(p)
    os.makedirs(BAD, exist_ok=True)
    gen_files()
    gen_ckpt()
    write_tables()
    write_corpus()
    print("make_bad_samples: %d cases in %s" % (len(rows), BAD))


if __name__ == "__main__":
    main()
