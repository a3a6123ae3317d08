/* The stage-1 objectives besides the cosine loss (tests/test_linattn.c has
 * that one): mse_loss and attn_ce_loss (kernels/backend.h), on every
 * registered backend through its own buffers (tests/support/bufs.h).
 *
 * Each op: the loss against a straightforward double loop written here
 * (attn-ce: the T×T score and weight matrices built in full), and the
 * gradient against central finite differences of that double loop
 * (tolerance max|Δ| ≤ 5e-6 · max(1, max|g|), as tests/test_linattn.c);
 * the loss without gradients equals the loss with them; checked equals ref
 * bit for bit, and fast too (mse_loss is ref's loop by declaration, fast
 * attn_ce_loss runs ref's per-head loop on each head). A larger attn-ce
 * case (T = 70 > two CUDA key tiles, 2F = 160 > one CUDA feature pass)
 * compares every backend with ref within 1e-5 · max|ref|.
 * Observed (2-core dev VM): mse FD ≤ 1.4e-8, attn-ce FD ≤ 4.6e-8 (as
 * max|Δ| / max(1, max|g|)). */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "bufs.h"
#include "fdcheck.h"
#include "testutil.h"

#define TOL 5e-6
#define EPS 1e-6f

/* ---- mse_loss -------------------------------------------------------------- */
struct msec { int64_t N, d; const double *b; };

static double mse_d(const double *a, void *ctx)
{
    const struct msec *c = ctx;
    double L = 0;
    for (int64_t t = 0; t < c->N; t++) {
        double s = 0;
        for (int64_t j = 0; j < c->d; j++) {
            double e = a[t * c->d + j] - c->b[t * c->d + j];
            s += e * e;
        }
        L += s / (double)c->d;
    }
    return L;
}

Test(stage1_loss, mse)
{
    int64_t shapes[][2] = {{1, 1}, {5, 7}, {3, 131}, {17, 512}};
    const float scale = 0.37f;
    double worst = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t N = shapes[si][0], d = shapes[si][1], n = N * d;
        uint64_t s = 701 + si;
        double *a = malloc(8 * n), *b = malloc(8 * n), *g = malloc(8 * n);
        tu_rand_fill(a, n, &s, 1);
        tu_rand_fill(b, n, &s, 2);
        struct msec c = {N, d, b};
        tu_fd_grad(g, a, n, mse_d, &c);
        double L = mse_d(a, &c);
        for (int64_t i = 0; i < n; i++)
            g[i] *= scale;
        float *fa = tu_to_f32(a, n), *fb = tu_to_f32(b, n);
        float *ref_da = malloc(4 * n);
        double ref_loss = 0;
        hm_backend_mse_loss(hm_backend_get("ref"), &ref_loss, ref_da, fa, fb, N, d, scale);
        const struct hm_backend *be;
        TB_EACH(be) {
            float *da = malloc(4 * n);
            double got = 0.5, got_nograd = 0.5; /* the op adds to what is there */
            double *lb = tb_in(be, &got, sizeof got), *l2b = tb_in(be, &got_nograd, sizeof got);
            const float *ab = tb_in(be, fa, TB_F(n)), *bb = tb_in(be, fb, TB_F(n));
            float *dab = tb_out(be, TB_F(n));
            hm_backend_mse_loss(be, lb, dab, ab, bb, N, d, scale);
            hm_backend_mse_loss(be, l2b, NULL, ab, bb, N, d, scale);
            tb_get(be, &got, lb, sizeof got);
            tb_get(be, &got_nograd, l2b, sizeof got_nograd);
            tb_get(be, da, dab, TB_F(n));
            tb_free_all(be);
            got -= 0.5, got_nograd -= 0.5;
            if (tb_ref_bits(be) || strcmp(hm_backend_name(be), "fast") == 0)
                cr_expect(got == ref_loss && memcmp(da, ref_da, TB_F(n)) == 0,
                          "%s mse: not ref's bits", hm_backend_name(be));
            cr_expect(fabs(got - L) <= 1e-12 * fmax(1, L), "%s: mse loss %.15g want %.15g",
                      hm_backend_name(be), got, L);
            worst = fmax(worst, tu_check_fd("mse da", da, g, n, TOL));
            cr_expect(got_nograd == got, "%s: loss without da differs", hm_backend_name(be));
            free(da);
        }
        free(fa); free(fb); free(ref_da);
        free(a); free(b); free(g);
    }
    cr_log_info("mse FD: worst max|Δ|/max(1,|g|) = %.3g", worst);
}

