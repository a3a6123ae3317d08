/* tokfile.c — token file reader and writer; the layout is in tokfile.h. */
#include "tokfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "atomic_file.h"
#include "fileio.h"

struct hm_tok_file {
    const uint8_t *base; /* whole file: [size] bytes */
    size_t size;
    void *map;      /* mmap'd region, or NULL */
    char *owned;    /* malloc'd copy (stdin, pipes), or NULL */
    const uint8_t *payload; /* [count * width] */
    int64_t count;
    uint64_t vocab;
    uint64_t checksum;
    uint32_t eot;
    int width;
};

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static void wr32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static void wr64(uint8_t *p, uint64_t v)
{
    wr32(p, (uint32_t)v);
    wr32(p + 4, (uint32_t)(v >> 32));
}

static enum hm_status validate(struct hm_tok_file *f, struct hm_error *err)
{
    const uint8_t *h = f->base;
    if (f->size < HM_TOK_HEADER_SIZE)
        return hm_error_set(err, HM_ERR_FORMAT,
                            "file is truncated: %zu bytes, shorter than the %d-byte header",
                            f->size, HM_TOK_HEADER_SIZE);
    if (memcmp(h, HM_TOK_MAGIC, 8) != 0)
        return hm_error_set_at(err, HM_ERR_FORMAT, 0, "not a token file (bad magic)");
    uint32_t version = rd32(h + 8);
    if (version != HM_TOK_VERSION)
        return hm_error_set_at(err, HM_ERR_UNSUPPORTED, 8,
                               "unsupported token file version %u (expected %u)", version,
                               HM_TOK_VERSION);
    uint32_t width = rd32(h + 12);
    if (width != 2 && width != 4)
        return hm_error_set_at(err, HM_ERR_FORMAT, 12, "bad token width %u (expected 2 or 4)",
                               width);
    uint64_t vocab = rd64(h + 16);
    if (vocab < 1)
        return hm_error_set_at(err, HM_ERR_FORMAT, 16, "vocabulary size is 0");
    if (width == 2 && vocab > 65536)
        return hm_error_set_at(err, HM_ERR_FORMAT, 16,
                               "vocabulary size %llu does not fit 2-byte tokens",
                               (unsigned long long)vocab);
    if (vocab > (uint64_t)UINT32_MAX + 1)
        return hm_error_set_at(err, HM_ERR_FORMAT, 16, "vocabulary size %llu is too large",
                               (unsigned long long)vocab);
    uint64_t count = rd64(h + 24);
    uint32_t eot = rd32(h + 40);
    if (eot >= vocab)
        return hm_error_set_at(err, HM_ERR_FORMAT, 40,
                               "end-of-text id %u is not below the vocabulary size %llu", eot,
                               (unsigned long long)vocab);
    if (rd32(h + 44) != 0)
        return hm_error_set_at(err, HM_ERR_FORMAT, 44, "reserved header field is not 0");
    int64_t payload;
    if (count > (uint64_t)INT64_MAX || hm_mul_i64((int64_t)count, width, &payload) != 0 ||
        payload > INT64_MAX - HM_TOK_HEADER_SIZE)
        return hm_error_set_at(err, HM_ERR_FORMAT, 24, "token count %llu is impossibly large",
                               (unsigned long long)count);
    uint64_t want = (uint64_t)payload + HM_TOK_HEADER_SIZE;
    if ((uint64_t)f->size < want)
        return hm_error_set(err, HM_ERR_FORMAT,
                            "file is truncated: header says %llu tokens (%llu bytes) but the "
                            "file has %zu bytes",
                            (unsigned long long)count, (unsigned long long)want, f->size);
    if ((uint64_t)f->size > want)
        return hm_error_set(err, HM_ERR_FORMAT,
                            "file has %llu trailing bytes after %llu tokens",
                            (unsigned long long)((uint64_t)f->size - want),
                            (unsigned long long)count);
    f->payload = h + HM_TOK_HEADER_SIZE;
    uint64_t want_hash = rd64(h + 32);
    uint64_t got_hash = XXH3_64bits(f->payload, (size_t)payload);
    if (want_hash != got_hash)
        return hm_error_set_at(err, HM_ERR_FORMAT, 32,
                               "payload checksum mismatch (header 0x%016llx, computed 0x%016llx)",
                               (unsigned long long)want_hash, (unsigned long long)got_hash);
    f->count = (int64_t)count;
    f->vocab = vocab;
    f->eot = eot;
    f->width = (int)width;
    f->checksum = got_hash;
    for (int64_t i = 0; i < f->count; i++) {
        uint32_t id = hm_tok_get(f, i);
        if (id >= vocab)
            return hm_error_set_at(err, HM_ERR_FORMAT, HM_TOK_HEADER_SIZE + i * width,
                                   "token %lld has id %u, not below the vocabulary size %llu",
                                   (long long)i, id, (unsigned long long)vocab);
    }
    return HM_OK;
}

