/* text_source.c — documents from plain text, jsonl and (nested) archives. */
#include "text_source.h"

#include "archive_filters.h"
#include "fileio.h"

#include <archive.h>
#include <archive_entry.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DEPTH 4

/* Compressions libarchive can decode. Only those it decodes in-process on
 * this build are enabled: a support call that answers ARCHIVE_WARN would
 * fork-exec an external program found in $PATH (lrzip, grzip, lzop, or lz4
 * and zstd where libarchive was built without the library), which no input
 * may make hm run. A stream that starts with the magic of a disabled one
 * is refused by name (hm_text_source.h). */
struct filter_kind {
    const char *name;
    int (*support)(struct archive *);
    const char *magic;
    size_t magic_len; /* 0: no magic worth refusing on (lzma has none) */
};
static const struct filter_kind filter_kinds[] = {
    {"gzip", archive_read_support_filter_gzip, "\x1f\x8b", 2},
    {"bzip2", archive_read_support_filter_bzip2, "BZh", 3},
    {"compress (.Z)", archive_read_support_filter_compress, "\x1f\x9d", 2},
    {"xz", archive_read_support_filter_xz, "\xfd" "7zXZ", 6},
    {"lzma", archive_read_support_filter_lzma, "", 0},
    {"lzip", archive_read_support_filter_lzip, "LZIP", 4},
    {"zstd", archive_read_support_filter_zstd, "\x28\xb5\x2f\xfd", 4},
    {"lz4", archive_read_support_filter_lz4, "\x04\x22\x4d\x18", 4},
    {"lzop", archive_read_support_filter_lzop, "\x89LZO\0\r\n\x1a\n", 9},
    {"lrzip", archive_read_support_filter_lrzip, "LRZI", 4},
    {"grzip", archive_read_support_filter_grzip, "GRZipII\0\x02\x04:)", 12},
};
#define N_FILTER_KINDS (sizeof filter_kinds / sizeof *filter_kinds)

/* Bit i set when filter_kinds[i] decodes in-process (probed on a scratch
 * reader, so the real readers never register an external program). */
static unsigned probe_inprocess_filters(void)
{
    unsigned mask = 0;
    for (size_t i = 0; i < N_FILTER_KINDS; i++)
        if (hm_archive_filter_in_process(filter_kinds[i].support))
            mask |= 1u << i;
    return mask;
}

/* The name of a compression whose magic starts p: [n] and that is not
 * decoded in-process, or NULL. */
static const char *external_compression(const uint8_t *p, size_t n, unsigned inproc)
{
    for (size_t i = 0; i < N_FILTER_KINDS; i++) {
        const struct filter_kind *f = &filter_kinds[i];
        if (!(inproc & (1u << i)) && f->magic_len && n >= f->magic_len &&
            memcmp(p, f->magic, f->magic_len) == 0)
            return f->name;
    }
    return NULL;
}

#define BLOCK ((size_t)1 << 16)

/* One level of input. Its entries come from `a` (formats only, no
 * filters). A compressed level, or one read from a stream (stdin, a pipe),
 * is decompressed by `src` (in-process filters + raw) and fed to `a` through
 * chain_read, which keeps the last two blocks it handed over: after a tar's
 * end-of-archive marker the rest of the stream is still at hand to check
 * (a tar followed by anything but zero padding is refused). */
struct level {
    struct archive *a;
    struct archive *src;  /* the decompressor a reads through, or NULL */
    uint8_t *buf;         /* owned compressed bytes this level reads (NULL for the file) */
    size_t buf_len;
    int buf_borrowed;     /* buf is the caller's (hm_text_source_open_memory) */
    char *name;           /* owned: the archive's display name */
    int fd;               /* the file level 0 reads, or -1 */
    int fd_seekable;      /* a reads fd itself (a regular file at offset 0) */
    uint8_t *in;          /* [BLOCK] fd_read's block */
    uint64_t in_total;    /* bytes fd_read got */
    int in_errno;         /* read(2)'s errno, or 0 */
    uint8_t *blk[2];      /* [BLOCK] each: chain_read's blocks */
    size_t blk_len[2];
    int cur;              /* the block handed over last */
    uint64_t fed;         /* bytes chain_read handed over */
};

