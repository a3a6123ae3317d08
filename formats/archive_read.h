/* archive_read.h — reading a whole archive into memory, safely.
 *
 * Accepted: tar (ustar, pax, GNU) plain or compressed with gzip, xz or
 * zstd, and zip (stored or deflate), by content (libarchive with only these
 * readers enabled). Members are read into memory and nothing is ever
 * written to disk, so reading cannot write outside any target. Every entry
 * is checked before its data is kept; the archive is refused
 * (HM_ERR_INVALID, the message names the entry) when an entry
 *   - has an absolute path, an empty name or component, or a '.' or '..'
 *     component (one leading "./" is accepted and dropped, and the "./"
 *     entry itself is skipped);
 *   - is a symlink, a hard link, a character or block device, a FIFO, a
 *     socket, or a sparse file;
 *   - has the same name as an earlier entry (after dropping "./").
 * Directory entries are checked the same way, then skipped (members are
 * files only; a file "a/b" implies folder "a").
 *
 * A tar ends at its end-of-archive blocks: anything but zero padding after
 * them in the (decompressed) stream is HM_ERR_INVALID, so that no bytes
 * ride along unchecked, and so is padding longer than HM_ARCHIVE_MAX_PADDING
 * (tar pads to its record size, 10240 bytes by default); after a gzip
 * stream, bytes that are no gzip member are HM_ERR_INVALID too, as are
 * bytes after a zip's end-of-central-directory record.
 *
 * Limits (struct hm_archive_limits; zero fields take the defaults below):
 * members are held in memory (unless the caller streams them: vet.stream),
 * so the sum of their sizes is capped (by
 * default at hm_archive_default_max_total(): half the machine's physical
 * memory, at most HM_ARCHIVE_MAX_TOTAL), as are the number of entries and
 * the length of a name. Passing a limit is HM_ERR_UNSUPPORTED. The caller
 * may also vet each member before its data is inflated (limits.member): a
 * size bound of its own, or skip it unread, or refuse the archive. Bytes
 * that do not decode (a corrupt compressed stream, a bad header checksum,
 * truncation) are HM_ERR_FORMAT; I/O errors HM_ERR_IO.
 */
#ifndef HM_ARCHIVE_READ_H
#define HM_ARCHIVE_READ_H

#include <stddef.h>
#include <stdint.h>

#include "archive_write.h" /* enum hm_archive_format */
#include "hm_error.h"

#define HM_ARCHIVE_MAX_TOTAL (64ull << 30) /* bytes of all members together: 64 GiB */
#define HM_ARCHIVE_MAX_ENTRIES 10000
#define HM_ARCHIVE_MAX_NAME 4096
#define HM_ARCHIVE_MAX_PADDING (1 << 20) /* zero bytes after a tar's end */

/* What limits.member decides for a file entry, before its data is read. */
struct hm_archive_vet {
    int skip;          /* 1: leave the member out, its data never inflated */
    uint64_t max_size; /* the most bytes it may hold (preset: no bound but the
                          total cap, which a declared size is held to too); more is
                          HM_ERR_INVALID naming it, found while inflating when
                          the entry declares no size or too small a one */
    const char *bound; /* what sets max_size, for the message ("MANIFEST.json
                          lists"); NULL: "allowed for it". Static storage. */
    int stream;        /* 1 (with limits.data): the data goes to limits.data
                          piece by piece and is not kept (the member's data
                          stays NULL, its size is what was read); the total
                          cap does not count it, max_size still bounds it */
};

struct hm_archive_limits {
    uint64_t max_total;  /* 0: hm_archive_default_max_total() */
    int64_t max_entries; /* 0: HM_ARCHIVE_MAX_ENTRIES */
    /* (optional) asked for every file entry before its data is read: its
     * name (cleaned) and the size its header declares (-1: none). Fills
     * *vet, or returns an error (with err set) that refuses the archive. */
    enum hm_status (*member)(void *ctx, const char *name, int64_t declared,
                             struct hm_archive_vet *vet, struct hm_error *err);
    /* (optional) told every member kept, once its data is read (borrowed
     * for the call); an error refuses the archive. */
    enum hm_status (*kept)(void *ctx, const char *name, const void *data, size_t size,
                           struct hm_error *err);
    /* (optional) a streamed member's data (vet.stream), in order, in pieces
     * of at most 1 MiB (borrowed for the call), then once with data NULL and
     * size 0 at its end; an error refuses the archive. Entries are checked
     * before their data as always, but a name twice or a file holding
     * another entry is only found once the archive is read: the caller
     * trusts nothing it was handed until hm_archive_read_* returns HM_OK. */
    enum hm_status (*data)(void *ctx, const char *name, const void *data, size_t size,
                           struct hm_error *err);
    void *ctx;
};

/* The default cap on the bytes of all members: half the physical memory
 * (sysconf), at most HM_ARCHIVE_MAX_TOTAL; HM_ARCHIVE_MAX_TOTAL when the
 * memory size is unknown. */
uint64_t hm_archive_default_max_total(void);

/* One member. Borrowed from its archive (valid until hm_archive_free). */
struct hm_archive_member {
    const char *name; /* relative, '/'-separated, no "./" prefix */
    const void *data; /* [size] bytes (NULL once taken, or when size is 0) */
    size_t size;
};

struct hm_archive;

/* What the first bytes head: [n] of a file are: 1 for an archive this
 * reader takes (gzip, xz, zstd magic; "PK\3\4" or an empty zip's
 * "PK\5\6"; "ustar" at offset 257), 0 otherwise. 512 bytes suffice. */
int hm_archive_sniff(const void *head, size_t n);
/* Same for a file's first bytes; 0 when it cannot be read. */
int hm_archive_sniff_path(const char *path);

/* Reads every member of the archive at path. lim may be NULL.
 * out: owned, free with hm_archive_free(). */
enum hm_status hm_archive_read_path(const char *path, const struct hm_archive_limits *lim,
                                    struct hm_archive **out, struct hm_error *err);
/* Same from an archive held in memory buf: [len] (borrowed for the call only). */
enum hm_status hm_archive_read_memory(const void *buf, size_t len,
                                      const struct hm_archive_limits *lim,
                                      struct hm_archive **out, struct hm_error *err);

void hm_archive_free(struct hm_archive *a); /* accepts NULL */

/* Members sorted by name (byte order). */
int64_t hm_archive_n_members(const struct hm_archive *a);
const struct hm_archive_member *hm_archive_member_at(const struct hm_archive *a, int64_t i);
/* Index of the member named name, or -1. */
int64_t hm_archive_find(const struct hm_archive *a, const char *name);
/* The format read (an enum hm_archive_format), or -1 for another tar filter. */
int hm_archive_format_of(const struct hm_archive *a);

#endif