enum hm_status hm_tok_open_memory(const void *data, size_t size, struct hm_tok_file **out,
                                  struct hm_error *err)
{
    *out = NULL;
    struct hm_tok_file *f = calloc(1, sizeof *f);
    if (!f)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    f->base = data;
    f->size = size;
    enum hm_status st = validate(f, err);
    if (st != HM_OK) {
        free(f);
        return st;
    }
    *out = f;
    return HM_OK;
}

enum hm_status hm_tok_open(const char *path, struct hm_tok_file **out, struct hm_error *err)
{
    *out = NULL;
    struct hm_tok_file *f = calloc(1, sizeof *f);
    if (!f)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    enum hm_status st = HM_OK;
    int fd = -1;
    if (strcmp(path, "-") == 0) {
        st = hm_read_fd(STDIN_FILENO, HM_TOK_STREAM_MAX, &f->owned, &f->size, err);
        if (st != HM_OK)
            goto out;
        f->base = (const uint8_t *)f->owned;
    } else {
        struct stat sb;
        fd = hm_open_input(path, &sb, err); /* never blocks on a FIFO */
        if (fd < 0) {
            st = err ? err->status : HM_ERR_IO;
            goto out;
        }
        if (S_ISDIR(sb.st_mode)) {
            st = hm_error_set(err, HM_ERR_IO, "is a directory");
            goto out;
        }
        if ((st = hm_input_regular(&sb, "a token file", err)) != HM_OK)
            goto out; /* devices, sockets */
        if (!S_ISREG(sb.st_mode)) { /* a pipe: read it, capped */
            st = hm_read_fd(fd, HM_TOK_STREAM_MAX, &f->owned, &f->size, err);
            if (st != HM_OK)
                goto out;
            f->base = (const uint8_t *)f->owned;
        } else {
            f->size = (size_t)sb.st_size;
            if (f->size > 0) {
                f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
                if (f->map == MAP_FAILED) {
                    f->map = NULL;
                    st = hm_error_set_errno(err, HM_ERR_IO, errno, "cannot map");
                    goto out;
                }
                f->base = f->map;
            } else {
                f->base = (const uint8_t *)"";
            }
        }
    }
    st = validate(f, err);
out:
    if (fd >= 0)
        close(fd);
    if (st != HM_OK) {
        hm_tok_close(f);
        return st;
    }
    *out = f;
    return HM_OK;
}

void hm_tok_close(struct hm_tok_file *f)
{
    if (!f)
        return;
    if (f->map)
        munmap(f->map, f->size);
    free(f->owned);
    free(f);
}

int64_t hm_tok_count(const struct hm_tok_file *f) { return f->count; }
uint64_t hm_tok_vocab(const struct hm_tok_file *f) { return f->vocab; }
int hm_tok_width(const struct hm_tok_file *f) { return f->width; }
uint32_t hm_tok_eot(const struct hm_tok_file *f) { return f->eot; }
uint64_t hm_tok_checksum(const struct hm_tok_file *f) { return f->checksum; }

uint32_t hm_tok_get(const struct hm_tok_file *f, int64_t i)
{
    const uint8_t *p = f->payload + (size_t)i * (size_t)f->width;
    if (f->width == 2)
        return (uint32_t)p[0] | (uint32_t)p[1] << 8;
    return rd32(p);
}

