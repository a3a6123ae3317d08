/* test_kernels_cpu.c — the teacher-family ops: ref against a straightforward
 * double computation written here, and every registered backend (fast,
 * checked, a device backend: tests/support/bufs.h, inputs uploaded into its
 * buffers and outputs downloaded) against ref's host result (conventions
 * 13); checked, ref's code, equals ref bit for bit.
 *
 * Inputs are seeded (the seed is in every failure message); shapes are
 * awkward on purpose (1, primes, non-multiples of the 64-row attention
 * block, several blocks). Tolerance: |got − want| ≤ atol + rtol·|want|.
 * Observed max |Δ| on x86-64 (OpenBLAS 0.3.21, 2 threads, AVX-512 clones),
 * worst over all shapes (each check also prints its value on stderr):
 *   matmul      ref vs double 1.8e-6, fast vs ref 9.5e-6 (|y| up to ~60)
 *   layernorm   ref vs double 2.1e-7, fast vs ref 4.8e-7, rstd 6e-8
 *   gelu        ref vs double 2.4e-7, fast vs ref 9.5e-7 (rational erf, |x| to 12)
 *   rotary      ref vs double 4.2e-7, fast vs ref bit-identical (same rounding)
 *   attention   ref vs double 2.3e-7, fast vs ref 3.6e-6, lse 1.4e-6
 *   nll         ref vs double 5.6e-7, fast vs ref 9.5e-7 (V = 50304)
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_impl.h"
#include "bufs.h"
#include "dtype.h"
#include "cpu/cpu_tiles.h"
#include "cpu/cpu_vexp.h"
#include "testutil.h"
#include "threads.h"

static const struct hm_backend *REF, *FAST;

/* "<prefix> <backend> vs ref" for check messages (one static buffer). */
static const char *vs(const char *prefix, const struct hm_backend *be)
{
    static char buf[128];
    snprintf(buf, sizeof buf, "%s %s vs ref", prefix, hm_backend_name(be));
    return buf;
}

static void setup(void)
{
    REF = hm_backend_get("ref");
    FAST = hm_backend_get("fast");
    cr_assert(REF && FAST);
    hm_threads_set(2);
}

static float *randv(int64_t n, double mean, double std, uint64_t *s)
{
    float *v = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)(mean + std * tu_rand_normal(s));
    return v;
}

static float *zeros(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(float)); }

/* Fails unless every |got - want| <= atol + rtol |want|; returns max |Δ|. */
static double check(const char *what, uint64_t seed, const float *got, const double *want,
                    int64_t n, double atol, double rtol)
{
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        if (isnan(got[i]) != isnan(want[i]))
            cr_assert_fail("%s (seed %llu): NaN mismatch at %lld", what, (unsigned long long)seed,
                     (long long)i);
        if (e > worst)
            worst = e;
        if (!(e <= atol + rtol * fabs(want[i])))
            cr_assert_fail("%s (seed %llu): element %lld: got %.9g want %.9g (|d| %.3g)", what,
                     (unsigned long long)seed, (long long)i, got[i], want[i], e);
    }
    fprintf(stderr, "%-36s seed %-4llu n %-8lld max|d| %.2e\n", what, (unsigned long long)seed,
            (long long)n, worst);
    return worst;
}

static double check_f(const char *what, uint64_t seed, const float *got, const float *want,
                      int64_t n, double atol, double rtol)
{
    double *w = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++)
        w[i] = want[i];
    double e = check(what, seed, got, w, n, atol, rtol);
    free(w);
    return e;
}

TestSuite(kernels_cpu, .init = setup);

Test(kernels_cpu, registry)
{
    cr_expect_str_eq(hm_backend_name(hm_backend_get("ref")), "ref");
    cr_expect_str_eq(hm_backend_name(hm_backend_get("fast")), "fast");
    cr_expect_eq(hm_backend_get("cpu"), hm_backend_get("fast"));
    cr_expect_null(hm_backend_get("bogus"));
    cr_expect_null(hm_backend_get(NULL));
    cr_expect_str_eq(hm_backend_name_at(0), "ref");
    cr_expect_str_eq(hm_backend_name_at(1), "fast");
    cr_expect_str_eq(hm_backend_name_at(2), "checked");
    cr_expect_null(hm_backend_name_at(-1));
    int n = 0, absent = 0;
    while (hm_backend_name_at(n)) {
        const struct hm_backend *b;
        struct hm_error e;
        const char *name = hm_backend_name_at(n++);
        enum hm_status st = hm_backend_acquire(name, &b, &e);
        if (st == HM_ERR_UNSUPPORTED) /* a device backend without its device */
            absent++;
        else
            cr_expect_eq(st, HM_OK, "backend '%s' does not open: %s", name, e.msg);
    }
    cr_expect_geq(n, 3);
    cr_expect_null(hm_backend_name_at(n));
    if (!getenv("HM_TEST_BACKENDS"))
        cr_expect_eq(tb_count(), n - absent, "every registered backend that opens is under test");
    cr_expect(hm_backend_supports(FAST, HM_OP_attention_forward, 0));
    cr_expect(!hm_backend_supports(FAST, HM_OP_COUNT, 0));
    struct hm_error err;
    cr_expect_eq(hm_backend_sync(FAST, &err), HM_OK);
}

