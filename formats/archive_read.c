/* archive_read.c — whole archives into memory, every entry checked (archive_read.h). */
#include "archive_read.h"
#include "archive_filters.h"

#include "sorted_names.h"
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct entry {
    char *name;
    void *data; /* owned */
    size_t size;
    int is_dir;
};

struct hm_archive {
    struct entry *e; /* [n] sorted by name, files only after hm_archive_read_* */
    int64_t n, cap;
    struct hm_archive_member *m; /* [n] views of e */
    int format;                  /* enum hm_archive_format, or -1 */
};

int hm_archive_sniff(const void *head, size_t n)
{
    const unsigned char *p = head;
    static const unsigned char gz[] = {0x1f, 0x8b}, xz[] = {0xfd, '7', 'z', 'X', 'Z', 0},
                               zst[] = {0x28, 0xb5, 0x2f, 0xfd};
    if ((n >= 2 && memcmp(p, gz, 2) == 0) || (n >= 6 && memcmp(p, xz, 6) == 0) ||
        (n >= 4 && memcmp(p, zst, 4) == 0))
        return 1;
    if (n >= 4 && p[0] == 'P' && p[1] == 'K' && ((p[2] == 3 && p[3] == 4) || (p[2] == 5 && p[3] == 6)))
        return 1;
    return n >= 262 && memcmp(p + 257, "ustar", 5) == 0;
}

