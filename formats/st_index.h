/* st_index.h — sharded safetensors checkpoints, as HuggingFace's
 * save_pretrained writes them (contract §11 "Sharded checkpoints"):
 *
 *   model-00001-of-0000N.safetensors ... model-0000N-of-0000N.safetensors
 *       each a valid safetensors file holding some of the tensors
 *   model.safetensors.index.json
 *       {"metadata": {"total_size": BYTES}, "weight_map": {tensor: shard file}}
 *       total_size: the sum of the tensors' data bytes (headers not counted)
 *
 * Reading (hm_st_index_parse): a JSON object with a "weight_map" object of
 * strings, each a plain file name in the index's folder (no '/', not "." or
 * "..", not empty), no tensor listed twice, at least one tensor. "metadata"
 * and total_size are optional (hm-verify bundle requires and checks them).
 * hm_st_index_check cross-checks the opened shards against the index.
 *
 * Writing: hm_st_shard_plan splits tensors into shards as transformers'
 * shard_checkpoint does: tensors in order, a new shard when the next one
 * would take the current shard past the size (a tensor bigger than the
 * size gets a shard of its own); hm_st_index_json prints the index as
 * json.dumps(index, indent=2, sort_keys=True) + "\n" does.
 */
#ifndef HM_ST_INDEX_H
#define HM_ST_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "hm_error.h"
#include "safetensors.h"

#define HM_ST_INDEX_NAME "model.safetensors.index.json"
/* "model-00001-of-00002.safetensors" and its NUL fit (5-digit numbers; more
 * digits past 99999 shards, as Python's %05d) */
#define HM_ST_SHARD_NAME_MAX 64

struct hm_st_index;

/* Parses index text: [len]. name is what messages call the index ("index
 * 'DIR/model.safetensors.index.json'"). Errors are HM_ERR_FORMAT.
 * out: owned, free with hm_st_index_free(). */
enum hm_status hm_st_index_parse(const char *text, size_t len, const char *name,
                                 struct hm_st_index **out, struct hm_error *err);
void hm_st_index_free(struct hm_st_index *ix); /* accepts NULL */

/* The distinct shard file names, in order of first appearance. Borrowed. */
int hm_st_index_n_shards(const struct hm_st_index *ix);
const char *hm_st_index_shard(const struct hm_st_index *ix, int i);
/* weight_map's entries, in the index's order: tensor name (borrowed) and
 * the index of its shard. */
int64_t hm_st_index_n_tensors(const struct hm_st_index *ix);
const char *hm_st_index_tensor(const struct hm_st_index *ix, int64_t i, int *shard);
/* metadata.total_size: 1 with *out set; 0 when absent; -1 when present
 * but not an integer in [0, 2^53]. */
int hm_st_index_total_size(const struct hm_st_index *ix, uint64_t *out);

/* One inconsistency: the shard it concerns (-1: the index itself), the
 * tensor, and the message (which names the index and the shard). */
typedef void (*hm_st_index_problem_fn)(void *ctx, int shard, const char *tensor,
                                       const char *msg);

/* Cross-checks files[i] (the shard hm_st_index_shard(ix, i), shown in
 * messages as shown[i]) against the index: every entry exists in the shard
 * it names; every tensor of every shard is in the index, mapped to that
 * shard (so no tensor is in two shards). Each problem goes to fn (may be
 * NULL); returns their count, 0 when consistent. */
int64_t hm_st_index_check(const struct hm_st_index *ix, struct hm_st_file *const *files,
                          const char *const *shown, hm_st_index_problem_fn fn, void *ctx);

/* The first of names[n] that is a shard file of the same set as the
 * index's first shard ("...-of-NNNNN.safetensors" alike) and that the index
 * does not name (a leftover of another save, a shard left out of the index);
 * NULL when there is none. Borrowed from names. */
const char *hm_st_index_stray(const struct hm_st_index *ix, const char *const *names, int64_t n);

/* ---- writing ------------------------------------------------------------ */

/* buf: "model-%05d-of-%05d.safetensors" for shard i (1-based) of n. */
void hm_st_shard_name(int i, int n, char buf[HM_ST_SHARD_NAME_MAX]);

/* Splits tensors of nbytes[n] bytes, in this order, into shards of at
 * most max_bytes (but for a tensor bigger than that, alone in its shard):
 * shard_of[i] is tensor i's shard, 0-based. Returns the number of shards
 * (0 when n is 0). */
int hm_st_shard_plan(const uint64_t *nbytes, int64_t n, uint64_t max_bytes, int *shard_of);

/* The index JSON for tensors[n] in shards shard_of[n] (0-based) of n_shards,
 * keys sorted by byte order (which is json.dumps's code-point order for
 * UTF-8), non-ASCII escaped as \uXXXX (ensure_ascii). owned: free with
 * free(); NULL on allocation failure. */
char *hm_st_index_json(const char *const *tensors, const int *shard_of, int64_t n, int n_shards,
                       uint64_t total_size);

#endif