Test(kernels_cpu, matmul)
{
    /* T ≤ 16 (HM_MATMUL_FEW_ROWS: decoding) and larger (sgemm), with
     * out·in past the threading threshold in both */
    int64_t shapes[][3] = {{1, 1, 1},    {7, 13, 5},    {33, 64, 97}, {130, 67, 259},
                           {2, 301, 3},  {1, 300, 517}, {8, 129, 700}, {16, 256, 300},
                           {17, 256, 300}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (int bias = 0; bias < 2; bias++) {
            int64_t T = shapes[k][0], in = shapes[k][1], out = shapes[k][2];
            uint64_t seed = 100 + k, s = seed;
            float *x = randv(T * in, 0, 1, &s), *w = randv(out * in, 0, 1, &s);
            float *b = bias ? randv(out, 0, 1, &s) : NULL;
            float *yr = zeros(T * out), *yf = zeros(T * out);
            const struct hm_backend *be;
            double *want = malloc(sizeof(double) * (size_t)(T * out));
            for (int64_t t = 0; t < T; t++)
                for (int64_t o = 0; o < out; o++) {
                    double acc = b ? b[o] : 0;
                    for (int64_t i = 0; i < in; i++)
                        acc += (double)x[t * in + i] * w[o * in + i];
                    want[t * out + o] = acc;
                }
            hm_backend_matmul_forward(REF, yr, x, w, b, T, in, out);
            double sc = sqrt((double)in);
            check("matmul ref vs double", seed, yr, want, T * out, 1e-6 * sc, 1e-6);
            TB_EACH(be) {
                float *y = tb_out(be, TB_F(T * out));
                hm_backend_matmul_forward(be, y, tb_in(be, x, TB_F(T * in)),
                                          tb_in(be, w, TB_F(out * in)), tb_in(be, b, TB_F(out)),
                                          T, in, out);
                tb_get(be, yf, y, TB_F(T * out));
                tb_free_all(be);
                check_f(vs("matmul", be), seed, yf, yr, T * out, 2e-6 * sc, 1e-5);
                tb_expect_ref_bits(be, "matmul", yf, yr, TB_F(T * out));
            }
            free(x), free(w), free(b), free(yr), free(yf), free(want);
        }
}

Test(kernels_cpu, layernorm)
{
    int64_t shapes[][2] = {{1, 1}, {5, 7}, {17, 48}, {3, 769}, {64, 512}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int64_t T = shapes[k][0], d = shapes[k][1];
        uint64_t seed = 200 + k, s = seed;
        float *x = randv(T * d, 0.5, 2, &s), *w = randv(d, 1, 0.1, &s), *b = randv(d, 0, 0.1, &s);
        float *yr = zeros(T * d), *yf = zeros(T * d), *mr = zeros(T), *rr = zeros(T);
        float *mf = zeros(T), *rf = zeros(T);
        double *want = malloc(sizeof(double) * (size_t)(T * d));
        float eps = 1e-5f;
        const struct hm_backend *be;
        for (int64_t t = 0; t < T; t++) {
            double m = 0, v = 0;
            for (int64_t i = 0; i < d; i++)
                m += x[t * d + i];
            m /= (double)d;
            for (int64_t i = 0; i < d; i++)
                v += (x[t * d + i] - m) * (x[t * d + i] - m);
            v /= (double)d;
            for (int64_t i = 0; i < d; i++)
                want[t * d + i] = (x[t * d + i] - m) / sqrt(v + eps) * w[i] + b[i];
        }
        hm_backend_layernorm_forward(REF, yr, mr, rr, x, w, b, T, d, eps);
        check("layernorm ref vs double", seed, yr, want, T * d, 1e-6, 1e-6);
        TB_EACH(be) {
            float *y = tb_out(be, TB_F(T * d)), *mb = tb_out(be, TB_F(T)), *rb = tb_out(be, TB_F(T));
            const float *xb = tb_in(be, x, TB_F(T * d)), *wb = tb_in(be, w, TB_F(d));
            const float *bb = tb_in(be, b, TB_F(d));
            hm_backend_layernorm_forward(be, y, mb, rb, xb, wb, bb, T, d, eps);
            tb_get(be, yf, y, TB_F(T * d));
            tb_get(be, mf, mb, TB_F(T));
            tb_get(be, rf, rb, TB_F(T));
            check_f(vs("layernorm", be), seed, yf, yr, T * d, 2e-6, 1e-5);
            check_f(vs("layernorm mean", be), seed, mf, mr, T, 1e-6, 1e-6);
            check_f(vs("layernorm rstd", be), seed, rf, rr, T, 1e-6, 1e-5);
            tb_expect_ref_bits(be, "layernorm y", yf, yr, TB_F(T * d));
            tb_expect_ref_bits(be, "layernorm mean", mf, mr, TB_F(T));
            tb_expect_ref_bits(be, "layernorm rstd", rf, rr, TB_F(T));
            /* in place */
            float *yx = tb_in(be, x, TB_F(T * d));
            hm_backend_layernorm_forward(be, yx, NULL, NULL, yx, wb, bb, T, d, eps);
            tb_get(be, yf, yx, TB_F(T * d));
            tb_free_all(be);
            check_f(vs("layernorm in place", be), seed, yf, yr, T * d, 2e-6, 1e-5);
            tb_expect_ref_bits(be, "layernorm in place", yf, yr, TB_F(T * d));
        }
        free(x), free(w), free(b), free(yr), free(yf), free(mr), free(rr), free(mf), free(rf);
        free(want);
    }
}

Test(kernels_cpu, gelu)
{
    int64_t sizes[] = {1, 1000, 40001};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (int kind = 0; kind < 2; kind++) {
            int64_t n = sizes[k];
            uint64_t seed = 300 + k, s = seed;
            float *x = randv(n, 0, 3, &s), *yr = zeros(n), *yf = zeros(n);
            if (n > 3)
                x[0] = 0, x[1] = -10, x[2] = 10;
            double *want = malloc(sizeof(double) * (size_t)n);
            for (int64_t i = 0; i < n; i++) {
                double v = x[i];
                want[i] = kind == HM_GELU_ERF
                              ? v * 0.5 * erfc(-v / sqrt(2.0))
                              : 0.5 * v * (1 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
            }
            hm_backend_gelu_forward(REF, yr, x, n, kind);
            check("gelu ref vs double", seed, yr, want, n, 1e-7, 1e-6);
            const struct hm_backend *be;
            TB_EACH(be) {
                float *y = tb_out(be, TB_F(n));
                hm_backend_gelu_forward(be, y, tb_in(be, x, TB_F(n)), n, kind);
                tb_get(be, yf, y, TB_F(n));
                tb_free_all(be);
                check_f(vs("gelu", be), seed, yf, yr, n, 1e-6, 1e-5);
                tb_expect_ref_bits(be, "gelu", yf, yr, TB_F(n));
            }
            free(x), free(yr), free(yf), free(want);
        }
}

Test(kernels_cpu, rotary)
{
    /* T, n_h, p, r; T = 1030 exercises fp32 angle rounding at large positions */
    int64_t shapes[][4] = {{1, 1, 2, 2}, {7, 3, 16, 4}, {300, 2, 16, 16}, {1030, 3, 12, 8},
                           {5, 2, 64, 0}, {512, 8, 64, 16}}; /* the last past the threading threshold */
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int64_t T = shapes[k][0], n_h = shapes[k][1], p = shapes[k][2], r = shapes[k][3];
        int64_t d = n_h * p, ld = 3 * d;
        uint64_t seed = 400 + k, s = seed;
        float *x = randv(T * ld, 0, 1, &s), *xr = zeros(T * ld), *xf = zeros(T * ld);
        float inv[64];
        hm_rotary_inv_freq(inv, r, 10000.0);
        for (int64_t j = 0; j < r / 2; j++) /* close to the exact value */
            cr_assert(fabs(inv[j] - pow(10000.0, -2.0 * (double)j / (double)r)) <=
                      3e-7 * pow(10000.0, -2.0 * (double)j / (double)r));
        double *want = malloc(sizeof(double) * (size_t)(T * ld));
        for (int64_t i = 0; i < T * ld; i++)
            want[i] = x[i];
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < n_h; h++)
                for (int64_t s2 = 0; s2 < 2; s2++) { /* q and k, v untouched */
                    int64_t o = t * ld + h * 3 * p + s2 * p;
                    for (int64_t j = 0; j < r / 2; j++) {
                        float th = (float)t * inv[j];
                        double c = (float)cos(th), sn = (float)sin(th);
                        want[o + j] = x[o + j] * c - x[o + j + r / 2] * sn;
                        want[o + j + r / 2] = x[o + j + r / 2] * c + x[o + j] * sn;
                    }
                }
        memcpy(xr, x, sizeof(float) * (size_t)(T * ld));
        hm_backend_rotary_forward(REF, xr, T, n_h, r, ld, 3 * p, 0, inv);
        hm_backend_rotary_forward(REF, xr + p, T, n_h, r, ld, 3 * p, 0, inv);
        check("rotary ref vs double", seed, xr, want, T * ld, 1e-6, 1e-6);
        const struct hm_backend *be;
        TB_EACH(be) {
            float *xb = tb_in(be, x, TB_F(T * ld));
            const float *ib = tb_in(be, inv, TB_F(r / 2));
            hm_backend_rotary_forward(be, xb, T, n_h, r, ld, 3 * p, 0, ib);
            hm_backend_rotary_forward(be, xb + p, T, n_h, r, ld, 3 * p, 0, ib);
            tb_get(be, xf, xb, TB_F(T * ld));
            tb_free_all(be);
            cr_expect(memcmp(xr, xf, sizeof(float) * (size_t)(T * ld)) == 0,
                      "rotary %s vs ref not bit-identical (seed %llu)", hm_backend_name(be),
                      (unsigned long long)seed);
        }
        /* backward (the transpose rotation, on a gradient; positions from 5):
         * every backend bit-identical to ref, and R^T R = I up to rounding */
        memcpy(xr, x, sizeof(float) * (size_t)(T * ld));
        hm_backend_rotary_forward(REF, xr, T, n_h, r, ld, 3 * p, 5, inv);
        hm_backend_rotary_backward(REF, xr, T, n_h, r, ld, 3 * p, 5, inv);
        hm_backend_rotary_backward(REF, xr + p, T, n_h, r, ld, 3 * p, 5, inv);
        TB_EACH(be) {
            float *xb = tb_in(be, x, TB_F(T * ld));
            const float *ib = tb_in(be, inv, TB_F(r / 2));
            hm_backend_rotary_forward(be, xb, T, n_h, r, ld, 3 * p, 5, ib);
            hm_backend_rotary_backward(be, xb, T, n_h, r, ld, 3 * p, 5, ib);
            hm_backend_rotary_backward(be, xb + p, T, n_h, r, ld, 3 * p, 5, ib);
            tb_get(be, xf, xb, TB_F(T * ld));
            tb_free_all(be);
            cr_expect(memcmp(xr, xf, sizeof(float) * (size_t)(T * ld)) == 0,
                      "rotary backward %s vs ref not bit-identical (seed %llu)",
                      hm_backend_name(be), (unsigned long long)seed);
            for (int64_t t = 0; t < T; t++) /* the q part came back to x */
                for (int64_t h = 0; h < n_h; h++)
                    for (int64_t j = 0; j < p; j++) {
                        int64_t o = t * ld + h * 3 * p + j;
                        cr_assert(fabsf(xf[o] - x[o]) <= 1e-6f * (1 + fabsf(x[o])),
                                  "rotary backward of forward (%s) at t %lld",
                                  hm_backend_name(be), (long long)t);
                    }
        }
        free(x), free(xr), free(xf), free(want);
    }
}

