/* tokenizer_types.h — the tokenizer's value types, shared by its API
 * (tokenizer.h) and its private layout (tokenizer_internal.h): the kinds and
 * the growable array of token ids (its functions in tokenizer_types.c).
 * Callers include tokenizer.h, which includes this; it is apart so that
 * tokenizer_internal.h needs no tokenizer.h. */
#ifndef HM_TOKENIZER_TYPES_H
#define HM_TOKENIZER_TYPES_H

#include <stdint.h>

#include "hm_error.h"

enum hm_tokenizer_kind {
    HM_TOKENIZER_KIND_HF_BPE = 0, /* HuggingFace tokenizer.json */
    HM_TOKENIZER_KIND_BYTES,      /* hm_tokenizer_bytes() */
    HM_TOKENIZER_KIND_LLAMA2C,    /* llama2.c tokenizer.bin */
};

/* A growable array of token ids: v: [n] valid of [cap] allocated.
 * Zero-initialize ({0}); the caller owns v: free with hm_ids_release(). */
struct hm_ids {
    int32_t *v;
    int64_t n, cap;
};

void hm_ids_release(struct hm_ids *ids); /* frees v and zeroes the struct; NULL ok */
/* Makes room for extra more ids (HM_ERR_NOMEM on failure). */
enum hm_status hm_ids_reserve(struct hm_ids *ids, int64_t extra, struct hm_error *err);
/* Appends src: [n]. */
enum hm_status hm_ids_append(struct hm_ids *ids, const int32_t *src, int64_t n,
                             struct hm_error *err);

#endif
