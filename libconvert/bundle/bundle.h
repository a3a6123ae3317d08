/* bundle.h — hm bundles (contract §5 "Bundles"; docs/bundle.md): a model packed
 * for downstream runtimes, as a directory or an archive (tar, tar.gz,
 * tar.xz, tar.zst, zip), every entry at the root:
 *
 *   MANIFEST.json      {"format": "hm-bundle", "version": 1,
 *                       "files": {path: {"bytes": N, "xxh3": "16 hex"}},
 *                       "tensors": {name: {"dtype", "shape", "xxh3"}},
 *                       "provenance": [...]}   every other file, every tensor
 *   README.md          the model card
 *   config.json        HF field names (model_type gpt_neox | llama |
 *                      hedgehog | hedgemamba, plus arch, family, student fields)
 *   model.safetensors  HF tensor names, hm.config and hm.provenance metadata;
 *                      or, past hm-pack's --shard-size (contract §11):
 *   model-00001-of-0000N.safetensors ...   the shards, each with that metadata
 *   model.safetensors.index.json           {"metadata": {"total_size"},
 *                                           "weight_map": {tensor: shard}}
 *   onnx/model.onnx    optional (contract §9)
 *   onnx/model.onnx.data  its external data, past 2 GiB (contract §11)
 *   tokenizer.json     a HuggingFace tokenizer, or tokenizer.bin (llama2.c)
 *
 * Reading: a directory holding MANIFEST.json (its files may be symlinks, as
 * in a HuggingFace cache snapshot: they are followed for reading), or an
 * archive told by its content (archive_read.h: members are read into memory
 * with a size cap, unsafe entries refused, nothing is ever extracted).
 * hm_ckpt_open() opens bundles through this API, so every tool reads them.
 */
#ifndef HM_BUNDLE_H
#define HM_BUNDLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "archive_write.h"
#include "config.h"
#include "hm_error.h"
#include "safetensors.h"
#include "st_index.h"

#define HM_BUNDLE_MANIFEST "MANIFEST.json"
#define HM_BUNDLE_WEIGHTS "model.safetensors"
#define HM_BUNDLE_INDEX HM_ST_INDEX_NAME /* sharded weights (st_index.h) */
/* hm-pack's default --shard-size: HF save_pretrained's "5GB" */
#define HM_BUNDLE_SHARD_SIZE 5000000000ull
#define HM_BUNDLE_ONNX "onnx/model.onnx"
#define HM_BUNDLE_ONNX_DATA "onnx/model.onnx.data" /* location "model.onnx.data" */
#define HM_BUNDLE_FORMAT_NAME "hm-bundle"
#define HM_BUNDLE_VERSION 1
/* the largest MANIFEST.json, config.json, README.md or tokenizer file read */
#define HM_BUNDLE_MAX_SMALL_FILE (512u << 20)
/* a directory bundle's folders are followed this deep */
#define HM_BUNDLE_MAX_DEPTH 8
/* a directory bundle's walk sees at most this many files and folders
 * (symlinks followed), and reaches no folder twice: a folder that two
 * symlinks lead to is refused, so 10 links per level cannot fan out to
 * 10^depth paths */
#define HM_BUNDLE_MAX_ENTRIES 10000
/* Housekeeping entries at a bundle's root that are not part of the bundle:
 * a git clone's (.git, .gitattributes, .gitignore, .gitmodules) and the
 * HuggingFace hub's local-download metadata (.cache, .huggingface). Every
 * reader skips them (folders and archives alike), so hm-verify bundle does
 * not ask MANIFEST.json to cover them. */
#define HM_BUNDLE_HOUSEKEEPING \
    ".git", ".gitattributes", ".gitignore", ".gitmodules", ".cache", ".huggingface"

/* Output kinds of hm_bundle_pack: a directory, or an enum hm_archive_format. */
#define HM_BUNDLE_DIR (-1)

struct hm_ckpt;
struct hm_bundle;

/* ---- reading -------------------------------------------------------------- */

/* 1 if path is a bundle by its shape: a directory with MANIFEST.json, or a
 * file whose first bytes are an archive's (hm_archive_sniff). */
int hm_bundle_detect(const char *path);
/* Same for a file's first bytes head: [n] (512 suffice): 1 for an archive,
 * 0 for anything else (a safetensors file's u64 length + '{' is never taken
 * for an archive). */
int hm_bundle_sniff(const unsigned char *head, size_t n);

/* 1 when the path name inside a bundle is, or lies under, a
 * HM_BUNDLE_HOUSEKEEPING entry. */
int hm_bundle_is_housekeeping(const char *name);