struct hm_text_source {
    struct level lv[MAX_DEPTH + 1];
    int depth;           /* index of the innermost open level */
    unsigned inproc;     /* filter_kinds decoded in-process (bit mask) */
    uint8_t *doc;        /* current member bytes, [doc_len] of [doc_cap] */
    size_t doc_len, doc_cap;
    char name[1024];     /* current document name */
    int sniff;           /* the current member is a raw stream not yet checked
                          * for an external compression's magic */
    /* jsonl streaming state (member of the innermost level) */
    int jsonl;
    int64_t line_no;
    size_t line_start;   /* start of unconsumed data in doc */
    int jsonl_eof;
    size_t jsonl_base;   /* length of the member name before ":LINE" */
    cJSON *json;         /* the current parsed line (its text is the document) */
    char *text;          /* a "text" holding U+0000, decoded here: [text_cap] */
    size_t text_cap;
    int64_t docs;
};
static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static const char *const compress_ext[] = {".gz", ".xz", ".bz2", ".zst", ".lz4", ".lzma", ".Z"};

/* name without one compression extension, into out: [cap]. */
static void strip_compress(const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%s", name);
    for (size_t i = 0; i < sizeof compress_ext / sizeof *compress_ext; i++)
        if (ends_with(out, compress_ext[i])) {
            out[strlen(out) - strlen(compress_ext[i])] = 0;
            return;
        }
}

static int is_nested_name(const char *name)
{
    static const char *const ext[] = {".tar", ".tgz", ".tbz2", ".txz", ".zip", ".7z"};
    for (size_t i = 0; i < sizeof ext / sizeof *ext; i++)
        if (ends_with(name, ext[i]))
            return 1;
    for (size_t i = 0; i < sizeof compress_ext / sizeof *compress_ext; i++)
        if (ends_with(name, compress_ext[i]))
            return 1;
    return 0;
}

/* 1 if name (without a compression extension) is clearly a text file, which
 * is then read as one raw stream: format detection on text can misfire
 * (libarchive's mtree reader takes '{"text": ...}' lines for entries). */
static int is_text_name(const char *name)
{
    static const char *const ext[] = {".txt", ".jsonl", ".json", ".text", ".md", ".csv",
                                      ".tsv", ".en", ".raw", ".tokens"};
    char base[1024];
    strip_compress(name, base, sizeof base);
    for (size_t i = 0; i < sizeof ext / sizeof *ext; i++)
        if (ends_with(base, ext[i]))
            return 1;
    return 0;
}

/* The reader of entries: archive formats (no mtree) unless name is text,
 * then raw; no filters (the level's src decompresses). */
static struct archive *new_format_reader(const char *name)
{
    struct archive *a = archive_read_new();
    if (!a)
        return NULL;
    if (!is_text_name(name)) {
        archive_read_support_format_tar(a);
        archive_read_support_format_gnutar(a);
        archive_read_support_format_zip(a);
        archive_read_support_format_7zip(a);
        archive_read_support_format_cpio(a);
        archive_read_support_format_rar(a);
        archive_read_support_format_rar5(a);
        archive_read_support_format_iso9660(a);
        archive_read_support_format_xar(a);
        archive_read_support_format_cab(a);
        archive_read_support_format_lha(a);
        archive_read_support_format_ar(a);
    }
    archive_read_support_format_raw(a);
    return a;
}

/* The decompressor: the in-process filters of inproc, then raw. */
static struct archive *new_filter_reader(unsigned inproc)
{
    struct archive *a = archive_read_new();
    if (!a)
        return NULL;
    for (size_t i = 0; i < N_FILTER_KINDS; i++)
        if (inproc & (1u << i))
            filter_kinds[i].support(a);
    archive_read_support_format_raw(a);
    return a;
}

