/* bundle_read.c — opening a bundle: a directory or an archive (bundle.h). */
#include "bundle.h"

#include "sorted_names.h"
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive_read.h"
#include "bundle_internal.h"
#include "fileio.h"
#include "hash.h"

struct bundle_file {
    char *name;       /* '/'-separated path inside the bundle */
    uint64_t size;
    const void *data; /* archive: borrowed from ar; directory: owned once loaded */
    char *disk;       /* directory: the file on disk (symlinks followed); else NULL */
    int streamed;     /* archive: its bytes went to hm_bundle_open_streamed's fn */
};

struct hm_bundle {
    char *path;
    int kind; /* HM_BUNDLE_DIR, an enum hm_archive_format, or -2 (unknown archive) */
    struct hm_archive *ar;
    struct bundle_file *f; /* [n] sorted by name */
    int64_t n, cap;
};

void hm_bundle_close(struct hm_bundle *b)
{
    if (!b)
        return;
    for (int64_t i = 0; i < b->n; i++) {
        free(b->f[i].name);
        if (b->f[i].disk)
            free((void *)b->f[i].data);
        free(b->f[i].disk);
    }
    free(b->f);
    hm_archive_free(b->ar);
    free(b->path);
    free(b);
}

int hm_bundle_detect(const char *path)
{
    if (hm_is_dir(path)) {
        size_t n = strlen(path);
        char *m = malloc(n + sizeof HM_BUNDLE_MANIFEST + 1);
        if (!m)
            return 0;
        memcpy(m, path, n);
        m[n] = '/';
        memcpy(m + n + 1, HM_BUNDLE_MANIFEST, sizeof HM_BUNDLE_MANIFEST);
        int r = hm_is_file(m);
        free(m);
        return r;
    }
    if (!hm_is_file(path))
        return 0;
    unsigned char head[512];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, head, sizeof head);
    close(fd);
    return n > 0 && hm_bundle_sniff(head, (size_t)n);
}

int hm_bundle_sniff(const unsigned char *head, size_t n)
{
    /* a safetensors file: u64 header length ≤ 100 MB, then '{' */
    if (n >= 9 && head[8] == '{') {
        uint64_t len = 0;
        for (int i = 7; i >= 0; i--)
            len = len << 8 | head[i];
        if (len <= HM_ST_MAX_HEADER)
            return 0;
    }
    return hm_archive_sniff(head, n);
}

static enum hm_status add(struct hm_bundle *b, const char *name, uint64_t size, const void *data,
                          const char *disk, struct hm_error *err)
{
    if (b->n == b->cap) {
        int64_t nc = b->cap ? b->cap * 2 : 16;
        struct bundle_file *nf = realloc(b->f, sizeof *nf * (size_t)nc);
        if (!nf)
            return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        b->f = nf;
        b->cap = nc;
    }
    struct bundle_file *f = &b->f[b->n];
    *f = (struct bundle_file){strdup(name), size, data, disk ? strdup(disk) : NULL, 0};
    if (!f->name || (disk && !f->disk)) {
        free(f->name);
        free(f->disk);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    }
    b->n++;
    return HM_OK;
}

int hm_bundle_is_housekeeping(const char *name)
{
    static const char *const names[] = {HM_BUNDLE_HOUSEKEEPING};
    size_t k = strcspn(name, "/");
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strlen(names[i]) == k && strncmp(name, names[i], k) == 0)
            return 1;
    return 0;
}

/* The folders walked so far (each once) and the entries seen. */
struct walk_state {
    struct stat *dirs; /* [n] only st_dev, st_ino used */
    int64_t n, cap;
    int64_t entries;
};

/* Records folder sb; an error when it was reached before (a symlink to a
 * folder already listed: fan-out or a cycle). */
static enum hm_status visit_dir(struct walk_state *w, const struct stat *sb, const char *name,
                                struct hm_error *err)
{
    for (int64_t i = 0; i < w->n; i++)
        if (w->dirs[i].st_dev == sb->st_dev && w->dirs[i].st_ino == sb->st_ino)
            return hm_error_set(err, HM_ERR_INVALID,
                                "'%s' is a folder reached twice (through symlinks): refused",
                                name);
    if (w->n == w->cap) {
        int64_t nc = w->cap ? w->cap * 2 : 16;
        struct stat *nd = realloc(w->dirs, sizeof *nd * (size_t)nc);
        if (!nd)
            return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        w->dirs = nd;
        w->cap = nc;
    }
    w->dirs[w->n++] = *sb;
    return HM_OK;
}