int hm_archive_sniff_path(const char *path)
{
    unsigned char head[512];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return 0;
    size_t n = 0;
    while (n < sizeof head) {
        ssize_t r = read(fd, head + n, sizeof head - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    return hm_archive_sniff(head, n);
}

void hm_archive_free(struct hm_archive *a)
{
    if (!a)
        return;
    for (int64_t i = 0; i < a->n; i++) {
        free(a->e[i].name);
        free(a->e[i].data);
    }
    free(a->e);
    free(a->m);
    free(a);
}

int64_t hm_archive_n_members(const struct hm_archive *a) { return a->n; }
int hm_archive_format_of(const struct hm_archive *a) { return a->format; }

const struct hm_archive_member *hm_archive_member_at(const struct hm_archive *a, int64_t i)
{
    return i >= 0 && i < a->n ? &a->m[i] : NULL;
}

int64_t hm_archive_find(const struct hm_archive *a, const char *name)
{
    return hm_find_sorted_name(a->e, a->n, sizeof *a->e, offsetof(struct entry, name), name);
}

/* The entry's name without one leading "./" (and, for a folder, one
 * trailing '/') into *out (owned), or an error naming why it is unsafe.
 * *out stays NULL for the root folder entry "./" itself. */
static enum hm_status clean_name(const char *raw, int is_dir, char **out, struct hm_error *err)
{
    *out = NULL;
    if (!raw)
        return hm_error_set(err, HM_ERR_INVALID, "an entry has a name that cannot be read");
    size_t n = strlen(raw);
    if (n > HM_ARCHIVE_MAX_NAME)
        return hm_error_set(err, HM_ERR_INVALID, "entry '%.64s...' has a name longer than %d bytes",
                            raw, HM_ARCHIVE_MAX_NAME);
    if (raw[0] == '/')
        return hm_error_set(err, HM_ERR_INVALID, "entry '%s' has an absolute path", raw);
    if (strchr(raw, '\\'))
        return hm_error_set(err, HM_ERR_INVALID,
                            "entry '%s' has a backslash (a path separator to some extractors)", raw);
    const char *s = strncmp(raw, "./", 2) == 0 ? raw + 2 : raw;
    size_t k = strlen(s);
    if (is_dir && k && s[k - 1] == '/')
        k--;
    if (k == 0 && s != raw)
        return HM_OK; /* "./": the archive root */
    if (k == 0)
        return hm_error_set(err, HM_ERR_INVALID, "an entry has an empty name");
    for (size_t i = 0; i <= k;) {
        size_t j = i;
        while (j < k && s[j] != '/')
            j++;
        size_t len = j - i;
        if (len == 0)
            return hm_error_set(err, HM_ERR_INVALID, "entry '%s' has an empty path component", raw);
        if (len == 2 && s[i] == '.' && s[i + 1] == '.')
            return hm_error_set(err, HM_ERR_INVALID, "entry '%s' has a '..' component", raw);
        if (len == 1 && s[i] == '.')
            return hm_error_set(err, HM_ERR_INVALID, "entry '%s' has a '.' component", raw);
        i = j + 1;
    }
    *out = strndup(s, k);
    return *out ? HM_OK : hm_error_set(err, HM_ERR_NOMEM, "out of memory");
}

/* Refuses every entry that is not a plain file or folder. */
static enum hm_status check_type(struct archive_entry *e, const char *name, int *is_dir,
                                 struct hm_error *err)
{
    const char *what = NULL;
    mode_t t = archive_entry_filetype(e);
    if (archive_entry_hardlink(e))
        what = "a hard link";
    else if (archive_entry_symlink(e) || t == AE_IFLNK)
        what = "a symlink";
    else if (t == AE_IFCHR)
        what = "a character device";
    else if (t == AE_IFBLK)
        what = "a block device";
    else if (t == AE_IFIFO)
        what = "a FIFO";
    else if (t == AE_IFSOCK)
        what = "a socket";
    else if (t != AE_IFREG && t != AE_IFDIR)
        what = "not a regular file";
    else if (archive_entry_sparse_count(e) > 0)
        what = "a sparse file";
    if (what)
        return hm_error_set(err, HM_ERR_INVALID, "entry '%s' is %s", name ? name : "?", what);
    *is_dir = t == AE_IFDIR;
    return HM_OK;
}

uint64_t hm_archive_default_max_total(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return HM_ARCHIVE_MAX_TOTAL;
    uint64_t half = (uint64_t)pages / 2 * (uint64_t)page;
    return half < HM_ARCHIVE_MAX_TOTAL ? half : HM_ARCHIVE_MAX_TOTAL;
}

static enum hm_status total_error(const struct entry *en, uint64_t max_total,
                                  struct hm_error *err)
{
    return hm_error_set(err, HM_ERR_UNSUPPORTED,
                        "members exceed %llu bytes, the most read into memory (at entry '%s')",
                        (unsigned long long)max_total, en->name);
}

/* A member vet->stream asked for: its data handed to lim->data piece by
 * piece (then once with NULL, 0), never held; the total cap does not
 * count it. */
static enum hm_status stream_data(struct archive *ar, struct entry *en,
                                  const struct hm_archive_limits *lim,
                                  const struct hm_archive_vet *vet, const char *bound,
                                  struct hm_error *err)
{
    enum { PIECE = 1 << 20 };
    char *buf = malloc(PIECE);
    if (!buf)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory reading entry '%s'", en->name);
    enum hm_status st = HM_OK;
    size_t n = 0;
    for (;;) {
        la_ssize_t r = archive_read_data(ar, buf, PIECE);
        if (r < 0) {
            st = hm_error_set(err, HM_ERR_FORMAT, "cannot read entry '%s': %s", en->name,
                              archive_error_string(ar) ? archive_error_string(ar)
                                                       : "corrupt data");
            break;
        }
        if (r == 0) {
            st = lim->data(lim->ctx, en->name, NULL, 0, err);
            break;
        }
        n += (size_t)r;
        if (n > vet->max_size) {
            st = hm_error_set(err, HM_ERR_INVALID, "entry '%s' holds more bytes than %s (%llu)",
                              en->name, bound, (unsigned long long)vet->max_size);
            break;
        }
        if ((st = lim->data(lim->ctx, en->name, buf, (size_t)r, err)) != HM_OK)
            break;
    }
    free(buf);
    en->size = n;
    return st;
}

static enum hm_status read_data(struct archive *ar, struct entry *en, uint64_t *total,
                                uint64_t max_total, const struct hm_archive_limits *lim,
                                const struct hm_archive_vet *vet, la_int64_t declared,
                                struct hm_error *err)
{
    const uint64_t max_size = vet->max_size;
    const char *bound = vet->bound ? vet->bound : "allowed for it";
    if (declared > 0 && (uint64_t)declared > max_size)
        return hm_error_set(err, HM_ERR_INVALID, "entry '%s' declares %llu bytes, more than %s (%llu)",
                            en->name, (unsigned long long)declared, bound,
                            (unsigned long long)max_size);
    if (vet->stream && lim && lim->data)
        return stream_data(ar, en, lim, vet, bound, err);
    if (declared > 0 && (uint64_t)declared > max_total - *total)
        return total_error(en, max_total, err);
    size_t cap = declared > 0 ? (size_t)(declared < (64 << 20) ? declared : (64 << 20)) : 4096;
    char *buf = malloc(cap);
    if (!buf)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory reading entry '%s'", en->name);
    size_t n = 0;
    for (;;) {
        if (n == cap) {
            size_t ncap = cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
            char *nb = ncap > cap ? realloc(buf, ncap) : NULL;
            if (!nb) {
                free(buf);
                return hm_error_set(err, HM_ERR_NOMEM, "out of memory reading entry '%s'",
                                    en->name);
            }
            buf = nb;
            cap = ncap;
        }
        la_ssize_t r = archive_read_data(ar, buf + n, cap - n);
        if (r < 0) {
            free(buf);
            return hm_error_set(err, HM_ERR_FORMAT, "cannot read entry '%s': %s", en->name,
                                archive_error_string(ar) ? archive_error_string(ar) : "corrupt data");
        }
        if (r == 0)
            break;
        n += (size_t)r;
        *total += (uint64_t)r;
        if (n > max_size) {
            free(buf);
            return hm_error_set(err, HM_ERR_INVALID, "entry '%s' holds more bytes than %s (%llu)",
                                en->name, bound, (unsigned long long)max_size);
        }
        if (*total > max_total) {
            free(buf);
            return total_error(en, max_total, err);
        }
    }
    en->data = buf;
    en->size = n;
    return HM_OK;
}

static int cmp_entry(const void *x, const void *y)
{
    return strcmp(((const struct entry *)x)->name, ((const struct entry *)y)->name);
}

/* Sorted entries: no name twice, no file that another entry sits inside. */
static enum hm_status check_names(struct hm_archive *a, struct hm_error *err)
{
    if (a->n > 1)
        qsort(a->e, (size_t)a->n, sizeof *a->e, cmp_entry);
    for (int64_t i = 1; i < a->n; i++)
        if (strcmp(a->e[i].name, a->e[i - 1].name) == 0)
            return hm_error_set(err, HM_ERR_INVALID, "entry '%s' appears twice", a->e[i].name);
    for (int64_t i = 0; i < a->n; i++) {
        if (a->e[i].is_dir)
            continue;
        size_t k = strlen(a->e[i].name);
        /* the first name >= "name/" is the only candidate inside it */
        int64_t lo = i + 1, hi = a->n;
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            int c = strncmp(a->e[mid].name, a->e[i].name, k);
            if (c < 0 || (c == 0 && a->e[mid].name[k] < '/'))
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < a->n && strncmp(a->e[lo].name, a->e[i].name, k) == 0 && a->e[lo].name[k] == '/')
            return hm_error_set(err, HM_ERR_INVALID, "entry '%s' is inside the file '%s'",
                                a->e[lo].name, a->e[i].name);
    }
    return HM_OK;
}

/* Drops folder entries and makes the member views. */
static enum hm_status finish(struct hm_archive *a, struct hm_error *err)
{
    int64_t k = 0;
    for (int64_t i = 0; i < a->n; i++) {
        if (a->e[i].is_dir) {
            free(a->e[i].name);
            free(a->e[i].data);
            continue;
        }
        a->e[k++] = a->e[i];
    }
    a->n = k;
    a->m = calloc((size_t)k + 1, sizeof *a->m);
    if (!a->m)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < k; i++)
        a->m[i] = (struct hm_archive_member){a->e[i].name, a->e[i].data, a->e[i].size};
    return HM_OK;
}

