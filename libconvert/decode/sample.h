/* sample.h — choosing the next token from a logits vector (contract §8), the
 * sampler of hm-generate. Reproducible bit for bit: the same logits, the
 * same parameters and the same seed give the same token on every run (the
 * arithmetic is double precision, in the fixed order written below; exp()
 * is the C library's, so a different libm may in principle round the last
 * bit differently).
 *
 * The algorithm, exactly (V = vocabulary size, l = the float logits):
 *
 *   0. Every l_i must be finite or −inf (NaN and +inf: HM_ERR_NUMERIC).
 *   1. temperature T = 0: greedy. The token is argmax_i l_i, the lowest id on
 *      ties. No random number is drawn.
 *   2. T > 0: z_i = (double)l_i / T, m = max_i z_i, w_i = exp(z_i − m)
 *      (unnormalized probabilities, in double).
 *   3. The order ≺: larger logit first, the lower id first on ties (w is
 *      monotone in l, so ≺ also orders w, descending).
 *   4. top-k (1 ≤ K < V): keep the first K tokens in ≺; K = 0 (or K ≥ V)
 *      keeps all V.
 *   5. top-p (0 < P < 1): W_k = the sum of w_i over the kept tokens in
 *      ascending id order. Walk the kept tokens in ≺ order adding c += w_i,
 *      and keep them up to and including the first at which c ≥ P·W_k (the
 *      smallest set of most probable tokens whose mass reaches P). P = 1
 *      keeps all.
 *   6. Renormalize: W = the sum of w_i over the final kept set in ascending
 *      id order; token i has probability w_i / W if kept, else 0
 *      (hm_sampler_probs returns exactly this vector).
 *   7. Draw: x = splitmix64(&state) (below), u = (x >> 11) · 2^−53, a
 *      uniform double in [0, 1) with 53 random bits; t = u·W. Walk the kept
 *      tokens in ascending id order adding c += w_i; the token is the first
 *      one with c > t (the highest kept id if rounding leaves none).
 *      Exactly one random number is drawn per sampled token.
 *
 * splitmix64 (Steele, Lea, Flood 2014; Vigna's reference code): the state is
 * a uint64 set to the seed; each call does
 *     state += 0x9E3779B97F4A7C15;  z = state;
 *     z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
 *     z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
 *     return z ^ (z >> 31);
 * (all arithmetic modulo 2^64).
 *
 * Threads: a struct hm_sampler is used by one thread at a time.
 */
#ifndef HM_SAMPLE_H
#define HM_SAMPLE_H

#include <stdint.h>

#include "hm_error.h"

struct hm_sample_params {
    double temperature; /* T ≥ 0; 0 = greedy */
    int64_t top_k;      /* K ≥ 0; 0 = off */
    double top_p;       /* 0 < P ≤ 1; 1 = off */
};

/* The accepted ranges, in one place: hm_sampler_new and hm-generate's
 * option parsing (bad usage, exit 2) both check with
 * hm_sample_params_check. */
#define HM_SAMPLE_TEMPERATURE_MIN 1e-30 /* besides 0 = greedy */
#define HM_SAMPLE_TEMPERATURE_MAX 1e30
#define HM_SAMPLE_TOP_K_MAX INT32_MAX   /* 0 = off */
/* top-p: (0, 1] */

/* HM_OK, or HM_ERR_INVALID with a message naming the value and its range. */
enum hm_status hm_sample_params_check(const struct hm_sample_params *p, struct hm_error *err);

struct hm_sampler;

/* A sampler over vocabularies of V tokens with parameters p (copied) and
 * the generator seeded with seed. Bad parameters give HM_ERR_INVALID with a
 * message naming the value. out: owned, free with hm_sampler_free(). */
enum hm_status hm_sampler_new(int64_t V, const struct hm_sample_params *p, uint64_t seed,
                              struct hm_sampler **out, struct hm_error *err);
void hm_sampler_free(struct hm_sampler *s); /* accepts NULL */

/* Draws the next token from logits: [V] (steps 0–7 above) into *token. */
enum hm_status hm_sampler_sample(struct hm_sampler *s, const float *logits, int32_t *token,
                                 struct hm_error *err);

/* The distribution step 6 gives for logits: [V], into probs: [V] (T = 0:
 * one-hot at the argmax). Draws nothing; the generator is untouched. */
enum hm_status hm_sampler_probs(struct hm_sampler *s, const float *logits, double *probs,
                                struct hm_error *err);

/* The generator's state (to resume a run, or to check it in tests). */
uint64_t hm_sampler_rng_state(const struct hm_sampler *s);

/* argmax of x: [n] (n ≥ 1), the lowest index on ties; NaN entries never win. */
int32_t hm_sample_argmax(const float *x, int64_t n);

/* The 53-bit uniform (hm_splitmix64(state) >> 11) · 2^−53 in [0, 1); the
 * generator is batches.h's hm_splitmix64, the one above. */
double hm_uniform53(uint64_t *state);

#endif