Test(kernels_cpu, attention)
{
    /* T = 600: fast runs 256-row blocks (2 full + 1 partial); the 1-thread
     * (halved) workspace below gives smaller blocks */
    int64_t shapes[][3] = {{1, 1, 1}, {7, 3, 16}, {33, 2, 5}, {130, 4, 64}, {65, 1, 8},
                           {200, 3, 24}, {600, 2, 16},
                           /* head dim 256 (Pythia-1B: the CUDA kernel's
                            * > 48 KB shared-memory path), T = 300 and 700 */
                           {300, 2, 256}, {700, 1, 256}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int64_t T = shapes[k][0], n_h = shapes[k][1], p = shapes[k][2], d = n_h * p;
        uint64_t seed = 500 + k, s = seed;
        float *qkv = randv(T * 3 * d, 0, 1.5, &s);
        float *or_ = zeros(T * d), *of = zeros(T * d), *lr = zeros(n_h * T), *lf = zeros(n_h * T);
        double *want = malloc(sizeof(double) * (size_t)(T * d));
        double *wl = malloc(sizeof(double) * (size_t)(n_h * T));
        double *sc = malloc(sizeof(double) * (size_t)T);
        for (int64_t h = 0; h < n_h; h++)
            for (int64_t t = 0; t < T; t++) {
                double mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j <= t; j++) {
                    double a = 0;
                    for (int64_t i = 0; i < p; i++)
                        a += (double)qkv[t * 3 * d + h * 3 * p + i] *
                             qkv[j * 3 * d + h * 3 * p + p + i];
                    sc[j] = a / sqrt((double)p);
                    mx = fmax(mx, sc[j]);
                }
                for (int64_t j = 0; j <= t; j++)
                    sum += exp(sc[j] - mx);
                wl[h * T + t] = mx + log(sum);
                for (int64_t i = 0; i < p; i++) {
                    double a = 0;
                    for (int64_t j = 0; j <= t; j++)
                        a += exp(sc[j] - mx) / sum * qkv[j * 3 * d + h * 3 * p + 2 * p + i];
                    want[t * d + h * p + i] = a;
                }
            }
        size_t wsr = hm_backend_attention_ws_size(REF, T, n_h, p);
        void *ws = malloc(wsr ? wsr : 1);
        hm_backend_attention_forward(REF, or_, lr, qkv, T, n_h, p, ws, wsr);
        check("attention ref vs double", seed, or_, want, T * d, 1e-6, 1e-6);
        check("attention lse ref vs double", seed, lr, wl, T * n_h, 1e-6, 1e-6);
        const struct hm_backend *be;
        TB_EACH(be) {
            size_t wsf = hm_backend_attention_ws_size(be, T, n_h, p);
            void *wb = tb_out(be, wsf);
            const float *qb = tb_in(be, qkv, TB_F(T * 3 * d));
            float *ob = tb_out(be, TB_F(T * d)), *lb = tb_out(be, TB_F(n_h * T));
            hm_backend_attention_forward(be, ob, lb, qb, T, n_h, p, wb, wsf);
            tb_get(be, of, ob, TB_F(T * d));
            tb_get(be, lf, lb, TB_F(n_h * T));
            /* the scores sum p products: rounding grows like sqrt(p)
             * (p = 256: fast vs ref 4.3e-6 observed, T = 700) */
            const double at = 3e-6 * fmax(1.0, sqrt((double)p / 64));
            check_f(vs("attention", be), seed, of, or_, T * d, at, 1e-5);
            check_f(vs("attention lse", be), seed, lf, lr, T * n_h, at, 1e-5);
            tb_expect_ref_bits(be, "attention", of, or_, TB_F(T * d));
            tb_expect_ref_bits(be, "attention lse", lf, lr, TB_F(n_h * T));
            /* a workspace for one thread only still gives the same result */
            float *o1 = tb_out(be, TB_F(T * d));
            hm_backend_attention_forward(be, o1, NULL, qb, T, n_h, p, wb,
                                         wsf / (size_t)hm_threads_get());
            tb_get(be, of, o1, TB_F(T * d));
            tb_free_all(be);
            check_f(vs("attention (1-thread ws)", be), seed, of, or_, T * d, at, 1e-5);
            tb_expect_ref_bits(be, "attention (1-thread ws)", of, or_, TB_F(T * d));
        }
        free(qkv), free(or_), free(of), free(lr), free(lf), free(want), free(wl), free(sc);
        free(ws);
    }
}