static enum hm_status read_all(struct archive *ar, const struct hm_archive_limits *lim,
                               struct hm_archive *a, struct hm_error *err)
{
    uint64_t max_total = lim && lim->max_total ? lim->max_total : hm_archive_default_max_total();
    int64_t max_entries = lim && lim->max_entries ? lim->max_entries : HM_ARCHIVE_MAX_ENTRIES;
    uint64_t total = 0;
    int64_t seen = 0;
    struct archive_entry *e;
    for (;;) {
        int r = archive_read_next_header(ar, &e);
        if (r == ARCHIVE_EOF)
            break;
        if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
            const char *m = archive_error_string(ar);
            return hm_error_set(err, HM_ERR_FORMAT, "not a readable archive: %s",
                                m ? m : "unknown error");
        }
        const char *raw = archive_entry_pathname_utf8(e);
        if (!raw)
            raw = archive_entry_pathname(e);
        int is_dir = 0;
        char *name = NULL;
        enum hm_status st = check_type(e, raw, &is_dir, err);
        if (st == HM_OK)
            st = clean_name(raw, is_dir, &name, err);
        if (st != HM_OK)
            return st;
        if (!name)
            continue; /* the "./" root entry */
        if (++seen > max_entries) {
            free(name);
            return hm_error_set(err, HM_ERR_UNSUPPORTED, "more than %lld entries",
                                (long long)max_entries);
        }
        if (a->n == a->cap) {
            int64_t nc = a->cap ? a->cap * 2 : 16;
            struct entry *ne = realloc(a->e, sizeof *ne * (size_t)nc);
            if (!ne) {
                free(name);
                return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
            }
            a->e = ne;
            a->cap = nc;
        }
        la_int64_t declared = archive_entry_size_is_set(e) ? archive_entry_size(e) : -1;
        struct hm_archive_vet vet = {0, UINT64_MAX, NULL, 0};
        if (!is_dir && lim && lim->member &&
            (st = lim->member(lim->ctx, name, declared, &vet, err)) != HM_OK) {
            free(name);
            return st;
        }
        if (vet.skip) {
            free(name);
            continue; /* libarchive skips its data on the next header */
        }
        struct entry *en = &a->e[a->n++];
        *en = (struct entry){name, NULL, 0, is_dir};
        if (!is_dir) {
            if ((st = read_data(ar, en, &total, max_total, lim, &vet, declared, err)) != HM_OK)
                return st;
            int streamed = vet.stream && lim->data; /* (vet is only set with lim) */
            if (lim && lim->kept && !streamed &&
                (st = lim->kept(lim->ctx, en->name, en->data ? en->data : "", en->size, err)) !=
                    HM_OK)
                return st;
        }
    }
    return HM_OK;
}