static void close_level(struct level *l)
{
    if (l->a)
        archive_read_free(l->a);
    if (l->src)
        archive_read_free(l->src);
    if (!l->buf_borrowed)
        free(l->buf);
    free(l->name);
    free(l->in);
    free(l->blk[0]);
    free(l->blk[1]);
    if (l->fd > 0)
        close(l->fd);
    memset(l, 0, sizeof *l);
    l->fd = -1;
}

/* archive_read_open callback over l->fd: plain read(2), so that an empty
 * input and a read error are told apart from a format error by what
 * happened here, not by a stale errno. */
static la_ssize_t fd_read(struct archive *a, void *ud, const void **out)
{
    struct level *l = ud;
    for (;;) {
        ssize_t r = read(l->fd, l->in, BLOCK);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            l->in_errno = errno;
            archive_set_error(a, errno, "%s", strerror(errno));
            return -1;
        }
        l->in_total += (uint64_t)r;
        *out = l->in;
        return r;
    }
}

/* archive_read_open callback of a: the next block of src's decompressed
 * bytes, alternating between two blocks (check_tail reads the last two). */
static la_ssize_t chain_read(struct archive *a, void *ud, const void **out)
{
    struct level *l = ud;
    int k = l->cur ^ 1;
    la_ssize_t r = archive_read_data(l->src, l->blk[k], BLOCK);
    if (r < 0) {
        const char *m = archive_error_string(l->src);
        archive_set_error(a, -1 /* ARCHIVE_ERRNO_MISC */, "%s", m ? m : "read error");
        return -1;
    }
    if (r == 0)
        return 0; /* keep the last two blocks for check_tail */
    l->cur = k;
    l->blk_len[k] = (size_t)r;
    l->fed += (uint64_t)r;
    *out = l->blk[k];
    return r;
}

/* Why opening reader a of level l failed: an empty input, a read error
 * (errno of the read that failed), else libarchive's message. */
static enum hm_status open_error(const struct level *l, struct archive *a, int regular,
                                 struct hm_error *err)
{
    if (l->in_errno)
        return hm_error_set_errno(err, HM_ERR_IO, l->in_errno, "read failed");
    if (l->fd >= 0 && l->in_total == 0)
        return hm_error_set(err, HM_ERR_INVALID, regular ? "file is empty" : "empty input");
    const char *m = archive_error_string(a);
    return hm_error_set(err, HM_ERR_FORMAT, "%s", m ? m : "cannot open");
}

/* Opens level l over l->fd (level 0) or l->buf: [l->buf_len]. src decides
 * whether the bytes are compressed; an uncompressed file or buffer is then
 * read by a directly (seekable: zip and 7z read their directories), anything
 * else through src. */
static enum hm_status open_level(struct hm_text_source *s, struct level *l, int regular,
                                 struct hm_error *err)
{
    l->src = new_filter_reader(s->inproc);
    l->a = new_format_reader(l->name);
    l->blk[0] = malloc(BLOCK);
    l->blk[1] = malloc(BLOCK);
    if (l->fd >= 0)
        l->in = malloc(BLOCK);
    if (!l->src || !l->a || !l->blk[0] || !l->blk[1] || (l->fd >= 0 && !l->in))
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    /* libarchive needs a non-NULL buffer even for 0 bytes */
    int r = l->fd >= 0 ? archive_read_open(l->src, l, NULL, fd_read, NULL)
                       : archive_read_open_memory(l->src, l->buf ? (void *)l->buf : "",
                                                  l->buf_len);
    struct archive_entry *e;
    if (r == ARCHIVE_OK)
        r = archive_read_next_header(l->src, &e); /* the raw stream's one entry */
    if (r != ARCHIVE_OK)
        return open_error(l, l->src, regular, err);
    int compressed = archive_filter_count(l->src) > 1;
    if (!compressed && (l->fd < 0 || (l->fd_seekable && lseek(l->fd, 0, SEEK_SET) == 0))) {
        archive_read_free(l->src);
        l->src = NULL;
        r = l->fd >= 0 ? archive_read_open_fd(l->a, l->fd, BLOCK)
                       : archive_read_open_memory(l->a, l->buf ? (void *)l->buf : "",
                                                  l->buf_len);
    } else {
        l->fd_seekable = 0;
        r = archive_read_open(l->a, l, NULL, chain_read, NULL);
    }
    if (r != ARCHIVE_OK) {
        if (l->src && l->fed == 0)
            return hm_error_set(err, HM_ERR_INVALID, "empty after decompression");
        return open_error(l, l->a, regular, err);
    }
    return HM_OK;
}