/* Lists dir/rel (rel "" for the root) into b, following symlinks. */
static enum hm_status walk(struct hm_bundle *b, struct walk_state *w, const char *root,
                           const char *rel, int depth, struct hm_error *err)
{
    size_t rl = strlen(root), ll = strlen(rel);
    char *dir = malloc(rl + ll + 2);
    if (!dir)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    snprintf(dir, rl + ll + 2, "%s%s%s", root, ll ? "/" : "", rel);
    DIR *d = opendir(dir);
    enum hm_status st = HM_OK;
    if (!d) {
        st = hm_error_set_errno(err, HM_ERR_IO, errno, "cannot list '%s'", ll ? rel : ".");
        free(dir);
        return st;
    }
    struct dirent *de;
    while (st == HM_OK && (de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
            (!ll && hm_bundle_is_housekeeping(de->d_name)))
            continue;
        if (++w->entries > HM_BUNDLE_MAX_ENTRIES) {
            st = hm_error_set(err, HM_ERR_INVALID, "more than %d files and folders: refused",
                              HM_BUNDLE_MAX_ENTRIES);
            break;
        }
        size_t nl = strlen(de->d_name);
        char *name = malloc(ll + nl + 2), *disk = malloc(strlen(dir) + nl + 2);
        if (!name || !disk) {
            free(name);
            free(disk);
            st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
            break;
        }
        snprintf(name, ll + nl + 2, "%s%s%s", rel, ll ? "/" : "", de->d_name);
        snprintf(disk, strlen(dir) + nl + 2, "%s/%s", dir, de->d_name);
        struct stat sb;
        if (stat(disk, &sb) != 0)
            st = hm_error_set_errno(err, HM_ERR_IO, errno, "cannot read '%s'", name);
        else if (S_ISDIR(sb.st_mode) && depth >= HM_BUNDLE_MAX_DEPTH)
            st = hm_error_set(err, HM_ERR_INVALID, "'%s' is nested deeper than %d folders", name,
                              HM_BUNDLE_MAX_DEPTH);
        else if (S_ISDIR(sb.st_mode)) {
            if ((st = visit_dir(w, &sb, name, err)) == HM_OK)
                st = walk(b, w, root, name, depth + 1, err);
        } else if (!S_ISREG(sb.st_mode))
            st = hm_error_set(err, HM_ERR_INVALID, "'%s' is not a regular file", name);
        else
            st = add(b, name, (uint64_t)sb.st_size, NULL, disk, err);
        free(name);
        free(disk);
    }
    closedir(d);
    free(dir);
    return st;
}

/* Lists the folder bundle at root into b. */
static enum hm_status walk_root(struct hm_bundle *b, const char *root, struct hm_error *err)
{
    struct walk_state w = {0};
    struct stat sb;
    enum hm_status st = stat(root, &sb) == 0 ? visit_dir(&w, &sb, ".", err)
                        : hm_error_set_errno(err, HM_ERR_IO, errno, "cannot list '.'");
    if (st == HM_OK)
        st = walk(b, &w, root, "", 0, err);
    free(w.dirs);
    return st;
}

static int cmp_file(const void *x, const void *y)
{
    return strcmp(((const struct bundle_file *)x)->name, ((const struct bundle_file *)y)->name);
}

/* An archive's members are vetted against MANIFEST.json as they come
 * (hm-pack writes it first): once it is read, a member it does not list is
 * refused before its data is inflated, and a listed one is read up to the
 * bytes listed, no further. Housekeeping entries are skipped unread. */
struct vet {
    cJSON *manifest;
    const cJSON *files; /* its "files" object, NULL until read (or if it has none) */
    hm_bundle_data_fn fn; /* hm_bundle_open_streamed: where streamed members go */
    void *fn_ctx;
};

/* Streamed by hm_bundle_open_streamed: all but the two files read whole. */
static int streams(const struct vet *v, const char *name)
{
    return v->fn && strcmp(name, HM_BUNDLE_MANIFEST) != 0 && strcmp(name, HM_BUNDLE_INDEX) != 0;
}

