#include "hash.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <xxhash.h>

uint64_t hm_xxh3(const void *data, size_t len)
{
    return (uint64_t)XXH3_64bits(data, len);
}

enum hm_status hm_xxh3_file(const char *path, uint64_t *out, struct hm_error *err)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return hm_error_set_errno(err, HM_ERR_IO, errno, "cannot open");
    enum hm_status st = HM_OK;
    XXH3_state_t *s = XXH3_createState();
    unsigned char *buf = malloc(1 << 20);
    if (!s || !buf) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto out;
    }
    XXH3_64bits_reset(s);
    size_t n;
    while ((n = fread(buf, 1, 1 << 20, fp)) > 0)
        XXH3_64bits_update(s, buf, n);
    if (ferror(fp)) {
        st = hm_error_set_errno(err, HM_ERR_IO, errno ? errno : EIO, "read failed");
        goto out;
    }
    *out = (uint64_t)XXH3_64bits_digest(s);
out:
    free(buf);
    if (s)
        XXH3_freeState(s);
    fclose(fp);
    return st;
}

void hm_xxh3_hex(uint64_t h, char buf[17])
{
    snprintf(buf, 17, "%016llx", (unsigned long long)h);
}