/* A tar is read through two libarchive readers: `raw` undoes the
 * compression (the "raw" format hands out the decompressed stream) and
 * feeds `tar` through pipe_read, which notes where the last nonzero byte
 * of the stream is. Once `tar` reports its end, the rest of the stream is
 * drained: a nonzero byte past the end-of-archive blocks is trailing data. */
struct pipe {
    struct archive *raw;
    uint64_t handed;       /* bytes of the stream handed to tar */
    uint64_t last_nonzero; /* 1 + offset of the last nonzero byte seen */
    uint64_t source_len;   /* bytes of the archive file or buffer */
};

static la_ssize_t pipe_read(struct archive *tar, void *ctx, const void **buf)
{
    struct pipe *p = ctx;
    size_t n = 0;
    la_int64_t off;
    int r = archive_read_data_block(p->raw, buf, &n, &off);
    if (r == ARCHIVE_EOF)
        return 0;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
        const char *m = archive_error_string(p->raw);
        archive_set_error(tar, archive_errno(p->raw), "%s", m ? m : "cannot decompress");
        return -1;
    }
    const unsigned char *b = *buf;
    size_t k = n;
    while (k > 0 && b[k - 1] == 0)
        k--;
    if (k > 0)
        p->last_nonzero = p->handed + k;
    p->handed += n;
    return (la_ssize_t)n;
}

/* After tar's end: drains the stream (zero padding up to
 * HM_ARCHIVE_MAX_PADDING, so that a small compressed input cannot make it
 * inflate without end); trailing bytes are HM_ERR_INVALID. */
