/* batches.h — training batches from a token file (contract §4).
 *
 * A window is seq_len + 1 tokens starting at token w·seq_len (w = 0 ..
 * n_windows − 1, n_windows = (count − 1) / seq_len): seq_len inputs and the
 * seq_len next tokens as targets. Row b of step s takes window slot
 * k = s·B + b; epoch e = k / n_windows, position q = k mod n_windows.
 *   sequential: window q (so step s, row b starts at token (s·B + b)·seq_len
 *               in the first epoch, and wraps around after);
 *   shuffle:    window perm_e[q], where perm_e is a Fisher–Yates permutation
 *               of [0, n_windows) driven by splitmix64 seeded with
 *               seed ⊕ (e · 0x9E3779B97F4A7C15).
 * A batch is a pure function of (file, B, seq_len, order, seed, step): a
 * resumed run needs only the step to continue exactly where it stopped. */
#ifndef HM_BATCHES_H
#define HM_BATCHES_H

#include <stdint.h>
#include "hm_error.h"
#include "tokfile.h"

enum hm_data_order { HM_ORDER_SHUFFLE = 0, HM_ORDER_SEQUENTIAL };

struct hm_batcher {
    const struct hm_tok_file *tf; /* borrowed */
    int64_t B, T;                 /* rows per step, seq_len */
    enum hm_data_order order;
    uint64_t seed;
    int64_t n_windows;
    int64_t perm_epoch;           /* epoch perm holds, or -1 */
    int64_t *perm;                /* [n_windows] (shuffle), owned */
};

/* Fails if the file holds fewer than seq_len + 1 tokens. */
enum hm_status hm_batcher_init(struct hm_batcher *b, const struct hm_tok_file *tf, int64_t B,
                               int64_t T, enum hm_data_order order, uint64_t seed,
                               struct hm_error *err);
void hm_batcher_release(struct hm_batcher *b);

/* Window index used by row `row` of step `step`. */
int64_t hm_batcher_window(struct hm_batcher *b, int64_t step, int64_t row);

/* tokens: [B, T + 1] — the windows of step `step`. */
enum hm_status hm_batcher_get(struct hm_batcher *b, int64_t step, int32_t *tokens,
                              struct hm_error *err);

/* splitmix64 step (shared deterministic RNG for seeds, shuffles, init). */
uint64_t hm_splitmix64(uint64_t *state);

/* A standard normal draw from splitmix64 (Box–Muller on two 53-bit
 * uniforms, one value per call): the same sequence on every machine. */
double hm_rand_normal(uint64_t *state);

#endif
