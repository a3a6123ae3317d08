/* test_kernels_train.c — the training and utility ops of kernels/backend.h
 * against straightforward double computations written here, on every
 * registered backend (ref, fast, checked, a device backend;
 * tests/support/bufs.h: inputs uploaded into its buffers, outputs and
 * scalar results downloaded), elementwise bit-identical to ref:
 *  - AdamW and SGD updates against the contract §4 formulas in double;
 *  - sqnorm against a double sum, first_nonfinite on NaN/Inf placements;
 *  - the KD term at temperatures 1, 2 and 0.5: its value against a double
 *    τ²·KL, its gradient against central finite differences of that double
 *    τ²·KL in the student logits;
 *  - fill, copy2d, clamp against loops; the memory interface round trip. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "bufs.h"
#include "fdcheck.h"
#include "testutil.h"

Test(kernels_train, adamw_and_sgd_follow_the_formulas)
{
    const int64_t sizes[] = {1, 7, 1000, 70001};
    for (size_t si = 0; si < 4; si++) {
        const int64_t n = sizes[si];
        uint64_t s = 5 + si;
        double *w0 = malloc(8 * n), *g0 = malloc(8 * n), *m0 = malloc(8 * n), *v0 = malloc(8 * n);
        tu_rand_fill(w0, n, &s, 1);
        tu_rand_fill(g0, n, &s, 0.1);
        tu_rand_fill(m0, n, &s, 0.01);
        for (int64_t i = 0; i < n; i++)
            v0[i] = (float)(fabs(tu_rand_normal(&s)) * 1e-3);
        const struct hm_adamw_args a = {.scale = 0.75f, .decay = 0.999f, .beta1 = 0.9f,
                                        .beta2 = 0.95f, .eps = 1e-8f, .step_size = 1e-2f,
                                        .bc2_sqrt = 0.3f};
        float *out[2][4];
        for (int k = 0; k < 2; k++) {
            out[k][0] = tu_to_f32(w0, n), out[k][1] = tu_to_f32(g0, n);
            out[k][2] = tu_to_f32(m0, n), out[k][3] = tu_to_f32(v0, n);
        }
        hm_backend_adamw_step(hm_backend_get("ref"), out[0][0], out[0][1], out[0][2], out[0][3],
                              n, &a); /* ref on host arrays */
        double *want = malloc(8 * n);
        for (int64_t i = 0; i < n; i++) {
            double g = g0[i] * 0.75, m = 0.9 * m0[i] + 0.1 * g, v = 0.95 * v0[i] + 0.05 * g * g;
            want[i] = w0[i] * 0.999 - 1e-2 * m / (sqrt(v) / 0.3 + 1e-8);
        }
        tu_check_fd("adamw w vs double", out[0][0], want, n, 2e-6);
        for (int64_t i = 0; i < n; i++) /* g is read, not written */
            cr_assert_eq(out[0][1][i], (float)g0[i], "adamw changed g at %lld", (long long)i);
        const struct hm_backend *be;
        TB_EACH(be) {
            float *b[4];
            for (int j = 0; j < 4; j++) { /* in place: w, m, v updated, g read */
                float *h = tu_to_f32(j == 0 ? w0 : j == 1 ? g0 : j == 2 ? m0 : v0, n);
                b[j] = tb_in(be, h, TB_F(n));
                free(h);
            }
            hm_backend_adamw_step(be, b[0], b[1], b[2], b[3], n, &a);
            for (int j = 0; j < 4; j++)
                tb_get(be, out[1][j], b[j], TB_F(n));
            tb_free_all(be);
            for (int j = 0; j < 4; j++)
                cr_assert(memcmp(out[0][j], out[1][j], 4 * (size_t)n) == 0, "adamw %s != ref",
                          hm_backend_name(be));
        }
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < 4; j++)
                free(out[k][j]);
        TB_EACH(be) {
            float *w = tu_to_f32(w0, n), *g = tu_to_f32(g0, n);
            float *wb = tb_in(be, w, TB_F(n)), *gb = tb_in(be, g, TB_F(n));
            hm_backend_sgd_step(be, wb, gb, n, 0.5f);
            tb_get(be, w, wb, TB_F(n));
            for (int64_t i = 0; i < n; i++)
                cr_assert_eq(w[i], (float)w0[i] - 0.5f * (float)g0[i], "%s: sgd at %lld",
                             hm_backend_name(be), (long long)i);
            double ss = 0, want_ss = 0;
            double *acc = tb_in(be, &ss, sizeof ss); /* the scalar result: backend memory */
            hm_backend_sqnorm(be, acc, gb, n);
            tb_get(be, &ss, acc, sizeof ss);
            tb_free_all(be);
            for (int64_t i = 0; i < n; i++)
                want_ss += g0[i] * g0[i];
            cr_assert(fabs(ss - want_ss) <= 1e-12 * want_ss, "%s: sqnorm %.17g vs %.17g",
                      hm_backend_name(be), ss, want_ss);
            free(w), free(g);
        }
        free(w0), free(g0), free(m0), free(v0), free(want);
    }
}