/* 1 if p: [n] is all zero bytes; else 0 with *at the first other byte. */
static int all_zero(const uint8_t *p, size_t n, size_t *at)
{
    for (size_t i = 0; i < n; i++)
        if (p[i]) {
            *at = i;
            return 0;
        }
    return 1;
}

/* After a tar level's end-of-archive marker: every byte to the end of its
 * (decompressed) stream must be zero padding. `cat a.tar b.tar` and a tar
 * with anything appended are refused: their tail would be dropped. */
static int check_tail(struct level *l, int depth, struct hm_error *err)
{
    if ((archive_format(l->a) & ARCHIVE_FORMAT_BASE_MASK) != ARCHIVE_FORMAT_TAR)
        return 0;
    la_int64_t pos = archive_filter_bytes(l->a, 0); /* bytes the tar reader consumed */
    uint64_t p = pos > 0 ? (uint64_t)pos : 0, bad = UINT64_MAX;
    size_t at;
    if (l->src) {
        /* [p, fed) lies in the last two blocks handed over: prev, then last */
        const int last = l->cur, prev = l->cur ^ 1;
        const uint64_t last_start = l->fed - l->blk_len[last];
        const uint64_t prev_start = last_start - l->blk_len[prev];
        const uint64_t start[2] = {prev_start, last_start};
        const int k[2] = {prev, last};
        for (int j = 0; j < 2 && bad == UINT64_MAX; j++) {
            uint64_t end = start[j] + l->blk_len[k[j]], from = p > start[j] ? p : start[j];
            if (from < end && !all_zero(l->blk[k[j]] + (from - start[j]), (size_t)(end - from), &at))
                bad = from + at;
        }
        uint64_t off = l->fed;
        la_ssize_t r;
        while (bad == UINT64_MAX && (r = archive_read_data(l->src, l->blk[0], BLOCK)) > 0) {
            if (!all_zero(l->blk[0], (size_t)r, &at))
                bad = off + at;
            off += (uint64_t)r;
        }
    } else if (l->fd < 0) {
        if (p < l->buf_len && !all_zero(l->buf + p, l->buf_len - p, &at))
            bad = p + at;
    } else {
        uint8_t blk[4096];
        ssize_t r;
        uint64_t off = p;
        while (bad == UINT64_MAX && (r = pread(l->fd, blk, sizeof blk, (off_t)off)) > 0) {
            if (!all_zero(blk, (size_t)r, &at))
                bad = off + at;
            off += (uint64_t)r;
        }
    }
    if (bad == UINT64_MAX)
        return 0;
    hm_error_set(err, HM_ERR_FORMAT,
                 "data after the tar's end-of-archive marker (at byte %llu of the tar; "
                 "concatenated archives are not read)",
                 (unsigned long long)bad);
    if (depth > 0)
        hm_error_prefix(err, "member '%s': ", l->name);
    return -1;
}

static struct hm_text_source *source_new(void)
{
    struct hm_text_source *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    for (int i = 0; i <= MAX_DEPTH; i++)
        s->lv[i].fd = -1;
    s->inproc = probe_inprocess_filters();
    return s;
}

