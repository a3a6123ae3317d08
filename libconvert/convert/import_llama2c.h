/* import_llama2c.h — llama2.c checkpoints (karpathy/llama2.c `run.c`, the
 * legacy "version 0" export) converted exactly into an hm llama teacher
 * (contract §1b, HuggingFace LlamaForCausalLM semantics and names).
 *
 * On-disk format (native little-endian, no padding, no magic):
 *
 *   int32 dim           d
 *   int32 hidden_dim    I
 *   int32 n_layers      L
 *   int32 n_heads       n_h
 *   int32 n_kv_heads    n_kv
 *   int32 vocab_size    V; negative: an untied classifier `wcls` follows at
 *                       the end (|V| rows); positive: the classifier is the
 *                       token embedding
 *   int32 seq_len       S
 *   then fp32 arrays, p = d / n_h, each matrix row-major [out, in]
 *   (llama2.c matmul computes W (out, in) @ x, like PyTorch nn.Linear):
 *     token_embedding  [V, d]
 *     rms_att          [L, d]
 *     wq               [L, n_h·p, d]
 *     wk               [L, n_kv·p, d]
 *     wv               [L, n_kv·p, d]
 *     wo               [L, d, n_h·p]
 *     rms_ffn          [L, d]
 *     w1               [L, I, d]     (gate)
 *     w2               [L, d, I]     (down)
 *     w3               [L, I, d]     (up)
 *     rms_final        [d]
 *     freq_cis_real    [S, p/2]      (ignored: RoPE is recomputed)
 *     freq_cis_imag    [S, p/2]      (ignored)
 *     wcls             [V, d]        (only when the stored vocab_size < 0)
 *   The file ends exactly there: a file shorter or longer than the header
 *   implies is refused. (llama2.c's later exports start with the magic
 *   0x616b3432 "ak42" and a version; those are recognized and refused.)
 *
 * RoPE: llama2.c rotates adjacent pairs (2i, 2i+1) of each head; HF rotates
 * (i, i + p/2). The conversion permutes the rows of wq and wk within each
 * head — row 2i + s of a head becomes row i + s·p/2 (s ∈ {0, 1}, i < p/2),
 * HF's `permute` of llama2.c export.py — so q·k and hence the model are
 * unchanged. Every other tensor is copied; the output is fp32 and every
 * value is bit-identical to one of the input's.
 *
 * Output names: model.embed_tokens.weight, model.layers.{l}.input_layernorm
 * .weight (rms_att), .self_attn.{q,k,v,o}_proj.weight, .post_attention_layernorm
 * .weight (rms_ffn), .mlp.gate_proj (w1), .mlp.up_proj (w3), .mlp.down_proj
 * (w2), model.norm.weight (rms_final), lm_head.weight (wcls, untied only).
 * Config: family llama, mixer softmax, rms_norm_eps 1e-5, rope_theta 10000,
 * max_position_embeddings S, tie_word_embeddings = (stored vocab_size > 0),
 * no biases.
 *
 * Input is hostile: every size is checked (overflow included) before any
 * read, non-finite weights are refused naming the tensor, and memory use is
 * one tensor at a time (reads with pread; nothing is mapped).
 */
#ifndef HM_IMPORT_LLAMA2C_H
#define HM_IMPORT_LLAMA2C_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "hm_error.h"

#define HM_LLAMA2C_HEADER_BYTES 28
#define HM_LLAMA2C_MAGIC 0x616b3432u /* "ak42": llama2.c version >= 1 exports */

/* The header as read and validated. */
struct hm_llama2c_header {
    int64_t dim;            /* d */
    int64_t hidden_dim;     /* I */
    int64_t n_layers;       /* L */
    int64_t n_heads;        /* n_h */
    int64_t n_kv_heads;     /* n_kv */
    int64_t vocab_size;     /* |V| (the sign removed) */
    int64_t seq_len;        /* S */
    int shared_classifier;  /* 1: stored vocab_size > 0 (tied), 0: wcls follows */
    int64_t head_size;      /* p = d / n_h */
    uint64_t file_bytes;    /* the exact file size this header implies */
};

/* Decode and validate the 28-byte header at buf[len] (len may be the whole
 * file or just its start) against the actual file size: positive dims,
 * d % n_h == 0, n_h % n_kv == 0, p even, no overflow, and file_size equal to
 * the size the header implies (the message gives both byte counts). */
enum hm_status hm_llama2c_parse_header(const void *buf, size_t len, uint64_t file_size,
                                       struct hm_llama2c_header *h, struct hm_error *err);

/* One output tensor, HF name and shape. */
struct hm_llama2c_tensor {
    char name[80];
    const char *src_name;   /* llama2.c's name ("wq", "token_embedding", ...) */
    int64_t layer;          /* -1 when not per layer */
    int ndim;
    int64_t shape[2];
    int64_t numel;
    uint64_t offset;        /* byte offset of the source array in the file */
    int64_t rope_heads;     /* > 0: rows permuted within each of this many heads */
};

/* An open, validated checkpoint. */
struct hm_llama2c;

/* Opens path read-only. Refuses directories and anything that is not a
 * regular file (a FIFO does not block), then validates the header against
 * the file size and builds the config. No weight is read yet.
 * out: owned, free with hm_llama2c_close(). */
enum hm_status hm_llama2c_open(const char *path, struct hm_llama2c **out,
                               struct hm_error *err);
/* Same over data[len], borrowed: it must outlive the handle. */
enum hm_status hm_llama2c_open_memory(const void *data, size_t len, struct hm_llama2c **out,
                                      struct hm_error *err);
/* Accepts NULL. */
void hm_llama2c_close(struct hm_llama2c *m);

/* Borrowed, valid until hm_llama2c_close(). */
const struct hm_llama2c_header *hm_llama2c_get_header(const struct hm_llama2c *m);
/* Borrowed: the llama config (hm_config_finish already applied). */
const struct hm_config *hm_llama2c_get_config(const struct hm_llama2c *m);

/* Output tensors, in llama2.c file order. Borrowed. */
int64_t hm_llama2c_n_tensors(const struct hm_llama2c *m);
const struct hm_llama2c_tensor *hm_llama2c_tensor_at(const struct hm_llama2c *m, int64_t i);
/* Total parameters (sum of numel over the output tensors). */
int64_t hm_llama2c_n_params(const struct hm_llama2c *m);

/* Tensor i in the HF layout (q/k rows permuted) into dst[numel] (fp32).
 * Non-finite values are refused (HM_ERR_NUMERIC) naming the tensor. */
enum hm_status hm_llama2c_read_tensor(const struct hm_llama2c *m, int64_t i, float *dst,
                                      struct hm_error *err);

/* Scan every weight the import uses (freq_cis excluded) for NaN/Inf, with a
 * bounded buffer; the first one is reported with the tensor, element and
 * byte offset. */
enum hm_status hm_llama2c_check_finite(const struct hm_llama2c *m, struct hm_error *err);

/* Write the converted checkpoint to path ("-" = stdout) as F32 safetensors
 * with hm.config and provenance (hm.provenance JSON text, or NULL), atomically
 * (flags: HM_AFILE_FORCE to replace an existing file). All weights are checked
 * to be finite before the first byte is written. */
enum hm_status hm_llama2c_write(const struct hm_llama2c *m, const char *path, int flags,
                                const char *provenance, struct hm_error *err);

#endif