/* first_nonfinite's index of the buffer xb (written over a sentinel it
 * must replace; the index is a backend buffer, downloaded). */
static int64_t first_nonfinite(const struct hm_backend *be, const float *xb, int64_t n)
{
    int64_t index = -7;
    int64_t *ib = tb_in(be, &index, sizeof index);
    hm_backend_first_nonfinite(be, ib, xb, n);
    tb_get(be, &index, ib, sizeof index);
    return index;
}

Test(kernels_train, first_nonfinite_fill_copy2d_clamp)
{
    const struct hm_backend *be;
    float x[50];
    TB_EACH(be) {
        float *xb = tb_out(be, sizeof x);
        hm_backend_fill(be, xb, 50, 2.5f);
        tb_get(be, x, xb, sizeof x);
        for (int i = 0; i < 50; i++)
            cr_assert_eq(x[i], 2.5f, "%s", hm_backend_name(be));
        cr_assert_eq(first_nonfinite(be, xb, 50), -1);
        const float nan = NAN, inf = INFINITY, zero = 0;
        hm_backend_upload(be, xb + 31, &nan, sizeof nan);
        hm_backend_upload(be, xb + 40, &inf, sizeof inf);
        cr_assert_eq(first_nonfinite(be, xb, 50), 31);
        hm_backend_upload(be, xb + 31, &zero, sizeof zero);
        cr_assert_eq(first_nonfinite(be, xb, 50), 40);
        hm_backend_fill(be, xb, 50, 0.0f);
        tb_get(be, x, xb, sizeof x);
        for (int i = 0; i < 50; i++)
            cr_assert(x[i] == 0.0f && !signbit(x[i]));
        float src[6 * 7], dst[5 * 4];
        for (int i = 0; i < 42; i++)
            src[i] = (float)i;
        float *db = tb_out(be, sizeof dst);
        const float *sb = tb_in(be, src, sizeof src);
        hm_backend_fill(be, db, 20, -1.0f);
        hm_backend_copy2d(be, db, 4, sb + 2, 7, 5, 3);
        tb_get(be, dst, db, sizeof dst);
        for (int r = 0; r < 5; r++)
            for (int c = 0; c < 4; c++)
                cr_assert_eq(dst[r * 4 + c], c < 3 ? src[r * 7 + 2 + c] : -1.0f);
        float y[5] = {-2, -0.5f, 0, 0.5f, 3};
        float *yb = tb_in(be, y, sizeof y);
        hm_backend_clamp(be, yb, 5, -1.0f, 0.0f);
        tb_get(be, y, yb, sizeof y);
        tb_free_all(be);
        const float want[5] = {-1, -0.5f, 0, 0, 0};
        cr_assert(memcmp(y, want, sizeof y) == 0, "%s: clamp", hm_backend_name(be));
    }
}

struct klc { const double *lt; int64_t V; double tau; };

/* τ²·KL(p_t ‖ p_s) of one row, p = softmax(l/τ), straightforwardly in double:
 * p_v = exp(l_v/τ − max) / Σ exp(l/τ − max), KL = Σ p_t log(p_t / p_s). */
static double d_kl(const double *ls, void *ctx)
{
    const struct klc *c = ctx;
    const int64_t V = c->V;
    double ms = -INFINITY, mt = -INFINITY, ss = 0, st = 0, kl = 0;
    for (int64_t v = 0; v < V; v++)
        ms = fmax(ms, ls[v] / c->tau), mt = fmax(mt, c->lt[v] / c->tau);
    for (int64_t v = 0; v < V; v++)
        ss += exp(ls[v] / c->tau - ms), st += exp(c->lt[v] / c->tau - mt);
    for (int64_t v = 0; v < V; v++) {
        double ps = exp(ls[v] / c->tau - ms) / ss, pt = exp(c->lt[v] / c->tau - mt) / st;
        kl += pt * log(pt / ps);
    }
    return c->tau * c->tau * kl;
}

