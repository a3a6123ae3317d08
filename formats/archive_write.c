/* archive_write.c — deterministic tar/zip writing over libarchive (archive_write.h). */
#include "archive_write.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdlib.h>
#include <string.h>

static const char *const format_names[HM_ARCHIVE_FORMAT_COUNT] = {
    [HM_ARCHIVE_TAR] = "tar",         [HM_ARCHIVE_TAR_GZ] = "tar.gz",
    [HM_ARCHIVE_TAR_XZ] = "tar.xz",   [HM_ARCHIVE_TAR_ZST] = "tar.zst",
    [HM_ARCHIVE_ZIP] = "zip",
};

static const struct {
    const char *suffix;
    enum hm_archive_format f;
} suffixes[] = {
    {".tar", HM_ARCHIVE_TAR},        {".tar.gz", HM_ARCHIVE_TAR_GZ},
    {".tgz", HM_ARCHIVE_TAR_GZ},     {".tar.xz", HM_ARCHIVE_TAR_XZ},
    {".txz", HM_ARCHIVE_TAR_XZ},     {".tar.zst", HM_ARCHIVE_TAR_ZST},
    {".tzst", HM_ARCHIVE_TAR_ZST},   {".zip", HM_ARCHIVE_ZIP},
};

struct hm_archive_writer {
    struct archive *a;
    enum hm_archive_format format;
    int64_t mtime;
    int in_entry;
    uint64_t size, written; /* of the current entry */
};

const char *hm_archive_format_name(enum hm_archive_format f)
{
    return (unsigned)f < HM_ARCHIVE_FORMAT_COUNT ? format_names[f] : NULL;
}

int hm_archive_format_parse(const char *name)
{
    for (int f = 0; f < HM_ARCHIVE_FORMAT_COUNT; f++)
        if (strcmp(name, format_names[f]) == 0)
            return f;
    for (size_t i = 0; i < sizeof suffixes / sizeof *suffixes; i++)
        if (strcmp(name, suffixes[i].suffix + 1) == 0)
            return (int)suffixes[i].f;
    return -1;
}

int hm_archive_format_from_path(const char *path)
{
    size_t n = strlen(path);
    for (size_t i = 0; i < sizeof suffixes / sizeof *suffixes; i++) {
        size_t k = strlen(suffixes[i].suffix);
        if (n > k && strcmp(path + n - k, suffixes[i].suffix) == 0)
            return (int)suffixes[i].f;
    }
    return -1;
}

static enum hm_status la_error(struct archive *a, struct hm_error *err, const char *doing)
{
    const char *m = archive_error_string(a);
    int e = archive_errno(a);
    /* libarchive says only "Write error" when the output fails: add errno's reason */
    if (e > 0 && m && strcmp(m, "Write error") == 0)
        return hm_error_set_errno(err, HM_ERR_IO, e, "%s", doing);
    return hm_error_set(err, HM_ERR_IO, "%s: %s", doing, m ? m : "libarchive error");
}

/* Adds the compressor of format f; refuses one that would run an external program. */
static enum hm_status add_filter(struct archive *a, enum hm_archive_format f,
                                 struct hm_error *err)
{
    int r = ARCHIVE_OK;
    const char *lib = NULL;
    switch (f) {
    case HM_ARCHIVE_TAR_GZ: r = archive_write_add_filter_gzip(a); lib = "zlib"; break;
    case HM_ARCHIVE_TAR_XZ: r = archive_write_add_filter_xz(a); lib = "liblzma"; break;
    case HM_ARCHIVE_TAR_ZST: r = archive_write_add_filter_zstd(a); lib = "libzstd"; break;
    default: return HM_OK;
    }
    if (r == ARCHIVE_WARN)
        return hm_error_set(err, HM_ERR_UNSUPPORTED,
                            "%s needs a libarchive built with %s (this one would run an "
                            "external program)", format_names[f], lib);
    if (r != ARCHIVE_OK)
        return hm_error_set(err, HM_ERR_UNSUPPORTED, "%s is not available in this libarchive: %s",
                            format_names[f], archive_error_string(a));
    /* no wall-clock time in the gzip header; one thread so the output never
     * depends on the machine */
    if (f == HM_ARCHIVE_TAR_GZ && archive_write_set_filter_option(a, "gzip", "timestamp", NULL) !=
                                      ARCHIVE_OK)
        return la_error(a, err, "cannot drop the gzip timestamp");
    if (f == HM_ARCHIVE_TAR_XZ)
        (void)archive_write_set_filter_option(a, "xz", "threads", "1");
    if (f == HM_ARCHIVE_TAR_ZST)
        (void)archive_write_set_filter_option(a, "zstd", "threads", "0");
    return HM_OK;
}

