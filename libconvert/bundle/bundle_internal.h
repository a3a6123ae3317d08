/* bundle_internal.h — helpers shared by the bundle_*.c files (not an API). */
#ifndef HM_BUNDLE_INTERNAL_H
#define HM_BUNDLE_INTERNAL_H

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <xxhash.h>

#include "archive_write.h"
#include "atomic_file.h"

#include "bundle.h"

/* MANIFEST.json parsed; HM_ERR_FORMAT when it is not a JSON object.
 * *out: owned, free with cJSON_Delete(). */
enum hm_status hm_bundle_manifest_parse(struct hm_bundle *b, cJSON **out, struct hm_error *err);

/* A JSON number that is an exact integer in [0, 2^53] into *out; -1 otherwise. */
int hm_bundle_json_u64(const cJSON *v, uint64_t *out);

/* ---- streaming (bundle_read.c, bundle_scan.c; hm-verify bundle) ---------- */

/* Bytes of the member name: data: [n], or data NULL and n 0 at its end. */
typedef enum hm_status (*hm_bundle_data_fn)(void *ctx, const char *name, const void *data,
                                            size_t n, struct hm_error *err);

/* hm_bundle_open, except that an archive's members other than MANIFEST.json
 * and model.safetensors.index.json go to fn as they are inflated
 * (archive_read.h, vet.stream) and are not held: hm_bundle_file_data and
 * hm_bundle_file_xxh3 refuse those (hm_bundle_file_streamed). A folder
 * bundle opens as with hm_bundle_open (fn unused: see hm_bundle_file_stream).
 * What fn was handed is to be trusted only once this returns HM_OK.
 * out: owned, free with hm_bundle_close(). */
enum hm_status hm_bundle_open_streamed(const char *path, hm_bundle_data_fn fn, void *ctx,
                                       struct hm_bundle **out, struct hm_error *err);
/* 1 when file i's bytes went to hm_bundle_open_streamed's fn. */
int hm_bundle_file_streamed(const struct hm_bundle *b, int64_t i);
/* Hands file i's bytes to fn in pieces of at most 1 MiB, then fn(NULL, 0):
 * a folder bundle's file read from disk, a held member at once. */
enum hm_status hm_bundle_file_stream(const struct hm_bundle *b, int64_t i, hm_bundle_data_fn fn,
                                     void *ctx, struct hm_error *err);

/* What a scan saw of one file. */
struct hm_bundle_scan_file {
    char *name;
    uint64_t size, xxh3; /* bytes read, and their XXH3 (once done) */
    int done;
    char *read_error;    /* it could not be read: why (size and xxh3 mean nothing) */
    /* a *.safetensors file: */
    struct hm_st_file *st;  /* its header (hm_st_open_header), once read and valid */
    uint64_t *tensor_xxh3;  /* [hm_st_n_tensors(st)] in data-offset order */
    char *error;            /* why it is not valid safetensors (st NULL), or NULL */
    /* reading state */
    int parse;              /* still reading it as safetensors */
    unsigned char len8[8];
    unsigned char *head;    /* [head_len] = 8 + N, being filled */
    size_t head_len, have;
    int64_t cur;            /* the tensor being hashed (data-offset order) */
    uint64_t left;          /* its bytes still to come */
    XXH3_state_t *h, *th;   /* the file's, the tensor's */
};

/* Every file a scan saw, in order. Zero-initialize, release with
 * hm_bundle_scan_release(). */
struct hm_bundle_scan {
    struct hm_bundle_scan_file *f;
    int64_t n, cap;
};

/* An hm_bundle_data_fn (ctx: the scan): hashes name's bytes as they come. */
enum hm_status hm_bundle_scan_data(void *ctx, const char *name, const void *data, size_t n,
                                   struct hm_error *err);
/* Records that name could not be read, and why (copied). */
enum hm_status hm_bundle_scan_failed(struct hm_bundle_scan *s, const char *name, const char *why,
                                     struct hm_error *err);
/* The finished record of name (the last one, if it came twice); NULL if none. Borrowed. */
const struct hm_bundle_scan_file *hm_bundle_scan_find(const struct hm_bundle_scan *s,
                                                      const char *name);
void hm_bundle_scan_release(struct hm_bundle_scan *s);

/* ---- bundle_verify.c, bundle_verify_shards.c ------------------------------ */

struct hm_bundle_vctx {
    hm_bundle_finding_fn fn; /* may be NULL */
    void *ctx;
    struct hm_bundle_verify_stats *stats;
    struct hm_bundle_scan scan; /* every file of the bundle */
};

/* Reports one finding (and counts it). */
void hm_bundle_finding(struct hm_bundle_vctx *v, const char *member, const char *tensor,
                       const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* The weights files of a bundle. */
struct hm_bundle_weights {
    int n, sharded;
    const char **names;                   /* [n] */
    const struct hm_bundle_scan_file **f; /* [n], NULL for one that is not valid (reported) */
    const char *one_name;                 /* names and f of model.safetensors alone */
    const struct hm_bundle_scan_file *one_f;
};

/* The scan of the weights file name, valid safetensors; else NULL, with a
 * finding for one that is not (one not read: check_files reports it). */
const struct hm_bundle_scan_file *hm_bundle_weights_file(struct hm_bundle_vctx *v,
                                                         const char *name);
/* The sharded weights (model.safetensors.index.json): the index parses and
 * names shards the bundle holds; each shard is valid safetensors with the
 * first one's hm.config; the index maps exactly the shards' tensors, each
 * in one shard; its total_size is their bytes; no shard of the set is left
 * out of it. Each problem is a finding. Fills w with the shards (w->n 0
 * when the index is unusable); release with hm_bundle_weights_release(). */
void hm_bundle_verify_shards(struct hm_bundle_vctx *v, struct hm_bundle *b,
                             struct hm_bundle_weights *w);
void hm_bundle_weights_release(struct hm_bundle_weights *w);

/* ---- bundle_sink.c --------------------------------------------------------- */

/* Where the bytes go: hashing only, a folder being built, or an archive. */
struct hm_bundle_sink {
    int kind;                     /* HM_BUNDLE_DIR or an archive format */
    char *tmpdir;                 /* folder output */
    FILE *cur;                    /* folder output: the file being written */
    struct hm_afile *af;          /* archive output */
    struct hm_archive_writer *aw;
    int force;                    /* folder output: replace what is at out */
};

/* Starts the output at out: kind HM_BUNDLE_DIR (a temporary folder beside
 * out) or an archive format (an atomic file, "-" = stdout). An existing out
 * needs force; force replaces a file or a bundle folder (or an empty one),
 * never another folder, a device, a FIFO or a socket. */
enum hm_status hm_bundle_sink_open(struct hm_bundle_sink *s, const char *out, int kind,
                                   int64_t mtime, int force, struct hm_error *err);
/* One file of exactly size bytes: begin, write (0 or -1 with err set), end. */
enum hm_status hm_bundle_sink_begin(struct hm_bundle_sink *s, const char *name, uint64_t size,
                                    struct hm_error *err);
int hm_bundle_sink_write(struct hm_bundle_sink *s, const void *data, size_t n,
                         struct hm_error *err);
enum hm_status hm_bundle_sink_end(struct hm_bundle_sink *s, struct hm_error *err);
/* Puts the finished output at out. On failure nothing is at out but what was there. */
enum hm_status hm_bundle_sink_commit(struct hm_bundle_sink *s, const char *out,
                                     struct hm_error *err);
/* Drops everything written (accepts a sink that failed to open). */
void hm_bundle_sink_abort(struct hm_bundle_sink *s);

#endif
