/* archive_filters.h — which libarchive decompressions run in-process.
 *
 * libarchive's archive_read_support_filter_X answers ARCHIVE_WARN when it
 * can decode X only by running an external program (lrzip, grzip, lzop,
 * or zstd/lz4 in a libarchive built without their libraries). hm never
 * lets an input's bytes pick a program to run, so its readers register a
 * filter only when it decodes in-process. */
#ifndef HM_ARCHIVE_FILTERS_H
#define HM_ARCHIVE_FILTERS_H

struct archive;

/* 1 when support(a) answers ARCHIVE_OK on a scratch reader: the filter
 * decodes in-process. */
int hm_archive_filter_in_process(int (*support)(struct archive *));

/* Registers support on a only when it decodes in-process; returns 1 if it
 * did. */
int hm_archive_support_in_process(struct archive *a, int (*support)(struct archive *));

#endif