/* The KD term at temperatures 1 (the plain KL of contract §3), 2 and 0.5
 * (§10): the value against d_kl, the gradient (w·scale·τ·(p_s − p_t)) against
 * central differences of w·scale·d_kl, on every backend. */
Test(kernels_train, kl_value_and_gradient)
{
    const int64_t T = 5, V = 301;
    uint64_t s = 77;
    double *ls = malloc(8 * T * V), *lt = malloc(8 * T * V);
    tu_rand_fill(ls, T * V, &s, 3);
    tu_rand_fill(lt, T * V, &s, 3);
    float *lsf = tu_to_f32(ls, T * V), *ltf = tu_to_f32(lt, T * V);
    const double w = 0.7, scale = 0.25, taus[] = {1, 2, 0.5};
    for (int k = 0; k < 3; k++) {
        const double tau = taus[k];
        char key_l[32], key_g[32];
        snprintf(key_l, sizeof key_l, "kl loss tau %g", tau);
        snprintf(key_g, sizeof key_g, "kl gradient tau %g", tau);
        const struct hm_backend *be;
        TB_EACH(be) {
            float *g = calloc((size_t)(T * V), 4);
            for (int64_t i = 0; i < T * V; i++)
                g[i] = 0.125f; /* += contract */
            double kl = 0;
            double *klb = tb_in(be, &kl, sizeof kl); /* the loss: backend memory */
            float *gb = tb_in(be, g, TB_F(T * V));
            hm_backend_kl_backward(be, klb, gb, tb_in(be, lsf, TB_F(T * V)),
                                   tb_in(be, ltf, TB_F(T * V)), T, V, w, scale, tau);
            tb_get(be, &kl, klb, sizeof kl);
            tb_get(be, g, gb, TB_F(T * V));
            tb_free_all(be);
            tb_keep(be, key_l, &kl, sizeof kl);
            tb_keep(be, key_g, g, TB_F(T * V));
            double want = 0;
            double *fd = malloc(8 * T * V);
            for (int64_t t = 0; t < T; t++) {
                struct klc c = {lt + t * V, V, tau};
                want += d_kl(ls + t * V, &c);
                tu_fd_grad(fd + t * V, ls + t * V, V, d_kl, &c);
            }
            cr_assert(fabs(kl - want) <= 1e-9 * fabs(want), "%s: tau %g: kl %.12g vs %.12g",
                      hm_backend_name(be), tau, kl, want);
            for (int64_t i = 0; i < T * V; i++) {
                g[i] -= 0.125f;
                fd[i] *= w * scale;
            }
            char what[64];
            snprintf(what, sizeof what, "kl gradient vs finite differences, tau %g", tau);
            tu_check_fd(what, g, fd, T * V, 5e-6);
            free(g), free(fd);
        }
    }
    free(ls), free(lt), free(lsf), free(ltf);
}

Test(kernels_train, memory_interface_round_trip)
{
    const struct hm_backend *be;
    TB_EACH(be) {
        float host[64], back[64];
        for (int i = 0; i < 64; i++)
            host[i] = (float)i * 0.5f;
        float *buf = hm_backend_alloc(be, sizeof host);
        cr_assert(buf);
        hm_backend_upload(be, buf, host, sizeof host);
        hm_backend_fill(be, buf + 60, 4, 9.0f);
        hm_backend_download(be, back, buf, sizeof back);
        for (int i = 0; i < 64; i++)
            cr_assert_eq(back[i], i < 60 ? host[i] : 9.0f);
        hm_backend_free(be, (void **)&buf);
        cr_assert_null(buf);
        hm_backend_free(be, (void **)&buf); /* NULL ok */
    }
}

/* Every backend answers 0 outside the op range; ref, fast and checked lack
 * nothing (backend.h). */
Test(kernels_train, supports_answers_for_every_op)
{
    const struct hm_backend *be;
    TB_EACH(be) {
        const char *n = hm_backend_name(be);
        for (int op = 0; op < HM_OP_COUNT && (!strcmp(n, "ref") || !strcmp(n, "fast") ||
                                              !strcmp(n, "checked"));
             op++)
            cr_assert(hm_backend_supports(be, (enum hm_op)op, 1000), "%s: op %d", n, op);
        cr_assert(!hm_backend_supports(be, HM_OP_COUNT, 1));
        cr_assert(!hm_backend_supports(be, (enum hm_op)-1, 1));
    }
}