enum hm_status hm_archive_writer_open(FILE *fp, enum hm_archive_format format, int64_t mtime,
                                      struct hm_archive_writer **out, struct hm_error *err)
{
    *out = NULL;
    if ((unsigned)format >= HM_ARCHIVE_FORMAT_COUNT)
        return hm_error_set(err, HM_ERR_INVALID, "unknown archive format %d", (int)format);
    struct hm_archive_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->a = archive_write_new())) {
        free(w);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    }
    w->format = format;
    w->mtime = mtime;
    enum hm_status st = HM_OK;
    if (format == HM_ARCHIVE_ZIP) {
        if (archive_write_set_format_zip(w->a) != ARCHIVE_OK ||
            archive_write_set_format_option(w->a, "zip", "compression", "deflate") != ARCHIVE_OK)
            st = la_error(w->a, err, "cannot set up zip");
    } else if (archive_write_set_format_pax_restricted(w->a) != ARCHIVE_OK) {
        st = la_error(w->a, err, "cannot set up tar");
    } else {
        st = add_filter(w->a, format, err);
    }
    /* no zero padding after a compressed stream or a zip's central directory
     * (plain tar keeps the usual 10240-byte blocks) */
    if (st == HM_OK && format != HM_ARCHIVE_TAR &&
        archive_write_set_bytes_in_last_block(w->a, 1) != ARCHIVE_OK)
        st = la_error(w->a, err, "cannot set up the archive");
    if (st == HM_OK && archive_write_open_FILE(w->a, fp) != ARCHIVE_OK)
        st = la_error(w->a, err, "cannot start the archive");
    if (st != HM_OK) {
        hm_archive_writer_free(w);
        return st;
    }
    *out = w;
    return HM_OK;
}

enum hm_status hm_archive_writer_begin(struct hm_archive_writer *w, const char *name,
                                       uint64_t size, struct hm_error *err)
{
    if (w->in_entry)
        return hm_error_set(err, HM_ERR_INVALID, "entry '%s' started inside another", name);
    if (size > (uint64_t)INT64_MAX)
        return hm_error_set(err, HM_ERR_INVALID, "entry '%s' is too large", name);
    struct archive_entry *e = archive_entry_new();
    if (!e)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    archive_entry_copy_pathname(e, name);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, (la_int64_t)size);
    archive_entry_set_mtime(e, (time_t)w->mtime, 0);
    archive_entry_set_uid(e, 0);
    archive_entry_set_gid(e, 0);
    int r = archive_write_header(w->a, e);
    archive_entry_free(e);
    if (r != ARCHIVE_OK) {
        const char *m = archive_error_string(w->a);
        return hm_error_set(err, HM_ERR_IO, "cannot write the header of '%s': %s", name,
                            m ? m : "libarchive error");
    }
    w->in_entry = 1;
    w->size = size;
    w->written = 0;
    return HM_OK;
}

enum hm_status hm_archive_writer_data(struct hm_archive_writer *w, const void *data, size_t n,
                                      struct hm_error *err)
{
    if (!w->in_entry)
        return hm_error_set(err, HM_ERR_INVALID, "data outside an entry");
    if (n > w->size - w->written)
        return hm_error_set(err, HM_ERR_INVALID, "entry data exceeds its declared %llu bytes",
                            (unsigned long long)w->size);
    const char *p = data;
    while (n > 0) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : n;
        la_ssize_t r = archive_write_data(w->a, p, chunk);
        if (r <= 0)
            return la_error(w->a, err, "cannot write entry data");
        p += r;
        n -= (size_t)r;
        w->written += (uint64_t)r;
    }
    return HM_OK;
}

enum hm_status hm_archive_writer_end(struct hm_archive_writer *w, struct hm_error *err)
{
    if (!w->in_entry)
        return hm_error_set(err, HM_ERR_INVALID, "no entry to end");
    w->in_entry = 0;
    if (w->written != w->size)
        return hm_error_set(err, HM_ERR_INVALID, "entry holds %llu of its declared %llu bytes",
                            (unsigned long long)w->written, (unsigned long long)w->size);
    if (archive_write_finish_entry(w->a) != ARCHIVE_OK)
        return la_error(w->a, err, "cannot finish the entry");
    return HM_OK;
}

enum hm_status hm_archive_writer_add(struct hm_archive_writer *w, const char *name,
                                     const void *data, size_t n, struct hm_error *err)
{
    enum hm_status st = hm_archive_writer_begin(w, name, n, err);
    if (st == HM_OK)
        st = hm_archive_writer_data(w, data, n, err);
    if (st == HM_OK)
        st = hm_archive_writer_end(w, err);
    return st;
}

enum hm_status hm_archive_writer_finish(struct hm_archive_writer *w, struct hm_error *err)
{
    enum hm_status st = HM_OK;
    if (w->in_entry)
        st = hm_error_set(err, HM_ERR_INVALID, "archive finished inside an entry");
    else if (archive_write_close(w->a) != ARCHIVE_OK)
        st = la_error(w->a, err, "cannot finish the archive");
    hm_archive_writer_free(w);
    return st;
}

void hm_archive_writer_free(struct hm_archive_writer *w)
{
    if (!w)
        return;
    archive_write_free(w->a);
    free(w);
}