/* Opens level 0 of s over fd or data: [size]; frees s on failure. */
static enum hm_status open_top(struct hm_text_source *s, int fd, int regular, const void *data,
                               size_t size, const char *name, struct hm_text_source **out,
                               struct hm_error *err)
{
    struct level *l = &s->lv[0];
    l->fd = fd;
    l->fd_seekable = regular && fd >= 0 && lseek(fd, 0, SEEK_CUR) == 0;
    l->name = strdup(name);
    enum hm_status st = l->name ? HM_OK : hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    if (st == HM_OK && fd < 0) {
        l->buf = (uint8_t *)data; /* the caller's: not freed */
        l->buf_borrowed = 1;
        l->buf_len = size;
    }
    if (st == HM_OK)
        st = open_level(s, l, regular, err);
    if (st != HM_OK) {
        hm_text_source_close(s);
        return st;
    }
    *out = s;
    return HM_OK;
}

enum hm_status hm_text_source_open(const char *path, struct hm_text_source **out,
                                   struct hm_error *err)
{
    *out = NULL;
    struct hm_text_source *s = source_new();
    if (!s)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    struct stat sb;
    int fd;
    if (strcmp(path, "-") == 0) {
        /* a closed stdin (<&-; tools hold fd 0 open write-only then, so
         * that no output takes it) is said as such, not as a stale errno */
        int fl = fcntl(0, F_GETFL);
        if (fl < 0 || (fl & O_ACCMODE) == O_WRONLY || fstat(0, &sb) != 0) {
            hm_text_source_close(s);
            return hm_error_set(err, HM_ERR_IO, "stdin is closed");
        }
        fd = dup(0);
        if (fd < 0) {
            int e = errno;
            hm_text_source_close(s);
            return hm_error_set_errno(err, HM_ERR_IO, e, "cannot read");
        }
        return open_top(s, fd, S_ISREG(sb.st_mode), NULL, 0, "stdin", out, err);
    }
    /* a FIFO or pipe is a stream (a FIFO without a writer reads as empty);
     * a device is no text input */
    fd = hm_open_input(path, &sb, err);
    if (fd >= 0 && hm_input_regular(&sb, "a text input", err) != HM_OK) {
        close(fd);
        fd = -1;
    }
    if (fd < 0) {
        hm_text_source_close(s);
        return err ? err->status : HM_ERR_IO;
    }
    return open_top(s, fd, S_ISREG(sb.st_mode), NULL, 0, path, out, err);
}

enum hm_status hm_text_source_open_memory(const void *data, size_t size, const char *name,
                                          struct hm_text_source **out, struct hm_error *err)
{
    *out = NULL;
    struct hm_text_source *s = source_new();
    if (!s)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    return open_top(s, -1, 0, data, size, name, out, err);
}

void hm_text_source_close(struct hm_text_source *s)
{
    if (!s)
        return;
    for (int i = 0; i <= MAX_DEPTH; i++)
        close_level(&s->lv[i]);
    cJSON_Delete(s->json);
    free(s->doc);
    free(s->text);
    free(s);
}

uint64_t hm_text_source_bytes_read(const struct hm_text_source *s)
{
    const struct level *l = &s->lv[0];
    struct archive *a = l->src ? l->src : l->a;
    la_int64_t n = a ? archive_filter_bytes(a, -1) : 0;
    return n > 0 ? (uint64_t)n : 0;
}

int64_t hm_text_source_docs(const struct hm_text_source *s) { return s->docs; }

/* Records an error and evaluates to -1 (the next() error return). */
#define FAIL(err, st, ...) (hm_error_set((err), (st), __VA_ARGS__), -1)

/* Appends up to want bytes of the current member to doc. Returns bytes read,
 * 0 at the member's end, -1 on error. */
