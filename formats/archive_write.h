/* archive_write.h — deterministic archives written with libarchive.
 *
 * Formats: tar (POSIX pax, restricted: plain ustar headers unless a field
 * does not fit), tar.gz, tar.xz, tar.zst and zip (deflate). Every entry is
 * a regular file with mode 0644, uid/gid 0, no user/group names, mtime as
 * given (nanoseconds 0), no atime/ctime/birthtime, no extended attributes
 * or ACLs; the caller adds entries in the order it wants them stored. The
 * compressors run single-threaded with their default levels and the gzip
 * header holds no timestamp or file name, so the same entries give the same
 * bytes on every run. (zip stores a DOS time computed in the local time
 * zone: callers that want the same bytes in every zone set TZ=UTC.)
 *
 * A filter that this libarchive can only run through an external program
 * (built without zlib, liblzma or libzstd) is refused with
 * HM_ERR_UNSUPPORTED naming the format.
 */
#ifndef HM_ARCHIVE_WRITE_H
#define HM_ARCHIVE_WRITE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hm_error.h"

enum hm_archive_format {
    HM_ARCHIVE_TAR = 0,
    HM_ARCHIVE_TAR_GZ,
    HM_ARCHIVE_TAR_XZ,
    HM_ARCHIVE_TAR_ZST,
    HM_ARCHIVE_ZIP,
    HM_ARCHIVE_FORMAT_COUNT
};

/* "tar", "tar.gz", "tar.xz", "tar.zst", "zip"; NULL when out of range. */
const char *hm_archive_format_name(enum hm_archive_format f);
/* The inverse of hm_archive_format_name (also "tgz", "txz", "tzst"); -1 if unknown. */
int hm_archive_format_parse(const char *name);
/* The format a file name's suffix names (.tar .tar.gz .tgz .tar.xz .txz
 * .tar.zst .tzst .zip), or -1 when it names none. */
int hm_archive_format_from_path(const char *path);

struct hm_archive_writer;

/* Starts an archive written to fp (borrowed; the caller closes it after
 * hm_archive_writer_finish). out: owned, release with finish or free. */
enum hm_status hm_archive_writer_open(FILE *fp, enum hm_archive_format format, int64_t mtime,
                                      struct hm_archive_writer **out, struct hm_error *err);

/* Starts the regular file `name` ('/'-separated, relative) of exactly size bytes. */
enum hm_status hm_archive_writer_begin(struct hm_archive_writer *w, const char *name,
                                       uint64_t size, struct hm_error *err);
/* Appends data: [n] to the current entry; more than its size is an error. */
enum hm_status hm_archive_writer_data(struct hm_archive_writer *w, const void *data, size_t n,
                                      struct hm_error *err);
/* Ends the current entry; fewer bytes than its size is an error. */
enum hm_status hm_archive_writer_end(struct hm_archive_writer *w, struct hm_error *err);

/* begin + data + end for a whole buffer data: [n]. */
enum hm_status hm_archive_writer_add(struct hm_archive_writer *w, const char *name,
                                     const void *data, size_t n, struct hm_error *err);

/* Writes the archive's trailer and flushes into fp. Frees w in all cases. */
enum hm_status hm_archive_writer_finish(struct hm_archive_writer *w, struct hm_error *err);

/* Drops w without finishing (the stream then holds a partial archive). NULL ok. */
void hm_archive_writer_free(struct hm_archive_writer *w);

#endif
