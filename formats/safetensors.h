/* safetensors.h — reading and writing safetensors files.
 *
 * On-disk format (https://github.com/huggingface/safetensors):
 *
 *   bytes [0, 8)        N, u64 little-endian: length of the JSON header
 *   bytes [8, 8+N)      JSON object, UTF-8, may be padded with trailing spaces:
 *       { "__metadata__": { "key": "string value", ... },          (optional)
 *         "tensor.name": { "dtype": "F16",
 *                          "shape": [d0, d1, ...],                  (may be [])
 *                          "data_offsets": [begin, end] }, ... }
 *   bytes [8+N, EOF)    the data section; offsets are relative to its start
 *
 * Validation (as the reference Metadata::validate, plus stricter checks):
 *   - the file holds at least 8 bytes, N ≤ 100,000,000 and 8 + N ≤ file size;
 *   - the header is valid JSON, starts with '{' and is an object; every
 *     value is an object with exactly dtype/shape/data_offsets of the right
 *     JSON types; names are valid UTF-8 and unique; `__metadata__`, when
 *     present, maps strings to strings;
 *   - dtype is one of BOOL U8 I8 I16 U16 F16 BF16 I32 U32 F32 F64 I64 U64;
 *   - every dim ≥ 0, numel and numel × dtype size fit in int64 (checked);
 *   - sorted by begin offset, tensors are contiguous from 0 (begin of each =
 *     end of the previous), end ≥ begin, end - begin = numel × dtype size,
 *     and the last end equals the data section's length (no gap, no tail).
 *
 * Reading maps the file read-only (PROT_READ, MAP_PRIVATE); "-" and the
 * memory constructor take a buffer. Writers pad the header with spaces to a
 * multiple of 8 and stream tensors one at a time through an atomic output.
 */
#ifndef HM_SAFETENSORS_H
#define HM_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hm_error.h"

#define HM_ST_MAX_HEADER 100000000ULL

enum hm_dtype {
    HM_DTYPE_F32 = 0,
    HM_DTYPE_F16,
    HM_DTYPE_BF16,
    HM_DTYPE_F64,
    HM_DTYPE_BOOL,
    HM_DTYPE_U8,
    HM_DTYPE_I8,
    HM_DTYPE_I16,
    HM_DTYPE_U16,
    HM_DTYPE_I32,
    HM_DTYPE_U32,
    HM_DTYPE_I64,
    HM_DTYPE_U64,
    HM_DTYPE_COUNT
};

/* "F32" etc.; NULL for an out-of-range value. */
const char *hm_dtype_name(enum hm_dtype dt);
/* Parse a safetensors dtype string; -1 if unknown. */
int hm_dtype_parse(const char *s);
/* Element size in bytes. */
size_t hm_dtype_size(enum hm_dtype dt);
/* 1 for F32/F16/BF16/F64. */
int hm_dtype_is_float(enum hm_dtype dt);

/* One tensor as described by the header. Borrowed from its file. */
struct hm_st_tensor {
    const char *name;
    enum hm_dtype dtype;
    int ndim;
    const int64_t *shape;  /* [ndim] */
    int64_t numel;
    size_t begin;          /* offset in the data section */
    size_t nbytes;
};

struct hm_st_file;

/* A checkpoint read from stdin ('-') or a pipe is held in memory, up to
 * this many bytes (a FIFO without a writer reads as empty at once). Devices
 * and sockets are refused. */
#define HM_ST_STDIN_MAX ((size_t)64 << 30)

/* Open and validate a file ("-" reads stdin into memory).
 * out: owned, free with hm_st_close(). */
enum hm_status hm_st_open(const char *path, struct hm_st_file **out,
                          struct hm_error *err);

/* Validate a buffer. If take_ownership, buf (from malloc) is freed by
 * hm_st_close() (also on failure); otherwise it must outlive the handle. */
enum hm_status hm_st_open_memory(void *buf, size_t len, int take_ownership,
                                 struct hm_st_file **out, struct hm_error *err);

/* Validate a header alone, for a file read as a stream (hm-verify bundle
 * hashes each tensor as its bytes go by): head: [len] = the 8-byte length
 * and the N header bytes, exactly (copied). Every check above runs but the
 * data section's length, which is taken to be what the header describes:
 * hm_st_file_size() is then the size the file must have (the caller holds
 * the stream to it). hm_st_data_view() returns NULL for such a handle.
 * out: owned, free with hm_st_close(). */
enum hm_status hm_st_open_header(const void *head, size_t len, struct hm_st_file **out,
                                 struct hm_error *err);

void hm_st_close(struct hm_st_file *f);

/* Tensors in data-offset order. */
int64_t hm_st_n_tensors(const struct hm_st_file *f);
const struct hm_st_tensor *hm_st_tensor_at(const struct hm_st_file *f, int64_t i);
/* Index of the tensor named name, or -1. */
int64_t hm_st_find(const struct hm_st_file *f, const char *name);
/* Borrowed: the tensor's bytes (little-endian), valid until hm_st_close();
 * NULL for a hm_st_open_header handle. */