static la_ssize_t read_chunk(struct hm_text_source *s, size_t want, struct hm_error *err)
{
    struct level *l = &s->lv[s->depth];
    if (s->doc_cap - s->doc_len < want) {
        size_t cap = s->doc_cap ? s->doc_cap : 1 << 16;
        while (cap - s->doc_len < want)
            cap *= 2;
        if (cap > HM_TEXT_MAX_MEMBER + (1 << 16))
            cap = HM_TEXT_MAX_MEMBER + (1 << 16);
        if (cap - s->doc_len < want) {
            return FAIL(err, HM_ERR_INVALID,
                        "member '%s' is larger than 1 GiB (refusing to hold it in memory)",
                        s->name);
        }
        uint8_t *d = realloc(s->doc, cap);
        if (!d) {
            return FAIL(err, HM_ERR_NOMEM, "out of memory reading member '%s'", s->name);
        }
        s->doc = d;
        s->doc_cap = cap;
    }
    la_ssize_t r = archive_read_data(l->a, s->doc + s->doc_len, want);
    if (r < 0) {
        return FAIL(err, HM_ERR_FORMAT, "corrupt data in member '%s': %s", s->name,
                    archive_error_string(l->a) ? archive_error_string(l->a) : "read error");
    }
    if (s->sniff && r > 0) {
        s->sniff = 0;
        const char *ext = external_compression(s->doc + s->doc_len, (size_t)r, s->inproc);
        if (ext) {
            hm_error_set(err, HM_ERR_UNSUPPORTED,
                 "compressed with %s, which this build decodes only with an external "
                 "program: hm runs none (decompress it first)", ext);
            if (s->depth > 0)
                hm_error_prefix(err, "member '%s': ", s->name);
            return -1;
        }
    }
    s->doc_len += (size_t)r;
    return r;
}

/* Reads the whole current member into doc. 0 ok, -1 error. */
static int read_member(struct hm_text_source *s, struct hm_error *err)
{
    s->doc_len = 0;
    for (;;) {
        if (s->doc_len > HM_TEXT_MAX_MEMBER)
            return FAIL(err, HM_ERR_INVALID, "member '%s' is larger than 1 GiB (refusing to hold it in memory)",
                        s->name);
        la_ssize_t r = read_chunk(s, 1 << 16, err);
        if (r < 0)
            return -1;
        if (r == 0)
            return 0;
    }
}

/* Returns p past JSON whitespace, at most to end. */
static const char *skip_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
        p++;
    return p;
}

static int hex4(const char *p, unsigned *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        *v = *v << 4 | (unsigned)d;
    }
    return 0;
}

/* Decodes the JSON string at *pp (at its opening quote, end of input at
 * end) into out: [*n] (may be NULL to skip it), moving *pp past the closing
 * quote. The line was accepted by cJSON, so the string is well formed;
 * -1 only if it is not (never expected). */
static int json_string(const char **pp, const char *end, char *out, size_t *n)
{
    const char *p = *pp + 1;
    size_t k = 0;
    while (p < end && *p != '"') {
        unsigned c = (unsigned char)*p++;
        if (c == '\\' && p < end) {
            char e = *p++;
            static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            const char *f = strchr(from, e);
            if (e != 'u') {
                if (!f || !e)
                    return -1;
                c = (unsigned char)to[f - from];
            } else {
                unsigned hi, lo;
                if (end - p < 4 || hex4(p, &hi) != 0)
                    return -1;
                p += 4;
                c = hi;
                if (hi >= 0xD800 && hi <= 0xDBFF && end - p >= 6 && p[0] == '\\' &&
                    p[1] == 'u' && hex4(p + 2, &lo) == 0 && lo >= 0xDC00 && lo <= 0xDFFF) {
                    c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                    p += 6;
                }
                uint8_t u[4];
                int m = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
                if (m == 1) {
                    u[0] = (uint8_t)c;
                } else {
                    static const uint8_t lead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
                    for (int i = m - 1; i > 0; i--, c >>= 6)
                        u[i] = (uint8_t)(0x80 | (c & 0x3F));
                    u[0] = (uint8_t)(lead[m] | c);
                }
                if (out)
                    memcpy(out + k, u, (size_t)m);
                k += (size_t)m;
                continue;
            }
        }
        if (out)
            out[k] = (char)c;
        k++;
    }
    if (p >= end)
        return -1;
    *pp = p + 1;
    *n = k;
    return 0;
}

/* Moves *pp past one JSON value, to the ',' or '}' after it (the line is
 * valid JSON). */