static enum hm_status vet_data(void *ctx, const char *name, const void *data, size_t size,
                               struct hm_error *err)
{
    struct vet *v = ctx;
    return v->fn(v->fn_ctx, name, data, size, err);
}

static enum hm_status not_listed(const char *name, struct hm_error *err)
{
    return hm_error_set(err, HM_ERR_INVALID, "entry '%s' is not listed in %s: refused", name,
                        HM_BUNDLE_MANIFEST);
}

static enum hm_status vet_member(void *ctx, const char *name, int64_t declared,
                                 struct hm_archive_vet *vet, struct hm_error *err)
{
    struct vet *v = ctx;
    uint64_t bytes;
    (void)declared; /* the reader refuses a declared size above vet->max_size */
    if (hm_bundle_is_housekeeping(name)) {
        vet->skip = 1;
        return HM_OK;
    }
    if (strcmp(name, HM_BUNDLE_MANIFEST) == 0) {
        vet->max_size = HM_BUNDLE_MAX_SMALL_FILE;
        return HM_OK;
    }
    vet->stream = streams(v, name);
    if (!vet->stream && vet->max_size > HM_BUNDLE_MAX_SMALL_FILE && v->fn)
        vet->max_size = HM_BUNDLE_MAX_SMALL_FILE; /* the index, held whole */
    if (!v->files)
        return HM_OK; /* before the manifest: only the total cap */
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(v->files, name);
    if (!e)
        return not_listed(name, err);
    if (hm_bundle_json_u64(cJSON_GetObjectItemCaseSensitive(e, "bytes"), &bytes) == 0 &&
        bytes < vet->max_size) {
        vet->max_size = bytes;
        vet->bound = HM_BUNDLE_MANIFEST " lists";
    }
    return HM_OK;
}

static enum hm_status vet_kept(void *ctx, const char *name, const void *data, size_t size,
                               struct hm_error *err)
{
    struct vet *v = ctx;
    if (strcmp(name, HM_BUNDLE_MANIFEST) != 0)
        return HM_OK;
    if (v->manifest) /* (found by fuzz_bundle: the first one leaked) */
        return hm_error_set(err, HM_ERR_INVALID, "entry '%s' appears twice", name);
    v->manifest = cJSON_ParseWithLength(data, size);
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(v->manifest, "files");
    v->files = cJSON_IsObject(v->manifest) && cJSON_IsObject(f) ? f : NULL;
    return HM_OK; /* a manifest that does not parse is hm_bundle_check's to report */
}

/* Reads the archive at path (or buf: [len] when path is NULL) into b; with
 * fn, members but the manifest and the index go to fn instead. */
static enum hm_status from_archive(struct hm_bundle *b, const char *path, const void *buf,
                                   size_t len, hm_bundle_data_fn fn, void *fn_ctx,
                                   struct hm_error *err)
{
    struct vet v = {NULL, NULL, fn, fn_ctx};
    struct hm_archive_limits lim = {.member = vet_member, .kept = vet_kept,
                                    .data = fn ? vet_data : NULL, .ctx = &v};
    enum hm_status st = path ? hm_archive_read_path(path, &lim, &b->ar, err)
                             : hm_archive_read_memory(buf, len, &lim, &b->ar, err);
    for (int64_t i = 0; st == HM_OK && i < hm_archive_n_members(b->ar); i++) {
        const struct hm_archive_member *m = hm_archive_member_at(b->ar, i);
        /* members that came before the manifest are held to it now */
        if (v.files && strcmp(m->name, HM_BUNDLE_MANIFEST) != 0 &&
            !cJSON_GetObjectItemCaseSensitive(v.files, m->name))
            st = not_listed(m->name, err);
        else if ((st = add(b, m->name, m->size, m->data, NULL, err)) == HM_OK)
            b->f[b->n - 1].streamed = streams(&v, m->name);
    }
    cJSON_Delete(v.manifest);
    if (st == HM_OK) {
        int f = hm_archive_format_of(b->ar);
        b->kind = f >= 0 ? f : -2;
    }
    return st;
}