static enum hm_status check_trailing(struct archive *tar, struct pipe *p, struct hm_error *err)
{
    const void *buf;
    la_ssize_t r;
    const uint64_t end0 = (uint64_t)archive_filter_bytes(tar, 0);
    while ((r = pipe_read(tar, p, &buf)) > 0)
        if (p->handed - end0 > HM_ARCHIVE_MAX_PADDING)
            return hm_error_set_at(err, HM_ERR_INVALID, (int64_t)end0,
                                   "more than %d bytes follow the end of the tar archive",
                                   HM_ARCHIVE_MAX_PADDING);
    if (r < 0) {
        const char *m = archive_error_string(tar);
        return hm_error_set(err, HM_ERR_FORMAT, "not a readable archive: %s",
                            m ? m : "unknown error");
    }
    uint64_t end = (uint64_t)archive_filter_bytes(tar, 0);
    if (p->last_nonzero > end)
        return hm_error_set_at(err, HM_ERR_INVALID, (int64_t)end,
                               "other data follows the end of the tar archive");
    /* after the compressed stream (gzip stops at what is not a gzip member) */
    la_int64_t used = archive_filter_bytes(p->raw, -1);
    if (used >= 0 && (uint64_t)used < p->source_len)
        return hm_error_set_at(err, HM_ERR_INVALID, used,
                               "other data follows the end of the compressed stream");
    return HM_OK;
}

static int open_source(struct archive *ar, const char *path, const void *buf, size_t len)
{
    return path ? archive_read_open_filename(ar, path, 1 << 16)
                : archive_read_open_memory(ar, buf, len);
}

static enum hm_status open_error(struct archive *ar, const char *path, struct hm_error *err)
{
    int e = archive_errno(ar);
    const char *m = archive_error_string(ar);
    int io = e == ENOENT || e == EACCES || e == EISDIR || e == ENOTDIR || e == ELOOP || e == EIO ||
             e == EPERM || e == ENAMETOOLONG;
    return path && io ? hm_error_set_errno(err, HM_ERR_IO, e, "cannot open")
                      : hm_error_set(err, HM_ERR_FORMAT, "not a readable archive: %s",
                                     m ? m : "unknown format");
}

static int is_zip(const char *path, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    if (path) {
        unsigned char head[4] = {0};
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        ssize_t n = fd >= 0 ? read(fd, head, sizeof head) : -1;
        if (fd >= 0)
            close(fd);
        return n == 4 && hm_archive_sniff(head, 4) && head[0] == 'P';
    }
    return len >= 4 && p[0] == 'P' && p[1] == 'K' && hm_archive_sniff(buf, len);
}

/* A zip ends with its end-of-central-directory record (22 bytes and a
 * comment of the length it gives): bytes after that are HM_ERR_INVALID.
 * tail: [n] the last bytes of the file (up to 22 + 65535), of total len. */
static enum hm_status check_zip_end(const unsigned char *tail, size_t n, uint64_t len,
                                    struct hm_error *err)
{
    for (size_t i = n >= 22 ? n - 22 + 1 : 0; i-- > 0;) {
        if (memcmp(tail + i, "PK\5\6", 4) != 0)
            continue;
        size_t end = i + 22 + (size_t)(tail[i + 20] | tail[i + 21] << 8);
        if (end == n)
            return HM_OK;
        if (end < n) /* a record whose comment ends early: what follows is extra */
            return hm_error_set_at(err, HM_ERR_INVALID, (int64_t)(len - n + end),
                                   "other data follows the end of the zip archive");
    }
    return HM_OK; /* no record: the zip reader says what is wrong */
}

static enum hm_status zip_end(const char *path, const void *buf, size_t len, struct hm_error *err)
{
    enum { TAIL = 22 + 65535 };
    if (!path) {
        size_t n = len < TAIL ? len : TAIL;
        return check_zip_end((const unsigned char *)buf + len - n, n, len, err);
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    unsigned char *tail = malloc(TAIL);
    enum hm_status st = HM_OK;
    if (fd >= 0 && tail && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode)) {
        size_t n = (uint64_t)sb.st_size < TAIL ? (size_t)sb.st_size : TAIL;
        if (pread(fd, tail, n, sb.st_size - (off_t)n) == (ssize_t)n)
            st = check_zip_end(tail, n, (uint64_t)sb.st_size, err);
    }
    free(tail);
    if (fd >= 0)
        close(fd);
    return st;
}