/* ---- attn_ce_loss ------------------------------------------------------------- */
struct cec {
    int64_t T, n_h, F2, p;
    const double *q, *k; /* [T, n_h, p] */
    double *phiq, *phik; /* [T, n_h, F2] */
    int which;           /* 0: vary φq, 1: vary φk */
};

/* (Σ_h Σ_t −Σ_{s≤t} P_ts log(A_ts + 1e-12)) / n_h from the full matrices
 * S = q k^T / sqrt(p), E = φq φk^T of each head (masked to s ≤ t). */
static double attn_ce_d(const double *v, void *ctx)
{
    const struct cec *c = ctx;
    const int64_t T = c->T, nh = c->n_h, F2 = c->F2, p = c->p;
    const double *pq = c->which == 0 ? v : c->phiq, *pk = c->which == 1 ? v : c->phik;
    double *S = malloc(sizeof(double) * (size_t)(T * T));
    double *E = malloc(sizeof(double) * (size_t)(T * T));
    double L = 0;
    for (int64_t h = 0; h < nh; h++) {
        for (int64_t t = 0; t < T; t++)
            for (int64_t s = 0; s < T; s++) {
                double sc = 0, e = 0;
                for (int64_t i = 0; i < p; i++)
                    sc += c->q[(t * nh + h) * p + i] * c->k[(s * nh + h) * p + i];
                for (int64_t f = 0; f < F2; f++)
                    e += pq[(t * nh + h) * F2 + f] * pk[(s * nh + h) * F2 + f];
                S[t * T + s] = sc / sqrt((double)p);
                E[t * T + s] = e;
            }
        for (int64_t t = 0; t < T; t++) {
            double mx = -INFINITY, z = 0, den = (double)EPS;
            for (int64_t s = 0; s <= t; s++) {
                mx = fmax(mx, S[t * T + s]);
                den += E[t * T + s];
            }
            for (int64_t s = 0; s <= t; s++)
                z += exp(S[t * T + s] - mx);
            for (int64_t s = 0; s <= t; s++) {
                double P = exp(S[t * T + s] - mx) / z;
                L -= P * log(E[t * T + s] / den + 1e-12);
            }
        }
    }
    free(S);
    free(E);
    return L / (double)nh;
}

/* fused [T, 3 n_h p]: q in slot 0, k in slot 1, v sentinels */
static float *fused_qk(const double *q, const double *k, int64_t T, int64_t nh, int64_t p)
{
    float *x = tu_fused(q, T, nh, p, 0);
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < nh; h++)
            for (int64_t i = 0; i < p; i++)
                x[t * 3 * nh * p + h * 3 * p + p + i] = (float)k[(t * nh + h) * p + i];
    return x;
}

struct ce_out { double loss, loss_nograd; float *dq, *dk; };

/* One call of attn_ce_loss on be (with and without gradients). */
static void run_attn_ce(const struct hm_backend *be, struct ce_out *o, const float *qkv,
                        const float *fq, const float *fk, int64_t T, int64_t nh, int64_t F2,
                        int64_t p, float scale)
{
    const int64_t n = T * nh * F2, ld = 3 * nh * p;
    const size_t ws = hm_backend_attn_ce_loss_ws_size(be, T, nh, F2, p);
    double l0 = 0.25;
    double *lb = tb_in(be, &l0, sizeof l0), *l2b = tb_in(be, &l0, sizeof l0);
    const float *qb = tb_in(be, qkv, TB_F(T * ld > 0 ? T * ld : 1));
    const float *pqb = tb_in(be, fq, TB_F(n)), *pkb = tb_in(be, fk, TB_F(n));
    float *dqb = tb_out(be, TB_F(n)), *dkb = tb_out(be, TB_F(n));
    void *wsb = tb_out(be, ws ? ws : 1);
    hm_backend_attn_ce_loss(be, lb, dqb, dkb, pqb, pkb, qb, qb + p, T, nh, F2, p, ld, 3 * p, EPS,
                            scale, wsb, ws);
    hm_backend_attn_ce_loss(be, l2b, NULL, NULL, pqb, pkb, qb, qb + p, T, nh, F2, p, ld, 3 * p,
                            EPS, scale, wsb, ws);
    tb_get(be, &o->loss, lb, sizeof o->loss);
    tb_get(be, &o->loss_nograd, l2b, sizeof o->loss_nograd);
    tb_get(be, o->dq, dqb, TB_F(n));
    tb_get(be, o->dk, dkb, TB_F(n));
    tb_free_all(be);
    o->loss -= 0.25, o->loss_nograd -= 0.25;
}

