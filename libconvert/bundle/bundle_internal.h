/* bundle_internal.h — helpers shared by the bundle_*.c files (not an API). */
#ifndef HM_BUNDLE_INTERNAL_H
#define HM_BUNDLE_INTERNAL_H

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>

#include "archive_write.h"
#include "atomic_file.h"

#include "bundle.h"

/* MANIFEST.json parsed; HM_ERR_FORMAT when it is not a JSON object.
 * *out: owned, free with cJSON_Delete(). */
enum hm_status hm_bundle_manifest_parse(struct hm_bundle *b, cJSON **out, struct hm_error *err);

/* A JSON number that is an exact integer in [0, 2^53] into *out; -1 otherwise. */
int hm_bundle_json_u64(const cJSON *v, uint64_t *out);

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