Test(kernels_cpu, add_embedding)
{
    int64_t n = 100003;
    uint64_t seed = 600, s = seed;
    float *a = randv(n, 0, 1, &s), *b = randv(n, 0, 1, &s), *yr = zeros(n), *yf = zeros(n);
    hm_backend_add_forward(REF, yr, a, b, n);
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(yr[i], a[i] + b[i]);
    const struct hm_backend *be;
    TB_EACH(be) {
        float *y = tb_out(be, TB_F(n)), *ab = tb_in(be, a, TB_F(n));
        const float *bb = tb_in(be, b, TB_F(n));
        hm_backend_add_forward(be, y, ab, bb, n);
        tb_get(be, yf, y, TB_F(n));
        cr_assert(memcmp(yr, yf, sizeof(float) * (size_t)n) == 0, "add: %s", hm_backend_name(be));
        hm_backend_add_forward(be, ab, ab, bb, n); /* aliasing */
        tb_get(be, yf, ab, TB_F(n));
        tb_free_all(be);
        cr_assert(memcmp(yf, yr, sizeof(float) * (size_t)n) == 0, "add aliased: %s",
                  hm_backend_name(be));
    }

    int64_t V = 97, d = 13, T = 41;
    float *tab = randv(V * d, 0, 1, &s), *er = zeros(T * d), *ef = zeros(T * d);
    int32_t ids[41];
    for (int64_t t = 0; t < T; t++)
        ids[t] = (int32_t)(tu_rand_u64(&s) % (uint64_t)V);
    ids[0] = 0, ids[1] = (int32_t)V - 1;
    hm_backend_embedding_forward(REF, er, ids, tab, T, d);
    for (int64_t t = 0; t < T; t++)
        cr_assert(memcmp(er + t * d, tab + ids[t] * d, sizeof(float) * (size_t)d) == 0);
    TB_EACH(be) {
        float *y = tb_out(be, TB_F(T * d));
        hm_backend_embedding_forward(be, y, tb_in(be, ids, sizeof ids), tb_in(be, tab, TB_F(V * d)),
                                     T, d);
        tb_get(be, ef, y, TB_F(T * d));
        tb_free_all(be);
        cr_assert(memcmp(er, ef, sizeof(float) * (size_t)(T * d)) == 0, "embedding: %s",
                  hm_backend_name(be));
    }
    free(a), free(b), free(yr), free(yf), free(tab), free(er), free(ef);
}

