/* tokenizer_types.c — the growable array of token ids (tokenizer_types.h). */
#include "tokenizer_types.h"

#include <stdlib.h>
#include <string.h>

void hm_ids_release(struct hm_ids *ids)
{
    if (!ids)
        return;
    free(ids->v);
    ids->v = NULL;
    ids->n = ids->cap = 0;
}

enum hm_status hm_ids_reserve(struct hm_ids *ids, int64_t extra, struct hm_error *err)
{
    if (extra < 0 || ids->n > INT64_MAX - extra)
        return hm_error_set(err, HM_ERR_NOMEM, "token array size overflows");
    int64_t need = ids->n + extra;
    if (need <= ids->cap)
        return HM_OK;
    int64_t cap = ids->cap ? ids->cap : 1024;
    while (cap < need) {
        if (cap > INT64_MAX / 2)
            return hm_error_set(err, HM_ERR_NOMEM, "token array size overflows");
        cap *= 2;
    }
    size_t bytes;
    if (hm_mul_size((size_t)cap, sizeof(int32_t), &bytes) != 0)
        return hm_error_set(err, HM_ERR_NOMEM, "token array size overflows");
    int32_t *v = realloc(ids->v, bytes);
    if (!v)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory for %lld token ids",
                            (long long)cap);
    ids->v = v;
    ids->cap = cap;
    return HM_OK;
}

enum hm_status hm_ids_append(struct hm_ids *ids, const int32_t *src, int64_t n,
                             struct hm_error *err)
{
    enum hm_status st = hm_ids_reserve(ids, n, err);
    if (st != HM_OK)
        return st;
    if (n)
        memcpy(ids->v + ids->n, src, (size_t)n * sizeof *src);
    ids->n += n;
    return HM_OK;
}
