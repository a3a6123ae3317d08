/* fdcheck.h — the finite-difference harness every backward test shares:
 * central differences of a double function, and max-error checks reported
 * through Criterion with the location of the worst element. */
#ifndef HM_FDCHECK_H
#define HM_FDCHECK_H

#include <stdint.h>

/* Step of the central differences: truncation ~h² ≈ 1e-12 in double. */
#define TU_FD_H 1e-6

typedef double (*tu_scalar_fn)(const double *x, void *ctx);

/* g[n] = (f(x + h e_i) − f(x − h e_i)) / 2h at x[n] (x is restored). */
void tu_fd_grad(double *g, double *x, int64_t n, tu_scalar_fn f, void *ctx);

/* max|got − want| ≤ tol · max(1, max|want|) (NaN counts as the worst),
 * as a Criterion expectation naming `what`; returns the ratio. */
double tu_check_fd(const char *what, const float *got, const double *want, int64_t n,
                   double tol);

/* max|got − want| ≤ rel · max(floor, max|want|); returns the ratio. */
double tu_check_rel(const char *what, const float *got, const float *want, int64_t n,
                    double rel, double floor);

/* x[n] = scale · N(0, 1), rounded to fp32 values (so fp32 kernels and the
 * double reference see the same numbers). */
void tu_rand_fill(double *x, int64_t n, uint64_t *s, double scale);

/* float copy of x[n]. owned: free(). */
float *tu_to_f32(const double *x, int64_t n);

/* Sentinel of the fused buffers below: columns an op must not touch. */
#define TU_SENT -7.25f

/* A fused qkv buffer [T, 3 n_h p] of sentinels with slot (0 q, 1 k, 2 v)
 * holding x: [T, n_h, p] (sentinels only when x is NULL). owned: free(). */
float *tu_fused(const double *x, int64_t T, int64_t n_h, int64_t p, int slot);

/* Gather slot of a fused buffer into out: [T, n_h, p]; 1 if every other
 * column still holds the sentinel. */
int tu_unfuse(float *out, const float *q, int64_t T, int64_t n_h, int64_t p, int slot);

/* Positive features like a Hedgehog map's: per row, two softmaxes of
 * N(0, σ²) over F = F2/2 entries, rounded to fp32.   phi: [rows, F2] */
void tu_rand_phi(double *phi, int64_t rows, int64_t F2, uint64_t *s, double sigma);

#endif