static enum hm_status finish_open(struct hm_bundle *b, enum hm_status st, struct hm_bundle **out,
                                  struct hm_error *err)
{
    if (st == HM_OK && b->n > 1)
        qsort(b->f, (size_t)b->n, sizeof *b->f, cmp_file);
    if (st == HM_OK && hm_bundle_find(b, HM_BUNDLE_MANIFEST) < 0)
        st = hm_error_set(err, HM_ERR_UNSUPPORTED, "not a bundle: no %s", HM_BUNDLE_MANIFEST);
    if (st != HM_OK) {
        hm_bundle_close(b);
        return st;
    }
    *out = b;
    return HM_OK;
}

static enum hm_status open_memory(const void *buf, size_t len, const char *name,
                                  hm_bundle_data_fn fn, void *ctx, struct hm_bundle **out,
                                  struct hm_error *err)
{
    *out = NULL;
    struct hm_bundle *b = calloc(1, sizeof *b);
    if (!b || !(b->path = strdup(name))) {
        free(b);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    }
    enum hm_status st = from_archive(b, NULL, buf, len, fn, ctx, err);
    return finish_open(b, st, out, err);
}

static enum hm_status open_path(const char *path, hm_bundle_data_fn fn, void *ctx,
                                struct hm_bundle **out, struct hm_error *err)
{
    *out = NULL;
    struct hm_bundle *b = calloc(1, sizeof *b);
    if (!b || !(b->path = strdup(path))) {
        free(b);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    }
    enum hm_status st;
    if (strcmp(path, "-") == 0) {
        char *buf;
        size_t len;
        hm_bundle_close(b);
        if ((st = hm_read_fd(0, hm_archive_default_max_total(), &buf, &len, err)) != HM_OK)
            return st;
        st = open_memory(buf, len, "-", fn, ctx, out, err);
        free(buf);
        return st;
    }
    if (hm_is_dir(path)) {
        b->kind = HM_BUNDLE_DIR;
        /* a folder without a manifest is no bundle, whatever else it holds */
        st = hm_bundle_detect(path) ? walk_root(b, path, err)
                                    : hm_error_set(err, HM_ERR_UNSUPPORTED, "not a bundle: no %s",
                                                   HM_BUNDLE_MANIFEST);
    } else {
        st = from_archive(b, path, NULL, 0, fn, ctx, err);
    }
    return finish_open(b, st, out, err);
}

enum hm_status hm_bundle_open(const char *path, struct hm_bundle **out, struct hm_error *err)
{
    return open_path(path, NULL, NULL, out, err);
}

enum hm_status hm_bundle_open_streamed(const char *path, hm_bundle_data_fn fn, void *ctx,
                                       struct hm_bundle **out, struct hm_error *err)
{
    return open_path(path, fn, ctx, out, err);
}

enum hm_status hm_bundle_open_memory(const void *buf, size_t len, const char *name,
                                     struct hm_bundle **out, struct hm_error *err)
{
    return open_memory(buf, len, name, NULL, NULL, out, err);
}

const char *hm_bundle_kind_name(const struct hm_bundle *b)
{
    if (b->kind == HM_BUNDLE_DIR)
        return "dir";
    const char *s = b->kind >= 0 ? hm_archive_format_name((enum hm_archive_format)b->kind) : NULL;
    return s ? s : "archive";
}

const char *hm_bundle_path(const struct hm_bundle *b) { return b->path; }
int64_t hm_bundle_n_files(const struct hm_bundle *b) { return b->n; }

const char *hm_bundle_file_name(const struct hm_bundle *b, int64_t i)
{
    return i >= 0 && i < b->n ? b->f[i].name : NULL;
}

uint64_t hm_bundle_file_size(const struct hm_bundle *b, int64_t i)
{
    return i >= 0 && i < b->n ? b->f[i].size : 0;
}

const char *hm_bundle_file_disk_path(const struct hm_bundle *b, int64_t i)
{
    return i >= 0 && i < b->n ? b->f[i].disk : NULL;
}

int64_t hm_bundle_find(const struct hm_bundle *b, const char *name)
{
    return hm_find_sorted_name(b->f, b->n, sizeof *b->f, offsetof(struct bundle_file, name),
                               name);
}