/* Opens the container: lists a directory's files (symlinks followed; a
 * file that is not regular, e.g. a FIFO, is HM_ERR_INVALID) or reads an
 * archive's members (archive_read.h; unsafe entries HM_ERR_INVALID). No
 * MANIFEST.json is HM_ERR_UNSUPPORTED ("not a bundle"). "-" reads an
 * archive from stdin. The manifest is not
 * checked here: see hm_bundle_check and hm_bundle_verify.
 * out: owned, free with hm_bundle_close(). */
enum hm_status hm_bundle_open(const char *path, struct hm_bundle **out, struct hm_error *err);
/* Same for an archive held in memory buf: [len] (borrowed for the call);
 * name is used in messages. */
enum hm_status hm_bundle_open_memory(const void *buf, size_t len, const char *name,
                                     struct hm_bundle **out, struct hm_error *err);
void hm_bundle_close(struct hm_bundle *b); /* accepts NULL */

/* What tools need before they trust a bundle, without hashing: MANIFEST.json
 * parses, format "hm-bundle", version 1, model.safetensors or
 * model.safetensors.index.json present (not both), and every file the
 * manifest lists exists with the listed size. */
enum hm_status hm_bundle_check(struct hm_bundle *b, struct hm_error *err);

/* "dir" or the archive format ("tar", "tar.gz", ...; "archive" when read
 * from memory without knowing). Static storage. */
const char *hm_bundle_kind_name(const struct hm_bundle *b);
const char *hm_bundle_path(const struct hm_bundle *b); /* borrowed */

/* Files, MANIFEST.json included, sorted by name. Borrowed strings. */
int64_t hm_bundle_n_files(const struct hm_bundle *b);
const char *hm_bundle_file_name(const struct hm_bundle *b, int64_t i);
uint64_t hm_bundle_file_size(const struct hm_bundle *b, int64_t i);
int64_t hm_bundle_find(const struct hm_bundle *b, const char *name); /* -1 if absent */
/* A directory bundle's file on disk (borrowed), NULL for archive members. */
const char *hm_bundle_file_disk_path(const struct hm_bundle *b, int64_t i);

/* The bytes of file i: borrowed, valid until hm_bundle_close (a directory
 * bundle's file is read on first use; files above HM_BUNDLE_MAX_SMALL_FILE
 * are refused, hash those with hm_bundle_file_xxh3). */
enum hm_status hm_bundle_file_data(struct hm_bundle *b, int64_t i, const void **data,
                                   size_t *len, struct hm_error *err);
/* XXH3-64 of file i (streamed for a directory bundle's file). */
enum hm_status hm_bundle_file_xxh3(const struct hm_bundle *b, int64_t i, uint64_t *h,
                                   struct hm_error *err);

/* The safetensors file name of the bundle (model.safetensors, a shard): a
 * directory's file is mapped, an archive's member is borrowed (the bundle
 * must outlive *out). Errors name it. out: owned, free with hm_st_close(). */
enum hm_status hm_bundle_open_member(const struct hm_bundle *b, const char *name,
                                     struct hm_st_file **out, struct hm_error *err);

/* The tokenizer file: "tokenizer.json" or else "tokenizer.bin"; -1 when the
 * bundle has none. */
int64_t hm_bundle_tokenizer_index(const struct hm_bundle *b);

/* ---- verifying (hm-verify bundle) ----------------------------------------- */

/* One finding: the member (file) and, for a tensor, its name (or NULL). */
typedef void (*hm_bundle_finding_fn)(void *ctx, const char *member, const char *tensor,
                                     const char *msg);

struct hm_bundle_verify_stats {
    int64_t files, tensors; /* checked */
    int64_t findings;
};

/* Checks every checksum of the bundle at path, and that the manifest covers
 * exactly the bundle's files and the weights' tensors, with the weights'
 * hm.provenance equal to the manifest's. Each problem is reported through
 * fn (may be NULL) and counted in stats->findings. An archive entry that
 * is unsafe (archive_read.h) is a finding too. Returns HM_OK when the check
 * ran; an error when it could not (unreadable, not a bundle, corrupt
 * compressed stream, over the memory cap). */
enum hm_status hm_bundle_verify(const char *path, hm_bundle_finding_fn fn, void *ctx,
                                struct hm_bundle_verify_stats *stats, struct hm_error *err);

/* ---- packing (hm-pack) ---------------------------------------------------- */