enum hm_status hm_tok_read(const struct hm_tok_file *f, int64_t start, int64_t n, int32_t *dst,
                           struct hm_error *err)
{
    if (start < 0 || n < 0 || start > f->count || n > f->count - start)
        return hm_error_set(err, HM_ERR_INVALID,
                            "token range [%lld, %lld) is outside the file's %lld tokens",
                            (long long)start, (long long)start + n, (long long)f->count);
    if (f->width == 2) {
        const uint8_t *p = f->payload + (size_t)start * 2;
        for (int64_t i = 0; i < n; i++)
            dst[i] = (int32_t)((uint32_t)p[2 * i] | (uint32_t)p[2 * i + 1] << 8);
    } else {
        const uint8_t *p = f->payload + (size_t)start * 4;
        for (int64_t i = 0; i < n; i++)
            dst[i] = (int32_t)rd32(p + 4 * i);
    }
    return HM_OK;
}

/* ---- writer ---------------------------------------------------------------- */

struct hm_tok_writer {
    struct hm_afile *af;
    FILE *fp;
    int to_stdout;
    uint8_t *mem; /* stdout only: the payload so far, [mem_len] bytes */
    size_t mem_len, mem_cap;
    XXH3_state_t *hash;
    uint64_t vocab;
    uint32_t eot;
    int width;
    int64_t count;
    uint8_t buf[1 << 16]; /* encode buffer */
};

static void fill_header(uint8_t h[HM_TOK_HEADER_SIZE], const struct hm_tok_writer *w,
                        uint64_t hash)
{
    memset(h, 0, HM_TOK_HEADER_SIZE);
    memcpy(h, HM_TOK_MAGIC, 8);
    wr32(h + 8, HM_TOK_VERSION);
    wr32(h + 12, (uint32_t)w->width);
    wr64(h + 16, w->vocab);
    wr64(h + 24, (uint64_t)w->count);
    wr64(h + 32, hash);
    wr32(h + 40, w->eot);
}

enum hm_status hm_tok_writer_open(const char *path, uint64_t vocab, uint32_t eot, int flags,
                                  struct hm_tok_writer **out, struct hm_error *err)
{
    *out = NULL;
    if (vocab < 1 || vocab > (uint64_t)INT32_MAX + 1)
        return hm_error_set(err, HM_ERR_INVALID, "vocabulary size %llu is out of range",
                            (unsigned long long)vocab);
    if (eot >= vocab)
        return hm_error_set(err, HM_ERR_INVALID,
                            "end-of-text id %u is not below the vocabulary size %llu", eot,
                            (unsigned long long)vocab);
    struct hm_tok_writer *w = calloc(1, sizeof *w);
    if (!w)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    w->vocab = vocab;
    w->eot = eot;
    w->width = vocab <= 65536 ? 2 : 4;
    w->hash = XXH3_createState();
    enum hm_status st = HM_OK;
    if (!w->hash || XXH3_64bits_reset(w->hash) != XXH_OK) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto out;
    }
    st = hm_afile_open(path, (flags & HM_TOK_FORCE) ? HM_AFILE_FORCE : 0, &w->af, err);
    if (st != HM_OK)
        goto out;
    w->to_stdout = strcmp(path, "-") == 0;
    w->fp = hm_afile_stream(w->af);
    if (!w->to_stdout) {
        uint8_t h[HM_TOK_HEADER_SIZE];
        fill_header(h, w, 0);
        if (fwrite(h, 1, sizeof h, w->fp) != sizeof h)
            st = hm_error_set_errno(err, HM_ERR_IO, errno, "cannot write the header");
    }
out:
    if (st != HM_OK) {
        hm_tok_writer_abort(w);
        return st;
    }
    *out = w;
    return HM_OK;
}

static enum hm_status emit(struct hm_tok_writer *w, const uint8_t *p, size_t len,
                           struct hm_error *err)
{
    XXH3_64bits_update(w->hash, p, len);
    if (!w->to_stdout) {
        if (fwrite(p, 1, len, w->fp) != len)
            return hm_error_set_errno(err, HM_ERR_IO, errno, "cannot write tokens");
        return HM_OK;
    }
    if (w->mem_cap - w->mem_len < len) {
        size_t cap = w->mem_cap ? w->mem_cap : 1 << 16;
        while (cap - w->mem_len < len) {
            if (cap > SIZE_MAX / 2)
                return hm_error_set(err, HM_ERR_NOMEM, "out of memory buffering tokens");
            cap *= 2;
        }
        uint8_t *m = realloc(w->mem, cap);
        if (!m)
            return hm_error_set(err, HM_ERR_NOMEM, "out of memory buffering tokens");
        w->mem = m;
        w->mem_cap = cap;
    }
    memcpy(w->mem + w->mem_len, p, len);
    w->mem_len += len;
    return HM_OK;
}