/* widen_rows: every one of the 65536 bf16 and f16 patterns against the
 * checkpoint loader's independent conversion (hm_to_f32), bit for bit (NaN
 * payloads included), as a contiguous widening and as a lookup. */
Test(kernels_cpu, widen_rows)
{
    const int64_t d = 256, rows = 65536 / 256, N = 300;
    uint16_t *x = malloc(sizeof(uint16_t) * 65536);
    float *want = zeros(65536), *got = zeros(65536), *gl = zeros(N * d);
    int32_t ids[300];
    uint64_t s = 77;
    for (int64_t i = 0; i < 65536; i++)
        x[i] = (uint16_t)i;
    for (int64_t i = 0; i < N; i++)
        ids[i] = (int32_t)(tu_rand_u64(&s) % (uint64_t)rows);
    ids[0] = 0, ids[1] = (int32_t)rows - 1;
    const enum hm_dtype dt[2] = {HM_DTYPE_BF16, HM_DTYPE_F16};
    const enum hm_narrow kind[2] = {HM_NARROW_BF16, HM_NARROW_F16};
    for (int k = 0; k < 2; k++) {
        struct hm_error e;
        cr_assert_eq(hm_to_f32(x, dt[k], 65536, want, &e), HM_OK);
        const struct hm_backend *be;
        int ran = 0;
        TB_EACH(be) {
            float *y = tb_out(be, TB_F(65536)), *yl = tb_out(be, TB_F(N * d));
            const uint16_t *xb = tb_in(be, x, sizeof(uint16_t) * 65536);
            hm_backend_widen_rows(be, y, NULL, xb, rows, d, kind[k]);
            hm_backend_widen_rows(be, yl, tb_in(be, ids, sizeof ids), xb, N, d, kind[k]);
            tb_get(be, got, y, TB_F(65536));
            tb_get(be, gl, yl, TB_F(N * d));
            tb_free_all(be);
            cr_assert(memcmp(got, want, sizeof(float) * 65536) == 0, "widen %s: %s",
                      k ? "f16" : "bf16", hm_backend_name(be));
            for (int64_t i = 0; i < N; i++)
                cr_assert(memcmp(gl + i * d, want + (int64_t)ids[i] * d, sizeof(float) * d) == 0,
                          "widen lookup %s row %lld: %s", k ? "f16" : "bf16", (long long)i,
                          hm_backend_name(be));
            ran++;
        }
        cr_assert(ran > 0, "no backend ran widen_rows");
    }
    /* spot values an engineer can check by hand */
    cr_assert_eq(want[0x3c00], 1.0f);       /* f16 1.0 */
    cr_assert_eq(want[0x0001], 0x1p-24f);   /* smallest f16 subnormal */
    cr_assert_eq(want[0xfbff], -65504.0f);  /* f16 lowest */
    free(x), free(want), free(got), free(gl);
}

