#include "fdcheck.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "testutil.h"

void tu_fd_grad(double *g, double *x, int64_t n, tu_scalar_fn f, void *ctx)
{
    for (int64_t i = 0; i < n; i++) {
        double x0 = x[i];
        x[i] = x0 + TU_FD_H;
        double fp = f(x, ctx);
        x[i] = x0 - TU_FD_H;
        double fm = f(x, ctx);
        x[i] = x0;
        g[i] = (fp - fm) / (2 * TU_FD_H);
    }
}

double tu_check_fd(const char *what, const float *got, const double *want, int64_t n,
                   double tol)
{
    double mx = 1, err = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++)
        mx = fabs(want[i]) > mx ? fabs(want[i]) : mx;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs(got[i] - want[i]);
        if (!(e <= err)) {
            err = e;
            at = i;
        }
    }
    cr_expect(err <= tol * mx, "%s: max |Δ| %.3g at %lld (got %.9g want %.9g), scale %.3g", what,
              err, (long long)at, n ? got[at] : 0.0, n ? want[at] : 0.0, mx);
    return err / mx;
}

double tu_check_rel(const char *what, const float *got, const float *want, int64_t n,
                    double rel, double floor)
{
    double mx = floor > 1e-30 ? floor : 1e-30, err = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++)
        mx = fabs(want[i]) > mx ? fabs(want[i]) : mx;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        if (!(e <= err)) {
            err = e;
            at = i;
        }
    }
    cr_expect(err <= rel * mx, "%s: max |Δ| %.3g at %lld (got %.9g want %.9g), max|ref| %.3g",
              what, err, (long long)at, n ? got[at] : 0.0f, n ? want[at] : 0.0f, mx);
    return err / mx;
}

void tu_rand_fill(double *x, int64_t n, uint64_t *s, double scale)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(scale * tu_rand_normal(s));
}

float *tu_to_f32(const double *x, int64_t n)
{
    float *f = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        f[i] = (float)x[i];
    return f;
}

float *tu_fused(const double *x, int64_t T, int64_t n_h, int64_t p, int slot)
{
    int64_t ld = 3 * n_h * p;
    float *q = malloc(sizeof(float) * (size_t)(T * ld > 0 ? T * ld : 1));
    for (int64_t i = 0; i < T * ld; i++)
        q[i] = TU_SENT;
    if (x)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < n_h; h++)
                for (int64_t i = 0; i < p; i++)
                    q[t * ld + h * 3 * p + slot * p + i] = (float)x[(t * n_h + h) * p + i];
    return q;
}

int tu_unfuse(float *out, const float *q, int64_t T, int64_t n_h, int64_t p, int slot)
{
    int64_t ld = 3 * n_h * p;
    int ok = 1;
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < ld; c++) {
            int64_t h = c / (3 * p), s = c % (3 * p) / p, i = c % p;
            if (s == slot)
                out[(t * n_h + h) * p + i] = q[t * ld + c];
            else if (q[t * ld + c] != TU_SENT)
                ok = 0;
        }
    return ok;
}

void tu_rand_phi(double *phi, int64_t rows, int64_t F2, uint64_t *s, double sigma)
{
    int64_t F = F2 / 2;
    for (int64_t r = 0; r < rows; r++)
        for (int half = 0; half < 2; half++) {
            double *o = phi + r * F2 + half * F, sum = 0;
            for (int64_t j = 0; j < F; j++) {
                o[j] = exp(sigma * tu_rand_normal(s));
                sum += o[j];
            }
            for (int64_t j = 0; j < F; j++)
                o[j] = (float)(o[j] / sum);
        }
}