const void *hm_st_data_view(const struct hm_st_file *f, int64_t i);
/* Done with tensor i's bytes for now: a mapped file drops the pages wholly
 * inside them from this process's memory (they are read again from the file
 * if viewed later), so streaming a large file through views keeps the
 * resident size bounded. No-op for files held in memory. */
void hm_st_data_release(const struct hm_st_file *f, int64_t i);
/* The same for bytes [off, off + len) of tensor i (whole pages inside). */
void hm_st_data_release_range(const struct hm_st_file *f, int64_t i, size_t off, size_t len);

/* Metadata (`__metadata__`), in header order. Borrowed strings. */
int64_t hm_st_n_metadata(const struct hm_st_file *f);
const char *hm_st_metadata_key(const struct hm_st_file *f, int64_t i);
const char *hm_st_metadata_value(const struct hm_st_file *f, int64_t i);
/* Value of key, or NULL if absent. */
const char *hm_st_metadata_get(const struct hm_st_file *f, const char *key);

size_t hm_st_file_size(const struct hm_st_file *f);
size_t hm_st_header_size(const struct hm_st_file *f); /* N, excluding the 8-byte prefix */

/* ---- writing ------------------------------------------------------------ */

/* Produces a tensor's bytes on demand (streaming writes): exactly the bytes
 * [off, off + nbytes) of the tensor into dst (a whole-tensor fill gets
 * off 0 and all of them; a piecewise one, pieces in order). Return HM_OK or
 * an error. */
typedef enum hm_status (*hm_st_fill_fn)(void *ctx, int64_t index, size_t off, void *dst,
                                        size_t nbytes, struct hm_error *err);

struct hm_st_writer;

/* owned: free with hm_st_writer_free(). NULL on allocation failure. */
struct hm_st_writer *hm_st_writer_new(void);
void hm_st_writer_free(struct hm_st_writer *w);

/* Add a tensor whose bytes are at data (borrowed until the write). The name
 * and shape are copied. Fails on a duplicate name or overflowing shape. */
enum hm_status hm_st_writer_add(struct hm_st_writer *w, const char *name,
                                enum hm_dtype dtype, int ndim, const int64_t *shape,
                                const void *data, struct hm_error *err);
/* Same, and done(ctx, tag, off, len) is called as each piece of data's
 * bytes [off, off + len) is written (HM_ST_WRITE_PIECE bytes at a time: a
 * mapped source releases their pages, so a save holds one piece of it
 * resident: hm_ckpt_writer_add_tensor). */
#define HM_ST_WRITE_PIECE (64u << 20)
typedef void (*hm_st_done_fn)(const void *ctx, int64_t tag, size_t off, size_t len);
enum hm_status hm_st_writer_add_done(struct hm_st_writer *w, const char *name,
                                     enum hm_dtype dtype, int ndim, const int64_t *shape,
                                     const void *data, hm_st_done_fn done, const void *ctx,
                                     int64_t tag, struct hm_error *err);
/* Same, bytes produced by fill(ctx, index, ...) at write time, one tensor
 * at a time; index is the 0-based order in which the tensor was added. */
enum hm_status hm_st_writer_add_fill(struct hm_st_writer *w, const char *name,
                                     enum hm_dtype dtype, int ndim,
                                     const int64_t *shape, hm_st_fill_fn fill,
                                     void *ctx, struct hm_error *err);
/* Same, fill called for HM_ST_FILL_PIECE bytes at a time, in order (the
 * last piece shorter): the write holds one piece, whatever the tensor's
 * size (a narrow weight widened on the way out). */
#define HM_ST_FILL_PIECE (4u << 20)
enum hm_status hm_st_writer_add_pieces(struct hm_st_writer *w, const char *name,
                                       enum hm_dtype dtype, int ndim,
                                       const int64_t *shape, hm_st_fill_fn fill,
                                       void *ctx, struct hm_error *err);
/* Set (or replace) a metadata string. Both strings are copied. */
enum hm_status hm_st_writer_set_metadata(struct hm_st_writer *w, const char *key,
                                         const char *value, struct hm_error *err);

/* Size of the padded JSON header (N) and of the whole file. */
enum hm_status hm_st_writer_sizes(struct hm_st_writer *w, size_t *header_size,
                                  size_t *file_size, struct hm_error *err);

/* Write to an open stream (tensors are written sorted by name). */
enum hm_status hm_st_writer_write_stream(struct hm_st_writer *w, FILE *fp,
                                         struct hm_error *err);
/* Write atomically to path ("-" = stdout); flags as hm_afile_open. */
enum hm_status hm_st_writer_write_path(struct hm_st_writer *w, const char *path,
                                       int flags, struct hm_error *err);

#endif
