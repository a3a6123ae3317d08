/* text_source.c — documents from plain text, jsonl and (nested) archives. */
#include "text_source.h"

#include "fileio.h"

#include <archive.h>
#include <archive_entry.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DEPTH 4

struct level {
    struct archive *a;
    uint8_t *buf;   /* owned compressed bytes this level reads (NULL for the file) */
    char *name;     /* owned: the archive's display name */
};

struct hm_text_source {
    struct level lv[MAX_DEPTH + 1];
    int depth;           /* index of the innermost open level */
    uint8_t *doc;        /* current member bytes, [doc_len] of [doc_cap] */
    size_t doc_len, doc_cap;
    char name[1024];     /* current document name */
    /* jsonl streaming state (member of the innermost level) */
    int jsonl;
    int64_t line_no;
    size_t line_start;   /* start of unconsumed data in doc */
    int jsonl_eof;
    size_t jsonl_base;   /* length of the member name before ":LINE" */
    cJSON *json;         /* the current parsed line (its text is the document) */
    int fd;              /* the input file we opened (closed with the source), or -1 */
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

/* A reader with every filter; archive formats (no mtree) unless name is text. */
static struct archive *new_reader(const char *name)
{
    struct archive *a = archive_read_new();
    if (!a)
        return NULL;
    archive_read_support_filter_all(a);
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

static void close_level(struct level *l)
{
    if (l->a)
        archive_read_free(l->a);
    free(l->buf);
    free(l->name);
    memset(l, 0, sizeof *l);
}

static enum hm_status finish_open(struct hm_text_source *s, struct archive *a, int r,
                                  const char *name, struct hm_text_source **out,
                                  struct hm_error *err)
{
    s->lv[0].a = a;
    s->lv[0].name = strdup(name);
    if (r != ARCHIVE_OK) {
        int e = archive_errno(a);
        struct stat sb;
        if (stat(name, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == 0) {
            /* libarchive leaves a stale errno for an empty file: say what it is */
            hm_text_source_close(s);
            return hm_error_set(err, HM_ERR_INVALID, "file is empty");
        }
        enum hm_status st = e > 0 && e < 4096
            ? hm_error_set_errno(err, HM_ERR_IO, e, "cannot open")
            : hm_error_set(err, HM_ERR_FORMAT, "%s",
                           archive_error_string(a) ? archive_error_string(a) : "cannot open");
        hm_text_source_close(s);
        return st;
    }
    if (!s->lv[0].name) {
        hm_text_source_close(s);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    }
    *out = s;
    return HM_OK;
}

enum hm_status hm_text_source_open(const char *path, struct hm_text_source **out,
                                   struct hm_error *err)
{
    *out = NULL;
    struct hm_text_source *s = calloc(1, sizeof *s);
    struct archive *a = new_reader(path);
    if (!s || !a) {
        free(s);
        if (a)
            archive_read_free(a);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    }
    if (strcmp(path, "-") == 0)
        return finish_open(s, a, archive_read_open_fd(a, 0, 1 << 16), "stdin", out, err);
    /* a FIFO or pipe is a stream (a FIFO without a writer reads as empty);
     * a device is no text input */
    struct stat sb;
    int fd = hm_open_input(path, &sb, err);
    if (fd >= 0 && hm_input_regular(&sb, "a text input", err) != HM_OK) {
        close(fd);
        fd = -1;
    }
    if (fd < 0) {
        archive_read_free(a);
        free(s);
        return err ? err->status : HM_ERR_IO;
    }
    s->fd = fd;
    return finish_open(s, a, archive_read_open_fd(a, fd, 1 << 16), path, out, err);
}

enum hm_status hm_text_source_open_memory(const void *data, size_t size, const char *name,
                                          struct hm_text_source **out, struct hm_error *err)
{
    *out = NULL;
    struct hm_text_source *s = calloc(1, sizeof *s);
    struct archive *a = new_reader(name);
    if (!s || !a) {
        free(s);
        if (a)
            archive_read_free(a);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    }
    /* libarchive needs a non-NULL buffer even for 0 bytes */
    int r = archive_read_open_memory(a, size ? data : "", size);
    return finish_open(s, a, r, name, out, err);
}

void hm_text_source_close(struct hm_text_source *s)
{
    if (!s)
        return;
    for (int i = 0; i <= MAX_DEPTH; i++)
        close_level(&s->lv[i]);
    cJSON_Delete(s->json);
    free(s->doc);
    if (s->fd > 0)
        close(s->fd);
    free(s);
}

uint64_t hm_text_source_bytes_read(const struct hm_text_source *s)
{
    la_int64_t n = s->lv[0].a ? archive_filter_bytes(s->lv[0].a, -1) : 0;
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
        /* cJSON stops at an embedded NUL (\u0000); the rest of such a text is lost */
        *doc = text->valuestring;
        *len = strlen(text->valuestring);
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
            in->a = new_reader(s->name);
            in->name = strdup(s->name);
            if (!in->a || !in->name) {
                close_level(in);
                return FAIL(err, HM_ERR_NOMEM, "out of memory opening '%s'", s->name);
            }
            in->buf = s->doc; /* the level now owns the member's bytes */
            size_t n = s->doc_len;
            s->doc = NULL;
            s->doc_len = s->doc_cap = 0;
            s->depth++;
            if (archive_read_open_memory(in->a, in->buf ? (const void *)in->buf : "", n) !=
                ARCHIVE_OK)
                return FAIL(err, HM_ERR_FORMAT, "corrupt member '%s': %s", s->name,
                            archive_error_string(in->a) ? archive_error_string(in->a)
                                                        : "cannot open");
            continue;
        }
        *doc = (const char *)s->doc;
        *len = s->doc_len;
        *name_view = s->name;
        s->docs++;
        return 1;
    }
}