static enum hm_status read_zip(const char *path, const void *buf, size_t len,
                               const struct hm_archive_limits *lim, struct hm_archive *a,
                               struct hm_error *err)
{
    struct archive *ar = archive_read_new();
    if (!ar)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    archive_read_support_format_zip(ar);
    enum hm_status st = open_source(ar, path, buf, len) != ARCHIVE_OK ? open_error(ar, path, err)
                                                                       : read_all(ar, lim, a, err);
    if (st == HM_OK)
        st = zip_end(path, buf, len, err);
    a->format = HM_ARCHIVE_ZIP;
    archive_read_free(ar);
    return st;
}

static enum hm_status read_tar(const char *path, const void *buf, size_t len,
                               const struct hm_archive_limits *lim, struct hm_archive *a,
                               struct hm_error *err)
{
    struct stat sb;
    struct pipe p = {archive_read_new(), 0, 0,
                     path ? (stat(path, &sb) == 0 && S_ISREG(sb.st_mode) ? (uint64_t)sb.st_size : 0)
                          : len};
    struct archive *tar = archive_read_new();
    struct archive_entry *e;
    enum hm_status st = HM_OK;
    if (!p.raw || !tar) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* only the filters bundles use, each only where it decodes in-process
     * (never an external program), and tar itself: no mtree or other
     * reader that would take any text for an archive */
    archive_read_support_format_raw(p.raw);
    hm_archive_support_in_process(p.raw, archive_read_support_filter_gzip);
    hm_archive_support_in_process(p.raw, archive_read_support_filter_xz);
    hm_archive_support_in_process(p.raw, archive_read_support_filter_zstd);
    archive_read_support_format_tar(tar);
    if (open_source(p.raw, path, buf, len) != ARCHIVE_OK) {
        st = open_error(p.raw, path, err);
        goto out;
    }
    if (archive_read_next_header(p.raw, &e) != ARCHIVE_OK) {
        const char *m = archive_error_string(p.raw);
        st = hm_error_set(err, HM_ERR_FORMAT, "not a readable archive: %s", m ? m : "empty");
        goto out;
    }
    switch (archive_filter_code(p.raw, 0)) {
    case ARCHIVE_FILTER_NONE: a->format = HM_ARCHIVE_TAR; break;
    case ARCHIVE_FILTER_GZIP: a->format = HM_ARCHIVE_TAR_GZ; break;
    case ARCHIVE_FILTER_XZ: a->format = HM_ARCHIVE_TAR_XZ; break;
    case ARCHIVE_FILTER_ZSTD: a->format = HM_ARCHIVE_TAR_ZST; break;
    default: a->format = -1;
    }
    if (archive_read_open(tar, &p, NULL, pipe_read, NULL) != ARCHIVE_OK) {
        st = open_error(tar, NULL, err);
        goto out;
    }
    st = read_all(tar, lim, a, err);
    if (st == HM_OK)
        st = check_trailing(tar, &p, err);
out:
    if (tar)
        archive_read_free(tar);
    if (p.raw)
        archive_read_free(p.raw);
    return st;
}

static enum hm_status read_common(const char *path, const void *buf, size_t len,
                                  const struct hm_archive_limits *lim, struct hm_archive **out,
                                  struct hm_error *err)
{
    *out = NULL;
    struct hm_archive *a = calloc(1, sizeof *a);
    if (!a)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    a->format = -1;
    enum hm_status st = is_zip(path, buf, len) ? read_zip(path, buf, len, lim, a, err)
                                               : read_tar(path, buf, len, lim, a, err);
    if (st == HM_OK)
        st = check_names(a, err);
    if (st == HM_OK)
        st = finish(a, err);
    if (st != HM_OK) {
        hm_archive_free(a);
        return st;
    }
    *out = a;
    return HM_OK;
}

enum hm_status hm_archive_read_path(const char *path, const struct hm_archive_limits *lim,
                                    struct hm_archive **out, struct hm_error *err)
{
    return read_common(path, NULL, 0, lim, out, err);
}

enum hm_status hm_archive_read_memory(const void *buf, size_t len,
                                      const struct hm_archive_limits *lim,
                                      struct hm_archive **out, struct hm_error *err)
{
    return read_common(NULL, buf, len, lim, out, err);
}
