/* tokfile.h — the hm token file (contract §5 "Token files").
 *
 * Layout (all integers little-endian; docs/token-file.md says the same):
 *
 *   offset size  field
 *   0      8     magic "HMTOKENS"
 *   8      4     u32 version = 1
 *   12     4     u32 token width in bytes: 2 or 4
 *   16     8     u64 vocabulary size V (every id < V; width 2 needs V <= 65536)
 *   24     8     u64 token count N
 *   32     8     u64 XXH3_64bits (seed 0) of the N * width payload bytes
 *   40     4     u32 end-of-text id (separates documents; one after every
 *                document, including the last)
 *   44     4     u32 reserved = 0
 *   48     N*width  token ids, little-endian u16 or u32
 *
 * The file size is exactly 48 + N * width. Writers choose width 2 when
 * V <= 65536, else 4.
 *
 * Reading maps the file read-only (or reads "-" = stdin into memory) and
 * validates everything before returning: magic, version, width, vocabulary,
 * exact size, checksum, every id < V. A returned file is therefore safe to
 * index without further checks.
 */
#ifndef HM_TOKFILE_H
#define HM_TOKFILE_H

#include <stddef.h>
#include <stdint.h>
#include "hm_error.h"

#define HM_TOK_MAGIC "HMTOKENS"
#define HM_TOK_VERSION 1u
#define HM_TOK_HEADER_SIZE 48

struct hm_tok_file;
struct hm_tok_writer;

/* Token files that are not regular files (stdin, pipes, devices) are read
 * into memory up to this many bytes; a regular file is mapped, uncapped. */
#define HM_TOK_STREAM_MAX ((size_t)1 << 30)

/* Opens and validates a token file; path "-" reads stdin. out: owned, free
 * with hm_tok_close(). */
enum hm_status hm_tok_open(const char *path, struct hm_tok_file **out, struct hm_error *err);

/* Validates a token file held in memory (borrowed: data must outlive f). */
enum hm_status hm_tok_open_memory(const void *data, size_t size, struct hm_tok_file **out,
                                  struct hm_error *err);

void hm_tok_close(struct hm_tok_file *f); /* accepts NULL */

int64_t hm_tok_count(const struct hm_tok_file *f);
uint64_t hm_tok_vocab(const struct hm_tok_file *f);
int hm_tok_width(const struct hm_tok_file *f);
uint32_t hm_tok_eot(const struct hm_tok_file *f);
uint64_t hm_tok_checksum(const struct hm_tok_file *f);

/* Token i; the caller keeps 0 <= i < count (not checked here: this is the
 * hot path; use hm_tok_read for checked access). */
uint32_t hm_tok_get(const struct hm_tok_file *f, int64_t i);

/* Copies tokens [start, start + n) into dst: [n]. Fails (HM_ERR_INVALID) if
 * the range is outside the file. */
enum hm_status hm_tok_read(const struct hm_tok_file *f, int64_t start, int64_t n,
                           int32_t *dst, struct hm_error *err);

/* Writer flags. */
enum hm_tok_writer_flags {
    HM_TOK_FORCE = 1, /* replace an existing output (atomic_file HM_AFILE_FORCE) */
};

/* Starts a token file at path ("-" = stdout, buffered in memory until
 * commit). vocab >= 1, eot < vocab. out: owned, release with commit or
 * abort. Nothing appears at path until commit succeeds. */
enum hm_status hm_tok_writer_open(const char *path, uint64_t vocab, uint32_t eot, int flags,
                                  struct hm_tok_writer **out, struct hm_error *err);

/* Appends ids: [n]. Rejects any id < 0 or >= vocab (HM_ERR_INVALID, nothing
 * of this call is written). */
enum hm_status hm_tok_writer_append(struct hm_tok_writer *w, const int32_t *ids, int64_t n,
                                    struct hm_error *err);

int64_t hm_tok_writer_count(const struct hm_tok_writer *w);

/* Fills in the header, flushes and renames into place. Frees w in all cases. */
enum hm_status hm_tok_writer_commit(struct hm_tok_writer *w, struct hm_error *err);

/* Drops the output and frees w. Accepts NULL. */
/* Commits ws: [n] (1 or 2: a training and a validation file) together:
 * both appear or neither does (hm_afile_commit_all). Releases every writer;
 * on failure *failed (if not NULL) is the index of the one that failed. */
enum hm_status hm_tok_writer_commit_all(struct hm_tok_writer **ws, int n, int *failed,
                                        struct hm_error *err);

void hm_tok_writer_abort(struct hm_tok_writer *w);

#endif