static int json_skip(const char **pp, const char *end)
{
    const char *p = *pp;
    int depth = 0;
    size_t n;
    while (p < end) {
        if (*p == '"') {
            if (json_string(&p, end, NULL, &n) != 0)
                return -1;
            continue;
        }
        if (*p == '{' || *p == '[') {
            depth++;
        } else if (*p == '}' || *p == ']') {
            if (depth == 0)
                break;
            depth--;
        } else if (*p == ',' && depth == 0) {
            break;
        }
        p++;
    }
    *pp = p;
    return 0;
}

/* The top-level "text" of the JSON object line: [n], decoded whole into
 * s->text (U+0000 included): the first "text" key, as cJSON takes it.
 * 0, or -1 out of memory (the line was valid JSON: cJSON parsed it). */
static int decode_text_field(struct hm_text_source *s, const char *line, size_t n,
                             const char **doc, size_t *len)
{
    const char *p = skip_ws(line, line + n) + 1, *end = line + n; /* past '{' */
    if (s->text_cap < n + 1) {
        char *t = realloc(s->text, n + 1); /* a decoded string is never longer */
        if (!t)
            return -1;
        s->text = t;
        s->text_cap = n + 1;
    }
    for (;;) {
        size_t kn;
        p = skip_ws(p, end);
        if (p >= end || *p != '"' || json_string(&p, end, s->text, &kn) != 0)
            return 0; /* not expected: keep cJSON's text */
        int is_text = kn == 4 && memcmp(s->text, "text", 4) == 0;
        p = skip_ws(p, end) + 1; /* past ':' */
        p = skip_ws(p, end);
        if (is_text && p < end && *p == '"') {
            size_t tn;
            if (json_string(&p, end, s->text, &tn) == 0) {
                *doc = s->text;
                *len = tn;
            }
            return 0;
        }
        if (json_skip(&p, end) != 0)
            return 0;
        p = skip_ws(p, end);
        if (p >= end || *p != ',')
            return 0;
        p++;
    }
}

/* The next jsonl line's document: 1, 0 at the member's end, -1 on error. */
static int next_jsonl(struct hm_text_source *s, const char **doc, size_t *len,
                      const char **name, struct hm_error *err)
{
    for (;;) {
        uint8_t *start = s->doc + s->line_start;
        size_t avail = s->doc_len - s->line_start;
        uint8_t *nl = avail ? memchr(start, '\n', avail) : NULL;
        if (!nl && !s->jsonl_eof) {
            /* compact, then read more */
            if (avail)
                memmove(s->doc, start, avail);
            s->doc_len = avail;
            s->line_start = 0;
            if (s->doc_len > HM_TEXT_MAX_MEMBER)
                return FAIL(err, HM_ERR_INVALID, "line in '%s' is longer than 1 GiB", s->name);
            la_ssize_t r = read_chunk(s, 1 << 16, err);
            if (r < 0)
                return -1;
            if (r == 0)
                s->jsonl_eof = 1;
            continue;
        }
        if (!nl && avail == 0)
            return 0;
        size_t n = nl ? (size_t)(nl - start) : avail;
        s->line_start += n + (nl != NULL);
        s->line_no++;
        size_t k = 0;
        while (k < n && (start[k] == ' ' || start[k] == '\t' || start[k] == '\r'))
            k++;
        if (k == n)
            continue; /* blank line */
        cJSON_Delete(s->json);
        s->json = cJSON_ParseWithLength((const char *)start, n);
        const cJSON *text = s->json ? cJSON_GetObjectItemCaseSensitive(s->json, "text") : NULL;
        if (!cJSON_IsObject(s->json) || !cJSON_IsString(text)) {
            char line[32];
            snprintf(line, sizeof line, "%lld", (long long)s->line_no);
            s->name[s->jsonl_base] = 0;
            return FAIL(err, HM_ERR_FORMAT,
                        "%s: line %s is not a JSON object with a string \"text\"", s->name, line);
        }
        *doc = text->valuestring;
        *len = strlen(text->valuestring);
        /* cJSON's strings end at an embedded U+0000: a line with the escape
         * \u0000 has its "text" decoded here, whole (as Python's json does) */
        if (memmem(start, n, "\\u0000", 6)) {
            if (decode_text_field(s, (const char *)start, n, doc, len) != 0) {
                s->name[s->jsonl_base] = 0;
                return FAIL(err, HM_ERR_NOMEM, "%s: line %lld: out of memory", s->name,
                            (long long)s->line_no);
            }
        }
        size_t b = s->jsonl_base;
        snprintf(s->name + b, sizeof s->name - b, ":%lld", (long long)s->line_no);
        *name = s->name;
        return 1;
    }
}

