#include "batches.h"

#include <math.h>
#include <stdlib.h>

uint64_t hm_splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double hm_rand_normal(uint64_t *s)
{
    double u1 = ((double)(hm_splitmix64(s) >> 11) + 1.0) * 0x1p-53; /* (0, 1] */
    double u2 = (double)(hm_splitmix64(s) >> 11) * 0x1p-53;
    return sqrt(-2.0 * log(u1)) * cos(2 * M_PI * u2);
}

enum hm_status hm_batcher_init(struct hm_batcher *b, const struct hm_tok_file *tf, int64_t B,
                               int64_t T, enum hm_data_order order, uint64_t seed,
                               struct hm_error *err)
{
    b->tf = tf;
    b->B = B;
    b->T = T;
    b->order = order;
    b->seed = seed;
    b->perm = NULL;
    b->perm_epoch = -1;
    int64_t count = hm_tok_count(tf);
    if (B < 1 || T < 1)
        return hm_error_set(err, HM_ERR_INVALID, "batch and seq_len must be positive");
    if (count < T + 1)
        return hm_error_set(err, HM_ERR_INVALID,
                            "token file holds %lld tokens, fewer than one window of %lld",
                            (long long)count, (long long)(T + 1));
    b->n_windows = (count - 1) / T;
    if (order == HM_ORDER_SHUFFLE) {
        b->perm = malloc(sizeof(int64_t) * (size_t)b->n_windows);
        if (!b->perm)
            return hm_error_set(err, HM_ERR_NOMEM, "out of memory for the shuffle");
    }
    return HM_OK;
}

void hm_batcher_release(struct hm_batcher *b)
{
    if (!b)
        return;
    free(b->perm);
    b->perm = NULL;
}

static void make_perm(struct hm_batcher *b, int64_t epoch)
{
    int64_t n = b->n_windows;
    for (int64_t i = 0; i < n; i++)
        b->perm[i] = i;
    uint64_t s = b->seed ^ ((uint64_t)epoch * 0x9E3779B97F4A7C15ull);
    for (int64_t i = n - 1; i > 0; i--) {
        /* unbiased index in [0, i] by rejection */
        uint64_t bound = (uint64_t)i + 1, lim = UINT64_MAX - UINT64_MAX % bound, r;
        do
            r = hm_splitmix64(&s);
        while (r >= lim);
        int64_t j = (int64_t)(r % bound);
        int64_t t = b->perm[i];
        b->perm[i] = b->perm[j];
        b->perm[j] = t;
    }
    b->perm_epoch = epoch;
}

int64_t hm_batcher_window(struct hm_batcher *b, int64_t step, int64_t row)
{
    int64_t k = step * b->B + row;
    int64_t epoch = k / b->n_windows, q = k % b->n_windows;
    if (b->order == HM_ORDER_SEQUENTIAL)
        return q;
    if (b->perm_epoch != epoch)
        make_perm(b, epoch);
    return b->perm[q];
}

enum hm_status hm_batcher_get(struct hm_batcher *b, int64_t step, int32_t *tokens,
                              struct hm_error *err)
{
    for (int64_t r = 0; r < b->B; r++) {
        int64_t w = hm_batcher_window(b, step, r);
        enum hm_status st = hm_tok_read(b->tf, w * b->T, b->T + 1, tokens + r * (b->T + 1), err);
        if (st != HM_OK)
            return st;
    }
    return HM_OK;
}