enum hm_status hm_bundle_file_data(struct hm_bundle *b, int64_t i, const void **data,
                                   size_t *len, struct hm_error *err)
{
    *data = NULL;
    *len = 0;
    if (i < 0 || i >= b->n)
        return hm_error_set(err, HM_ERR_INVALID, "no such bundle file");
    struct bundle_file *f = &b->f[i];
    if (f->streamed)
        return hm_error_set(err, HM_ERR_INVALID, "'%s' was streamed, not kept", f->name);
    if (f->disk && !f->data) {
        char *buf;
        size_t n;
        enum hm_status st = hm_read_file(f->disk, HM_BUNDLE_MAX_SMALL_FILE, &buf, &n, err);
        if (st != HM_OK) {
            hm_error_prefix(err, "'%s': ", f->name);
            return st;
        }
        f->data = buf;
        f->size = n;
    }
    *data = f->data ? f->data : "";
    *len = (size_t)f->size;
    return HM_OK;
}

enum hm_status hm_bundle_file_xxh3(const struct hm_bundle *b, int64_t i, uint64_t *h,
                                   struct hm_error *err)
{
    if (i < 0 || i >= b->n)
        return hm_error_set(err, HM_ERR_INVALID, "no such bundle file");
    const struct bundle_file *f = &b->f[i];
    if (f->streamed)
        return hm_error_set(err, HM_ERR_INVALID, "'%s' was streamed, not kept", f->name);
    if (f->data || !f->disk) {
        *h = hm_xxh3(f->data ? f->data : "", (size_t)f->size);
        return HM_OK;
    }
    enum hm_status st = hm_xxh3_file(f->disk, h, err);
    if (st != HM_OK)
        hm_error_prefix(err, "'%s': ", f->name);
    return st;
}

enum hm_status hm_bundle_open_member(const struct hm_bundle *b, const char *name,
                                     struct hm_st_file **out, struct hm_error *err)
{
    *out = NULL;
    int64_t i = hm_bundle_find(b, name);
    if (i < 0)
        return hm_error_set(err, HM_ERR_INVALID, "the bundle has no %s", name);
    const struct bundle_file *f = &b->f[i];
    enum hm_status st = f->disk ? hm_st_open(f->disk, out, err)
                                : hm_st_open_memory((void *)f->data, (size_t)f->size, 0, out, err);
    if (st != HM_OK)
        hm_error_prefix(err, "%s: ", name);
    return st;
}

int hm_bundle_file_streamed(const struct hm_bundle *b, int64_t i)
{
    return i >= 0 && i < b->n && b->f[i].streamed;
}

enum hm_status hm_bundle_file_stream(const struct hm_bundle *b, int64_t i, hm_bundle_data_fn fn,
                                     void *ctx, struct hm_error *err)
{
    if (i < 0 || i >= b->n || b->f[i].streamed)
        return hm_error_set(err, HM_ERR_INVALID, "no such bundle file");
    const struct bundle_file *f = &b->f[i];
    enum hm_status st = HM_OK;
    if (!f->disk || f->data) { /* held in memory */
        if (f->size && (st = fn(ctx, f->name, f->data, (size_t)f->size, err)) != HM_OK)
            return st;
        return fn(ctx, f->name, NULL, 0, err);
    }
    struct stat sb;
    int fd = hm_open_input(f->disk, &sb, err);
    if (fd < 0)
        return err ? err->status : HM_ERR_IO;
    enum { PIECE = 1 << 20 };
    char *buf = S_ISREG(sb.st_mode) ? malloc(PIECE) : NULL;
    if (!S_ISREG(sb.st_mode))
        st = hm_error_set(err, HM_ERR_INVALID, "'%s' is not a regular file", f->name);
    else if (!buf)
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    while (st == HM_OK) {
        ssize_t r = read(fd, buf, PIECE);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            st = hm_error_set_errno(err, HM_ERR_IO, errno, "cannot read '%s'", f->name);
        else if (r == 0)
            break;
        else
            st = fn(ctx, f->name, buf, (size_t)r, err);
    }
    free(buf);
    close(fd);
    return st == HM_OK ? fn(ctx, f->name, NULL, 0, err) : st;
}