int hm_text_source_next(struct hm_text_source *s, const char **doc, size_t *len,
                        const char **name_view, struct hm_error *err)
{
    for (;;) {
        if (s->jsonl) {
            int r = next_jsonl(s, doc, len, name_view, err);
            if (r != 0) {
                s->docs += r > 0;
                return r;
            }
            s->jsonl = 0;
        }
        struct level *l = &s->lv[s->depth];
        struct archive_entry *e;
        int r = archive_read_next_header(l->a, &e);
        if (r == ARCHIVE_EOF) {
            if (check_tail(l, s->depth, err) != 0)
                return -1;
            if (s->depth == 0)
                return 0;
            close_level(l);
            s->depth--;
            continue;
        }
        if (r < ARCHIVE_WARN)
            return FAIL(err, HM_ERR_FORMAT, "corrupt archive '%s': %s", l->name,
                        archive_error_string(l->a) ? archive_error_string(l->a) : "read error");
        int raw = archive_format(l->a) == ARCHIVE_FORMAT_RAW;
        if (!raw && archive_entry_filetype(e) != AE_IFREG)
            continue;
        /* raw streams (a bare file, or one compressed stream) are named after
         * the level, without its compression extension */
        char base[1024];
        const char *ename = archive_entry_pathname(e);
        if (raw || !ename) {
            strip_compress(l->name, base, sizeof base);
            snprintf(s->name, sizeof s->name, "%s", base);
        } else if (s->depth == 0) {
            snprintf(s->name, sizeof s->name, "%s", ename);
        } else {
            snprintf(s->name, sizeof s->name, "%s/%s", l->name, ename);
        }
        if (archive_entry_size_is_set(e) && archive_entry_size(e) > (la_int64_t)HM_TEXT_MAX_MEMBER)
            return FAIL(err, HM_ERR_INVALID, "member '%s' is larger than 1 GiB (refusing to hold it in memory)",
                        s->name);
        /* "x.jsonl.xz" is first opened as a nested stream; its raw entry is "x.jsonl" */
        s->sniff = raw;
        if (ends_with(s->name, ".jsonl")) {
            s->jsonl = 1;
            s->jsonl_eof = 0;
            s->line_no = 0;
            s->line_start = 0;
            s->doc_len = 0;
            s->jsonl_base = strlen(s->name);
            continue;
        }
        if (read_member(s, err) != 0)
            return -1;
        if (!raw && is_nested_name(s->name)) {
            if (s->depth == MAX_DEPTH)
                return FAIL(err, HM_ERR_UNSUPPORTED, "'%s': archives nested more than %d deep",
                            s->name, MAX_DEPTH);
            struct level *in = &s->lv[s->depth + 1];
            in->name = strdup(s->name);
            in->buf = s->doc; /* the level now owns the member's bytes */
            in->buf_len = s->doc_len;
            s->doc = NULL;
            s->doc_len = s->doc_cap = 0;
            s->depth++;
            if (!in->name)
                return FAIL(err, HM_ERR_NOMEM, "out of memory opening '%s'", s->name);
            if (open_level(s, in, 0, err) != HM_OK) {
                hm_error_prefix(err, "corrupt member '%s': ", s->name);
                return -1;
            }
            continue;
        }
        *doc = (const char *)s->doc;
        *len = s->doc_len;
        *name_view = s->name;
        s->docs++;
        return 1;
    }
}