Test(kernels_cpu, nll)
{
    int64_t shapes[][2] = {{1, 1}, {5, 97}, {9, 50304}, {70, 257}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int64_t T = shapes[k][0], V = shapes[k][1];
        uint64_t seed = 700 + k, s = seed;
        float *lg = randv(T * V, 0, 3, &s), *nr = zeros(T), *nf = zeros(T);
        float *lr = zeros(T), *lf = zeros(T);
        int32_t *tg = malloc(sizeof(int32_t) * (size_t)T);
        double *want = malloc(sizeof(double) * (size_t)T);
        for (int64_t t = 0; t < T; t++) {
            tg[t] = (int32_t)(tu_rand_u64(&s) % (uint64_t)V);
            double sum = 0; /* no max shift: |logits| are small here */
            for (int64_t v = 0; v < V; v++)
                sum += exp((double)lg[t * V + v]);
            want[t] = log(sum) - lg[t * V + tg[t]];
        }
        hm_backend_nll_forward(REF, nr, lr, lg, tg, T, V);
        check("nll ref vs double", seed, nr, want, T, 1e-6, 1e-6);
        const struct hm_backend *be;
        TB_EACH(be) {
            float *nb = tb_out(be, TB_F(T)), *lb = tb_out(be, TB_F(T));
            hm_backend_nll_forward(be, nb, lb, tb_in(be, lg, TB_F(T * V)),
                                   tb_in(be, tg, sizeof(int32_t) * (size_t)T), T, V);
            tb_get(be, nf, nb, TB_F(T));
            tb_get(be, lf, lb, TB_F(T));
            tb_free_all(be);
            check_f(vs("nll", be), seed, nf, nr, T, 1e-5, 1e-6);
            check_f(vs("lse", be), seed, lf, lr, T, 1e-5, 1e-6);
            tb_expect_ref_bits(be, "nll", nf, nr, TB_F(T));
            tb_expect_ref_bits(be, "lse", lf, lr, TB_F(T));
        }
        free(lg), free(nr), free(nf), free(lr), free(lf), free(tg), free(want);
    }
}

/* A backend runs only the members it has: there is no fallback to ref. A
 * missing op is not supported, computes nothing (its output is untouched)
 * and records HM_ERR_BACKEND naming the op, reported (once) by sync; the
 * members it does have run as ref's. */
static struct hm_backend_ops g_partial_ops;
static const struct hm_backend_desc g_partial_desc = {.name = "partial", .ops = &g_partial_ops};

Test(kernels_cpu, missing_members_are_errors)
{
    g_partial_ops.add_forward = hm_backend_desc_ref.ops->add_forward;
    g_partial_ops.attention_ws_size = hm_backend_desc_ref.ops->attention_ws_size;
    hm_backend_register(&g_partial_desc);
    int last = 0;
    while (hm_backend_name_at(last + 1))
        last++;
    cr_expect_str_eq(hm_backend_name_at(last), "partial", "a registered backend is listed last");
    struct hm_backend *be = NULL;
    struct hm_error err;
    cr_assert_eq(hm_backend_open("partial", &be, &err), HM_OK, "%s", err.msg);
    cr_assert_not_null(be);
    cr_expect_str_eq(hm_backend_name(be), "partial");

    /* present members run, as ref's */
    cr_expect(hm_backend_supports(be, HM_OP_add_forward, 0));
    cr_expect(hm_backend_supports(be, HM_OP_attention_ws_size, 0));
    uint64_t s = 800;
    float *x = randv(6 * 5, 0, 1, &s), *w = randv(4 * 5, 0, 1, &s);
    float a1[30], a2[30];
    hm_backend_add_forward(be, a1, x, x, 30);
    hm_backend_add_forward(REF, a2, x, x, 30);
    cr_expect(memcmp(a1, a2, sizeof a1) == 0);
    cr_expect_eq(hm_backend_attention_ws_size(be, 9, 2, 3),
                 hm_backend_attention_ws_size(REF, 9, 2, 3));
    cr_expect_eq(hm_backend_sync(be, &err), HM_OK);

    /* a missing member: not supported, computes nothing, an error naming it */
    cr_expect_eq(hm_backend_supports(be, HM_OP_matmul_forward, 0), 0);
    cr_expect_eq(hm_backend_supports(be, HM_OP_attention_forward, 0), 0);
    float y[24];
    for (int i = 0; i < 24; i++)
        y[i] = 1234.5f;
    hm_backend_matmul_forward(be, y, x, w, NULL, 6, 5, 4);
    for (int i = 0; i < 24; i++)
        cr_expect_eq(y[i], 1234.5f, "output element %d was written", i);
    memset(&err, 0, sizeof err);
    cr_expect_eq(hm_backend_sync(be, &err), HM_ERR_BACKEND);
    cr_expect_not_null(strstr(err.msg, "matmul_forward"), "message: %s", err.msg);
    /* the failure is reported once */
    cr_expect_eq(hm_backend_sync(be, &err), HM_OK);
    /* a missing size query: 0 and the same error */
    cr_expect_eq(hm_backend_linattn_ws_size(be, 9, 2, 4, 3, 0), 0);
    memset(&err, 0, sizeof err);
    cr_expect_eq(hm_backend_sync(be, &err), HM_ERR_BACKEND);
    cr_expect_not_null(strstr(err.msg, "linattn_ws_size"), "message: %s", err.msg);
    hm_backend_close(be);
    free(x), free(w);
}