Test(stage1_loss, attn_ce)
{
    /* T, n_h, F (F2 = 2F), p */
    int64_t shapes[][4] = {{1, 1, 1, 1}, {3, 1, 2, 3}, {7, 2, 3, 4}, {13, 2, 2, 5}, {40, 2, 3, 4}};
    const float scale = 0.61f;
    double worst = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int64_t T = shapes[si][0], nh = shapes[si][1], F2 = 2 * shapes[si][2];
        const int64_t p = shapes[si][3], n = T * nh * F2;
        uint64_t s = 801 + si;
        double *q = malloc(8 * T * nh * p), *k = malloc(8 * T * nh * p);
        double *phiq = malloc(8 * n), *phik = malloc(8 * n);
        double *gq = malloc(8 * n), *gk = malloc(8 * n);
        tu_rand_fill(q, T * nh * p, &s, 1.5);
        tu_rand_fill(k, T * nh * p, &s, 1.5);
        tu_rand_phi(phiq, T * nh, F2, &s, 1.0);
        tu_rand_phi(phik, T * nh, F2, &s, 1.0);
        struct cec c = {T, nh, F2, p, q, k, phiq, phik, 0};
        double L = attn_ce_d(phiq, &c);
        tu_fd_grad(gq, phiq, n, attn_ce_d, &c);
        c.which = 1;
        tu_fd_grad(gk, phik, n, attn_ce_d, &c);
        for (int64_t i = 0; i < n; i++)
            gq[i] *= scale, gk[i] *= scale;
        float *qkv = fused_qk(q, k, T, nh, p), *fq = tu_to_f32(phiq, n), *fk = tu_to_f32(phik, n);
        struct ce_out ref = {0, 0, malloc(4 * n), malloc(4 * n)};
        run_attn_ce(hm_backend_get("ref"), &ref, qkv, fq, fk, T, nh, F2, p, scale);
        const struct hm_backend *be;
        TB_EACH(be) {
            struct ce_out o = {0, 0, malloc(4 * n), malloc(4 * n)};
            run_attn_ce(be, &o, qkv, fq, fk, T, nh, F2, p, scale);
            const char *name = hm_backend_name(be);
            cr_expect(fabs(o.loss - L) <= 1e-9 * fmax(1, L), "%s T=%lld: loss %.15g want %.15g",
                      name, (long long)T, o.loss, L);
            cr_expect(o.loss_nograd == o.loss, "%s: loss without gradients differs", name);
            worst = fmax(worst, tu_check_fd("attn-ce dphiq", o.dq, gq, n, TOL));
            worst = fmax(worst, tu_check_fd("attn-ce dphik", o.dk, gk, n, TOL));
            if (tb_ref_bits(be) || strcmp(name, "fast") == 0)
                cr_expect(o.loss == ref.loss && memcmp(o.dq, ref.dq, TB_F(n)) == 0 &&
                              memcmp(o.dk, ref.dk, TB_F(n)) == 0,
                          "%s T=%lld: not ref's bits", name, (long long)T);
            free(o.dq); free(o.dk);
        }
        free(ref.dq); free(ref.dk);
        free(qkv); free(fq); free(fk);
        free(q); free(k); free(phiq); free(phik); free(gq); free(gk);
    }
    cr_log_info("attn-ce FD: worst max|Δ|/max(1,|g|) = %.3g", worst);
}

/* Larger than the FD cases: every backend against ref, fast by ref's bits
 * (its heads run in parallel here: n_h = 3, 2 threads under ctest). */