enum hm_status hm_tok_writer_append(struct hm_tok_writer *w, const int32_t *ids, int64_t n,
                                    struct hm_error *err)
{
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint64_t)ids[i] >= w->vocab)
            return hm_error_set(err, HM_ERR_INVALID,
                                "token id %lld is not in [0, %llu) (the vocabulary size)",
                                (long long)ids[i], (unsigned long long)w->vocab);
    int64_t per = (int64_t)sizeof w->buf / w->width;
    for (int64_t i = 0; i < n; i += per) {
        int64_t m = n - i < per ? n - i : per;
        if (w->width == 2) {
            for (int64_t j = 0; j < m; j++) {
                w->buf[2 * j] = (uint8_t)ids[i + j];
                w->buf[2 * j + 1] = (uint8_t)((uint32_t)ids[i + j] >> 8);
            }
        } else {
            for (int64_t j = 0; j < m; j++)
                wr32(w->buf + 4 * j, (uint32_t)ids[i + j]);
        }
        enum hm_status st = emit(w, w->buf, (size_t)(m * w->width), err);
        if (st != HM_OK)
            return st;
        w->count += m;
    }
    return HM_OK;
}

int64_t hm_tok_writer_count(const struct hm_tok_writer *w) { return w->count; }

/* Writes w's final header (and, for stdout, the buffered tokens). */
static enum hm_status writer_finish(struct hm_tok_writer *w, struct hm_error *err)
{
    uint8_t h[HM_TOK_HEADER_SIZE];
    fill_header(h, w, XXH3_64bits_digest(w->hash));
    if (w->to_stdout) {
        if (fwrite(h, 1, sizeof h, w->fp) != sizeof h ||
            (w->mem_len && fwrite(w->mem, 1, w->mem_len, w->fp) != w->mem_len))
            return hm_error_set_errno(err, HM_ERR_IO, errno, "cannot write to stdout");
    } else if (fflush(w->fp) != 0 || fseek(w->fp, 0, SEEK_SET) != 0 ||
               fwrite(h, 1, sizeof h, w->fp) != sizeof h) {
        return hm_error_set_errno(err, HM_ERR_IO, errno, "cannot write the header");
    }
    return HM_OK;
}

enum hm_status hm_tok_writer_commit_all(struct hm_tok_writer **ws, int n, int *failed,
                                        struct hm_error *err)
{
    enum hm_status st = HM_OK;
    struct hm_afile *afs[2];
    if (n < 1 || n > 2)
        st = hm_error_set(err, HM_ERR_INVALID, "commit of %d token files (1 or 2)", n);
    /* file outputs first: a stdout output's bytes cannot be taken back */
    for (int pass = 0; pass < 2 && st == HM_OK; pass++)
        for (int i = 0; i < n && st == HM_OK; i++)
            if (ws[i]->to_stdout == pass && (st = writer_finish(ws[i], err)) != HM_OK && failed)
                *failed = i;
    if (st == HM_OK) {
        for (int i = 0; i < n; i++) {
            afs[i] = ws[i]->af;
            ws[i]->af = NULL;
        }
        st = hm_afile_commit_all(afs, n, failed, err);
    }
    for (int i = 0; i < n; i++)
        hm_tok_writer_abort(ws[i]);
    return st;
}

enum hm_status hm_tok_writer_commit(struct hm_tok_writer *w, struct hm_error *err)
{
    return hm_tok_writer_commit_all(&w, 1, NULL, err);
}

void hm_tok_writer_abort(struct hm_tok_writer *w)
{
    if (!w)
        return;
    hm_afile_abort(w->af);
    if (w->hash)
        XXH3_freeState(w->hash);
    free(w->mem);
    free(w);
}