/* cpu_vexp.h, the fast kernels' exp / erf / GELU tanh, against libm in
 * double over a dense sweep: exp within 2.5e-7 relative (≈ 2 ulp) over the
 * whole normal range, exact 0 below it (−∞ included), +∞ above, NaN kept;
 * erf within 5e-7 absolute (Eigen's approximation, which GELU forward has
 * used since round 1: 4.2e-7 at worst); the GELU tanh within 2e-7 absolute. */
Test(kernels_cpu, vector_exp_erf_tanh)
{
    double worst_e = 0, worst_erf = 0, worst_th = 0;
    for (int64_t i = 0; i <= 2000000; i++) {
        float x = (float)(-87.3 + (88.7 + 87.3) * (double)i / 2000000.0);
        double e = exp((double)x), got = hm_vexpf(x);
        double r = fabs(got - e) / e;
        worst_e = r > worst_e ? r : worst_e;
        float z = (float)(-5.0 + 10.0 * (double)i / 2000000.0);
        double de = fabs((double)hm_verff(z) - erf((double)z));
        worst_erf = de > worst_erf ? de : worst_erf;
        double dt = fabs((double)hm_vtanhf_gelu(z * 2) - tanh((double)z * 2));
        worst_th = dt > worst_th ? dt : worst_th;
    }
    cr_expect(worst_e <= 2.5e-7, "hm_vexpf: worst relative error %.3g", worst_e);
    cr_expect(worst_erf <= 5e-7, "hm_verff: worst absolute error %.3g", worst_erf);
    cr_expect(worst_th <= 2e-7, "hm_vtanhf_gelu: worst absolute error %.3g", worst_th);
    cr_expect(hm_vexpf(-INFINITY) == 0.0f && hm_vexpf(-88.0f) == 0.0f && hm_vexpf(-1000.0f) == 0.0f);
    cr_expect(isinf(hm_vexpf(89.0f)) && isinf(hm_vexpf(INFINITY)));
    cr_expect(isnan(hm_vexpf(NAN)));
    cr_expect(hm_vexpf(0.0f) == 1.0f);
    cr_expect(hm_vtanhf_gelu(40.0f) == 1.0f && hm_vtanhf_gelu(-40.0f) == -1.0f);
    /* the double exp of the KD term: within 2e-15 relative over its range */
    double worst_d = 0;
    for (int64_t i = 0; i <= 2000000; i++) {
        double x = -708.0 + (709.0 - 1e-6 + 708.0) * (double)i / 2000000.0 + 1e-7 * (double)(i % 7);
        double r = fabs(hm_vexp_d(x) - exp(x)) / exp(x);
        worst_d = r > worst_d ? r : worst_d;
    }
    cr_expect(worst_d <= 2e-15, "hm_vexp_d: worst relative error %.3g", worst_d);
    cr_expect(hm_vexp_d(-INFINITY) == 0.0 && hm_vexp_d(-800.0) == 0.0 && hm_vexp_d(0.0) == 1.0);
    cr_expect(isinf(hm_vexp_d(710.0)) && isnan(hm_vexp_d(NAN)));
}

/* cpu_v16.h and its exp: hm_v16_exp_nonpos against libm in double over
 * [−87.3, 0] (16 lanes at a time), 0 below the range and for −∞, NaN kept
 * in its own lane only; the butterfly reductions against plain loops. */