int64_t hm_bundle_tokenizer_index(const struct hm_bundle *b)
{
    int64_t i = hm_bundle_find(b, "tokenizer.json");
    return i >= 0 ? i : hm_bundle_find(b, "tokenizer.bin");
}

/* ---- the manifest ------------------------------------------------------------ */

enum hm_status hm_bundle_manifest_parse(struct hm_bundle *b, cJSON **out, struct hm_error *err)
{
    *out = NULL;
    const void *data;
    size_t len;
    enum hm_status st = hm_bundle_file_data(b, hm_bundle_find(b, HM_BUNDLE_MANIFEST), &data,
                                            &len, err);
    if (st != HM_OK)
        return st;
    cJSON *m = cJSON_ParseWithLength(data, len);
    if (!m || !cJSON_IsObject(m)) {
        cJSON_Delete(m);
        return hm_error_set(err, HM_ERR_FORMAT, "%s is not a JSON object", HM_BUNDLE_MANIFEST);
    }
    *out = m;
    return HM_OK;
}

int hm_bundle_json_u64(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble > 9007199254740992.0 ||
        v->valuedouble != (double)(uint64_t)v->valuedouble)
        return -1;
    *out = (uint64_t)v->valuedouble;
    return 0;
}

enum hm_status hm_bundle_check(struct hm_bundle *b, struct hm_error *err)
{
    cJSON *m;
    enum hm_status st = hm_bundle_manifest_parse(b, &m, err);
    if (st != HM_OK)
        return st;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(m, "format");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(m, "version");
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(m, "files");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, HM_BUNDLE_FORMAT_NAME) != 0)
        st = hm_error_set(err, HM_ERR_FORMAT, "%s: 'format' is not \"%s\"", HM_BUNDLE_MANIFEST,
                          HM_BUNDLE_FORMAT_NAME);
    else if (!cJSON_IsNumber(ver) || ver->valuedouble != HM_BUNDLE_VERSION)
        st = hm_error_set(err, HM_ERR_UNSUPPORTED, "%s: bundle version %s is not supported (%d)",
                          HM_BUNDLE_MANIFEST, cJSON_IsNumber(ver) ? "other than 1" : "missing",
                          HM_BUNDLE_VERSION);
    else if (!cJSON_IsObject(files))
        st = hm_error_set(err, HM_ERR_FORMAT, "%s has no 'files' object", HM_BUNDLE_MANIFEST);
    else if (hm_bundle_find(b, HM_BUNDLE_WEIGHTS) < 0 && hm_bundle_find(b, HM_BUNDLE_INDEX) < 0)
        st = hm_error_set(err, HM_ERR_INVALID, "the bundle has neither %s nor %s",
                          HM_BUNDLE_WEIGHTS, HM_BUNDLE_INDEX);
    else if (hm_bundle_find(b, HM_BUNDLE_WEIGHTS) >= 0 && hm_bundle_find(b, HM_BUNDLE_INDEX) >= 0)
        st = hm_error_set(err, HM_ERR_INVALID, "the bundle holds both %s and %s",
                          HM_BUNDLE_WEIGHTS, HM_BUNDLE_INDEX);
    const cJSON *e;
    if (st == HM_OK) {
        cJSON_ArrayForEach(e, files) {
            int64_t i = hm_bundle_find(b, e->string);
            uint64_t bytes;
            if (strcmp(e->string, HM_BUNDLE_MANIFEST) == 0) {
                st = hm_error_set(err, HM_ERR_INVALID, "%s lists itself", HM_BUNDLE_MANIFEST);
                break;
            }
            if (i < 0) {
                st = hm_error_set(err, HM_ERR_INVALID, "%s lists '%s', which the bundle lacks",
                                  HM_BUNDLE_MANIFEST, e->string);
                break;
            }
            if (hm_bundle_json_u64(cJSON_GetObjectItemCaseSensitive(e, "bytes"), &bytes) != 0 ||
                bytes != hm_bundle_file_size(b, i)) {
                st = hm_error_set(err, HM_ERR_INVALID,
                                  "'%s' holds %llu bytes, not what %s lists", e->string,
                                  (unsigned long long)hm_bundle_file_size(b, i),
                                  HM_BUNDLE_MANIFEST);
                break;
            }
        }
    }
    cJSON_Delete(m);
    return st;
}