Test(stage1_loss, attn_ce_large)
{
    const int64_t T = 70, nh = 3, F2 = 160, p = 16, n = T * nh * F2;
    uint64_t s = 901;
    double *q = malloc(8 * T * nh * p), *k = malloc(8 * T * nh * p);
    double *phiq = malloc(8 * n), *phik = malloc(8 * n);
    tu_rand_fill(q, T * nh * p, &s, 1.0);
    tu_rand_fill(k, T * nh * p, &s, 1.0);
    tu_rand_phi(phiq, T * nh, F2, &s, 1.0);
    tu_rand_phi(phik, T * nh, F2, &s, 1.0);
    float *qkv = fused_qk(q, k, T, nh, p), *fq = tu_to_f32(phiq, n), *fk = tu_to_f32(phik, n);
    struct ce_out ref = {0, 0, malloc(4 * n), malloc(4 * n)};
    run_attn_ce(hm_backend_get("ref"), &ref, qkv, fq, fk, T, nh, F2, p, 1.0f);
    const struct hm_backend *be;
    TB_EACH(be) {
        struct ce_out o = {0, 0, malloc(4 * n), malloc(4 * n)};
        run_attn_ce(be, &o, qkv, fq, fk, T, nh, F2, p, 1.0f);
        const char *name = hm_backend_name(be);
        cr_expect(fabs(o.loss - ref.loss) <= 1e-12 * ref.loss, "%s: loss %.15g, ref %.15g", name,
                  o.loss, ref.loss);
        tu_check_rel("attn-ce dphiq vs ref", o.dq, ref.dq, n, 1e-5, 0);
        tu_check_rel("attn-ce dphik vs ref", o.dk, ref.dk, n, 1e-5, 0);
        if (tb_ref_bits(be) || strcmp(name, "fast") == 0)
            cr_expect(o.loss == ref.loss && memcmp(o.dq, ref.dq, TB_F(n)) == 0 &&
                          memcmp(o.dk, ref.dk, TB_F(n)) == 0,
                      "%s: not ref's bits", name);
        free(o.dq); free(o.dk);
    }
    free(ref.dq); free(ref.dk);
    free(qkv); free(fq); free(fk);
    free(q); free(k); free(phiq); free(phik);
}

/* At features that reproduce the teacher's weights (φk_s = the s-th basis
 * vector, φq_t[s] = P_ts for s ≤ t, F2 = T), A = P / (ΣP + eps): the loss
 * is the entropy of P plus log(1 + eps) per row (the fp32 rounding of P
 * enters at second order only, δ at ~T·1e-12), and the gradient is −eps
 * per score up to rounding — the minimum of a cross-entropy. Independent of
 * the FD test: the entropy comes from P alone. */
Test(stage1_loss, attn_ce_at_teacher)
{
    enum { T = 6, nh = 2, F2 = 6, p = 4, n = T * nh * F2 }; /* F2 = T */
    uint64_t s = 77;
    double q[T * nh * p], k[T * nh * p], phiq[n], phik[n];
    tu_rand_fill(q, T * nh * p, &s, 1.0);
    tu_rand_fill(k, T * nh * p, &s, 1.0);
    memset(phiq, 0, sizeof phiq);
    memset(phik, 0, sizeof phik);
    double H = 0; /* Σ_h Σ_t entropy(P_t) */
    for (int64_t h = 0; h < nh; h++)
        for (int64_t t = 0; t < T; t++) {
            double sc[T], mx = -INFINITY, z = 0;
            for (int64_t u = 0; u <= t; u++) {
                sc[u] = 0;
                for (int64_t i = 0; i < p; i++)
                    sc[u] += q[(t * nh + h) * p + i] * k[(u * nh + h) * p + i]; /* fp32 values */
                sc[u] /= 2.0; /* sqrt(p) */
                mx = fmax(mx, sc[u]);
            }
            for (int64_t u = 0; u <= t; u++)
                z += exp(sc[u] - mx);
            for (int64_t u = 0; u <= t; u++) {
                double P = exp(sc[u] - mx) / z;
                phiq[(t * nh + h) * F2 + u] = (float)P;
                H -= P * log(P);
            }
            phik[(t * nh + h) * F2 + t] = 1;
        }
    H /= (double)nh;
    float *qkv = fused_qk(q, k, T, nh, p), *fq = tu_to_f32(phiq, n), *fk = tu_to_f32(phik, n);
    const struct hm_backend *be;
    TB_EACH(be) {
        struct ce_out o = {0, 0, malloc(4 * n), malloc(4 * n)};
        run_attn_ce(be, &o, qkv, fq, fk, T, nh, F2, p, 1.0f);
        const double want = H + (double)T * log1p((double)EPS);
        cr_expect(fabs(o.loss - want) <= 1e-9, "%s: loss %.12g, entropy + T log(1 + eps) %.12g",
                  hm_backend_name(be), o.loss, want);
        double mx = 0;
        for (int64_t i = 0; i < n; i++)
            mx = fmax(mx, fmax(fabs(o.dq[i]), fabs(o.dk[i])));
        cr_expect(mx <= 1e-5, "%s: gradient %.3g at the teacher's weights", hm_backend_name(be),
                  mx);
        free(o.dq); free(o.dk);
    }
    free(qkv); free(fq); free(fk);
}
