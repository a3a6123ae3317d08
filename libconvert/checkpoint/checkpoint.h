/* checkpoint.h — one logical checkpoint over one or more safetensors files.
 *
 * hm_ckpt_open() accepts:
 *   - a safetensors file written by hm (config from `hm.config` metadata), or
 *     any safetensors file with a config.json beside it;
 *   - "-": a safetensors file on stdin (needs hm.config);
 *   - a HuggingFace folder: config.json plus model.safetensors, or plus
 *     model.safetensors.index.json and its shards;
 *   - a model.safetensors.index.json path (config.json beside it);
 *   - a bundle (contract §5, bundle.h): a folder holding MANIFEST.json, or an
 *     archive file (tar, tar.gz, tar.xz, tar.zst, zip) told by its content,
 *     also on stdin. Its manifest is checked without hashing (hm_bundle_check;
 *     hm-verify bundle checks every hash); the config is the weights'
 *     hm.config, else the bundle's config.json.
 * A sharded set is cross-checked: every index entry must exist in the shard
 * it names; a tensor in two shards, a tensor missing from the index, a shard
 * file named like the others but absent from the index, or a shard path that
 * leaves the folder is an error.
 */
#ifndef HM_CHECKPOINT_H
#define HM_CHECKPOINT_H

#include <stdint.h>

#include "config.h"
#include "hm_error.h"
#include "safetensors.h"

struct hm_ckpt;

/* Borrowed view of one tensor (valid until hm_ckpt_close). */
struct hm_ckpt_tensor {
    const char *name;
    enum hm_dtype dtype;
    int ndim;
    const int64_t *shape;  /* [ndim] */
    int64_t numel;
    size_t nbytes;
    int file;              /* index into the checkpoint's files */
};

/* out: owned, free with hm_ckpt_close(). */
enum hm_status hm_ckpt_open(const char *path, struct hm_ckpt **out, struct hm_error *err);
void hm_ckpt_close(struct hm_ckpt *ck);

/* Borrowed: the parsed config. */
const struct hm_config *hm_ckpt_config(const struct hm_ckpt *ck);
/* Where the config came from: "hm.config", or the config.json path. Borrowed. */
const char *hm_ckpt_config_source(const struct hm_ckpt *ck);

/* Tensors over all files, sorted by name. */
int64_t hm_ckpt_n_tensors(const struct hm_ckpt *ck);
const struct hm_ckpt_tensor *hm_ckpt_tensor_at(const struct hm_ckpt *ck, int64_t i);
int64_t hm_ckpt_find(const struct hm_ckpt *ck, const char *name); /* -1 if absent */
/* Borrowed raw little-endian bytes, valid until hm_ckpt_close(). */
const void *hm_ckpt_data_view(const struct hm_ckpt *ck, int64_t i);
/* Done with tensor i's bytes for now (hm_st_data_release): loaders call it
 * after converting a tensor, so a mapped checkpoint does not stay resident
 * beside the model made from it. */
void hm_ckpt_data_release(const struct hm_ckpt *ck, int64_t i);
/* Adds tensor i of ck to w as `name`, byte for byte in its dtype, written
 * from ck's bytes, whose pages are released once written (a save of a
 * model's frozen tensors does not make the file resident). */
enum hm_status hm_ckpt_writer_add_tensor(struct hm_st_writer *w, const char *name,
                                         const struct hm_ckpt *ck, int64_t i,
                                         struct hm_error *err);

/* Load tensor `name` converted to F32 into dst[numel]. The stored shape must
 * equal shape[ndim] exactly; errors name the tensor and both shapes. */
enum hm_status hm_ckpt_load_f32(const struct hm_ckpt *ck, const char *name, int ndim,
                                const int64_t *shape, float *dst, struct hm_error *err);

/* Files. Borrowed strings. */
int hm_ckpt_n_files(const struct hm_ckpt *ck);
const char *hm_ckpt_file_path(const struct hm_ckpt *ck, int i);
size_t hm_ckpt_file_size(const struct hm_ckpt *ck, int i);
/* The path given to hm_ckpt_open. */
const char *hm_ckpt_path(const struct hm_ckpt *ck);

/* The tokenizer file a bundle (contract §5) carries: borrowed bytes valid until
 * hm_ckpt_close(), *len bytes; NULL when ck is not a bundle or has none.
 * (tokenizer.json, else tokenizer.bin: hm_tokenizer_load_memory tells them apart.) */
const void *hm_ckpt_bundle_tokenizer(const struct hm_ckpt *ck, size_t *len);

/* The bundle ck was read from (borrowed, valid until hm_ckpt_close), or NULL. */
struct hm_bundle;
struct hm_bundle *hm_ckpt_bundle(const struct hm_ckpt *ck);

/* Metadata of the first file (`hm.provenance` etc.); NULL if absent. */
const char *hm_ckpt_metadata_get(const struct hm_ckpt *ck, const char *key);

/* The file's hm.provenance chain (contract §5) as a writer extends it:
 * borrowed, valid until hm_ckpt_close; NULL when absent or foreign. */
const char *hm_ckpt_provenance(const struct hm_ckpt *ck);
/* When the file has an hm.provenance that is not an hm chain (another
 * tool's, another shape): why (borrowed); else NULL. The text itself stays
 * verbatim in hm_ckpt_metadata_get(ck, "hm.provenance"); the weights load
 * as usual (readers warn and go on, writers start a fresh chain). */
const char *hm_ckpt_provenance_foreign(const struct hm_ckpt *ck);
/* When a config.json beside the weights disagrees with the file's own
 * hm.config: which fields, and which one wins (a file: hm.config; a
 * folder: config.json) (borrowed); else NULL.
 * Tools print it as a warning (hm_cli_ckpt_notes). */
const char *hm_ckpt_config_note(const struct hm_ckpt *ck);

/* 1 for legacy GPT-NeoX buffers that are not parameters: attention.bias,
 * attention.masked_bias, attention.rotary_emb.inv_freq (contract §1). */
int hm_is_ignored_buffer(const char *name);

#endif
