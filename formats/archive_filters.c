/* archive_filters.c — in-process decompressions only (archive_filters.h). */
#include "archive_filters.h"

#include <archive.h>

int hm_archive_filter_in_process(int (*support)(struct archive *))
{
    struct archive *s = archive_read_new();
    const int ok = s && support(s) == ARCHIVE_OK;
    if (s)
        archive_read_free(s);
    return ok;
}

int hm_archive_support_in_process(struct archive *a, int (*support)(struct archive *))
{
    if (!hm_archive_filter_in_process(support))
        return 0;
    return support(a) == ARCHIVE_OK;
}