struct hm_bundle_pack_opts {
    int kind;              /* HM_BUNDLE_DIR or an enum hm_archive_format */
    int dtype;             /* -1: each tensor keeps its stored dtype (F64: F32);
                              else HM_DTYPE_F32, HM_DTYPE_F16 or HM_DTYPE_BF16 */
    const void *tokenizer; /* [tokenizer_len] bytes of the tokenizer file (required) */
    size_t tokenizer_len;
    const char *tokenizer_name; /* "tokenizer.json" or "tokenizer.bin" */
    const char *tokenizer_desc; /* for the model card, e.g. "(llama2.c, 512 tokens)"; may be NULL */
    int64_t bos_id, eos_id;     /* for config.json; -1 to omit */
    const void *onnx;      /* [onnx_len] bytes of onnx/model.onnx, or NULL */
    size_t onnx_len;
    /* onnx/model.onnx.data (the graph's external data), or NULL: none.
     * onnx_data_write(onnx_data_ctx, fp, err) writes its onnx_data_len bytes,
     * streamed; it is called twice (a pass that only hashes, for the
     * manifest, then the output), and both calls must give the same bytes. */
    enum hm_status (*onnx_data_write)(void *ctx, FILE *fp, struct hm_error *err);
    void *onnx_data_ctx;
    uint64_t onnx_data_len;
    const char *provenance; /* the whole chain, hm-pack's entry included (JSON array) */
    uint64_t shard_size;   /* weights past this many tensor bytes are sharded
                              (st_index.h); 0: HM_BUNDLE_SHARD_SIZE */
    int64_t mtime;         /* archive entry times (SOURCE_DATE_EPOCH or 0) */
    int force;             /* replace an existing output (a file, or a bundle folder) */
    int dry_run;           /* check and hash everything, write nothing */
};

struct hm_bundle_pack_result {
    int64_t tensors;        /* packed */
    int64_t dropped_buffers; /* legacy buffers (hm_is_ignored_buffer), not packed */
    int64_t dropped_other;   /* other tensors outside the architecture's table, not packed */
    char first_other[256];   /* the first of those, "" if none */
    uint64_t weights_bytes; /* model.safetensors, or all the shards */
    int64_t shards;         /* weights shards written; 0: one model.safetensors */
    uint64_t total_bytes;   /* of every file */
    int64_t files;          /* MANIFEST.json included */
};

/* Packs ck (its tensors listed by the model's own table, params.c) into
 * out_path as o->kind, atomically (a temp file or folder renamed into
 * place); nothing appears at out_path on failure. A conversion to F16/BF16
 * that would overflow a finite value is refused naming the tensor. Weights
 * whose tensors hold more than o->shard_size bytes are written as HF
 * shards with model.safetensors.index.json (contract §11). res may be
 * NULL. */
enum hm_status hm_bundle_pack(const struct hm_ckpt *ck, const char *out_path,
                              const struct hm_bundle_pack_opts *o,
                              struct hm_bundle_pack_result *res, struct hm_error *err);

/* ---- pieces (bundle_config.c, bundle_card.c, bundle_prov.c) -------------------------------- */

/* config.json of a bundle: hm_config_to_json's fields with model_type set
 * to the arch, plus architectures, torch_dtype and the token ids given
 * (< 0: omitted). owned: free with free(); NULL on allocation failure. */
char *hm_bundle_config_json(const struct hm_config *cfg, const char *torch_dtype,
                            int64_t bos_id, int64_t eos_id);

struct hm_bundle_card_file {
    const char *name;
    uint64_t bytes;
};

/* tokenizer.json (HuggingFace BPE, ByteLevel, no merges, no normalizer)
 * equal to the byte-level vocabulary: id b is byte b, 256 <|endoftext|>.
 * owned: free with free(), *len bytes; NULL on allocation failure. */
char *hm_bundle_bytes_tokenizer_json(size_t *len);

/* README.md model card: what the model is, how it was made (the provenance
 * chain tool by tool with arguments), the evaluations the chain records,
 * and the files. owned: free with free(); NULL on allocation failure. */
char *hm_bundle_card(const struct hm_config *cfg, int64_t n_params, const char *dtypes,
                     const char *tokenizer_desc, const char *provenance,
                     const struct hm_bundle_card_file *files, int n_files);

/* hm-pack's own provenance entry appended to prev (JSON array text, NULL or
 * "" for none): tool, version, args [nargs], inputs (path, xxh3) — and no
 * wall-clock time, so the same input and flags give the same bundle.
 * *out: owned, free with free(). */
struct hm_prov_input;
enum hm_status hm_bundle_provenance(const char *prev, const char *const *args, int nargs,
                                    const struct hm_prov_input *inputs, int n_inputs,
                                    char **out, struct hm_error *err);

/* The tokenizer path the chain names, newest entry first: an entry's
 * "tokenizer" string or the value of a "--tokenizer" argument ("--tokenizer
 * X" or "--tokenizer=X") that names an existing file. *out: owned path, or
 * NULL when none exists. */
enum hm_status hm_bundle_tokenizer_from_provenance(const char *chain, char **out,
                                                   struct hm_error *err);

#endif