Test(kernels_cpu, v16_exp_and_reductions)
{
    double worst = 0;
    for (int64_t i = 0; i <= 1000000; i += 16) {
        float x[16], y[16];
        for (int l = 0; l < 16; l++)
            x[l] = (float)(-87.3 * (double)(i + l) / 1000015.0);
        hm_v16_store(y, hm_v16_exp_nonpos(hm_v16_load(x)));
        for (int l = 0; l < 16; l++) {
            double e = exp((double)x[l]), r = fabs(y[l] - e) / e;
            worst = r > worst ? r : worst;
        }
    }
    cr_expect(worst <= 2.5e-7, "hm_v16_exp_nonpos: worst relative error %.3g", worst);
    float edge[16] = {-INFINITY, -88.0f, -1000.0f, NAN, 0.0f, -0.0f, -87.0f, -1e-30f};
    float out[16];
    for (int l = 8; l < 16; l++)
        edge[l] = -(float)l;
    hm_v16_store(out, hm_v16_exp_nonpos(hm_v16_load(edge)));
    cr_expect(out[0] == 0.0f && out[1] == 0.0f && out[2] == 0.0f, "underflow gives 0");
    cr_expect(isnan(out[3]) && out[4] == 1.0f && out[5] == 1.0f && out[7] == 1.0f);
    cr_expect(fabs(out[6] - exp(-87.0)) / exp(-87.0) < 1e-6);
    for (int l = 8; l < 16; l++)
        cr_expect(fabs(out[l] - exp(-(double)l)) / exp(-(double)l) < 2.5e-7, "lane %d", l);
    uint64_t s = 901;
    for (int rep = 0; rep < 100; rep++) {
        float v[16], mx = -INFINITY, mn = INFINITY;
        double sum = 0;
        for (int l = 0; l < 16; l++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            v[l] = (float)((double)(s >> 40) / (double)(1ull << 24) - 0.5) * 100.0f;
            mx = v[l] > mx ? v[l] : mx;
            mn = v[l] < mn ? v[l] : mn;
            sum += v[l];
        }
        const hm_v16 vv = hm_v16_load(v);
        cr_expect(hm_v16_hmax(vv) == mx && hm_v16_hmin(vv) == mn);
        cr_expect(fabs(hm_v16_hsum(vv) - sum) <= 1e-4 * 100 * 16, "hsum %g vs %g",
                  hm_v16_hsum(vv), sum);
    }
    hm_v16 r[16];
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            r[i][j] = (float)(100 * i + j);
    hm_v16_transpose(r);
    int bad = 0;
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            bad += r[i][j] != (float)(100 * j + i);
    cr_expect(bad == 0, "hm_v16_transpose: %d elements misplaced", bad);
}

/* cpu_tiles.h's hm_tile_gemm_tri: for each promise of zeros (a causal
 * block's masked side: A lower, A read transposed upper, B lower), on
 * square and ragged shapes, both layouts of A, = and +=, the column tails
 * (16-wide tiles, a packed tail, the narrow 1–2 column tail) and K past one
 * packed block (256): bit for bit hm_tile_gemm's full product, and within
 * 1e-6·K + 1e-5 relative of a plain double loop. */
Test(kernels_cpu, tile_gemm_triangular)
{
    static const int64_t shapes[][3] = {{64, 64, 64},  {64, 65, 64},  {61, 128, 61},
                                        {5, 17, 5},    {17, 2, 17},   {64, 1, 64},
                                        {33, 48, 40},  {40, 33, 33},  {300, 17, 300},
                                        {260, 64, 260}};
    uint64_t s = 77;
    int checked = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int tri = HM_TILE_A_LOWER; tri <= HM_TILE_B_LOWER; tri++)
            for (int trans = 0; trans < 2; trans++)
                for (int acc = 0; acc < 2; acc++) {
                    const int64_t M = shapes[si][0], N = shapes[si][1], K = shapes[si][2];
                    const int64_t ars = trans ? 1 : K, acs = trans ? M : 1;
                    float *A = randv(M * K, 0, 1, &s), *B = randv(K * N, 0, 1, &s);
                    for (int64_t i = 0; i < M; i++)
                        for (int64_t k = 0; k < K; k++)
                            if ((tri == HM_TILE_A_LOWER && k > i) ||
                                (tri == HM_TILE_A_UPPER && k < i))
                                A[i * ars + k * acs] = 0;
                    if (tri == HM_TILE_B_LOWER)
                        for (int64_t k = 0; k < K; k++)
                            for (int64_t j = k + 1; j < N; j++)
                                B[k * N + j] = 0;
                    float *full = randv(M * N, 0, 1, &s);
                    float *got = malloc(sizeof(float) * (size_t)(M * N));
                    double *want = malloc(sizeof(double) * (size_t)(M * N));
                    memcpy(got, full, sizeof(float) * (size_t)(M * N));
                    for (int64_t i = 0; i < M; i++)
                        for (int64_t j = 0; j < N; j++) {
                            double w = acc ? full[i * N + j] : 0;
                            for (int64_t k = 0; k < K; k++)
                                w += (double)A[i * ars + k * acs] * B[k * N + j];
                            want[i * N + j] = w;
                        }
                    hm_tile_gemm(full, N, A, ars, acs, B, N, M, N, K, acc);
                    hm_tile_gemm_tri(got, N, A, ars, acs, B, N, M, N, K, acc,
                                     (enum hm_tile_tri)tri);
                    cr_expect(!memcmp(full, got, sizeof(float) * (size_t)(M * N)),
                              "tri %d, %lld x %lld x %lld, trans %d, acc %d: not the full "
                              "product", tri, (long long)M, (long long)N, (long long)K, trans,
                              acc);
                    check("tile_gemm_tri", (uint64_t)si, got, want, M * N, 1e-6 * (double)K, 1e-5);
                    checked++;
                    free(A);
                    free(B);
                    free(full);
                    free(got);
                    free(want);
                }
    cr_expect(checked == 10 * 3 * 2 * 2);
}
