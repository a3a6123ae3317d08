/* test_kernels_family.c — the llama-family and decoding ops of
 * kernels/backend.h against independent double computations written here:
 *  - RMSNorm forward (ref vs double, fast vs ref) and backward (central
 *    finite differences of a double RMSNorm, both backends);
 *  - the GQA expansion of [q | k | v]: forward against a loop over the
 *    definition, backward as its exact adjoint (<Ex, y> = <x, E^T y> in
 *    double) and fast vs ref bit for bit;
 *  - attention of new rows against a KV cache (steps T = 1 and prefill
 *    chunks, GQA, q strided in the fused layout or contiguous): ref against
 *    the matching rows of the full causal attention op and against double,
 *    fast against ref (2e-6 relative to max(1, max|ref|)).
 * "fast" in these lines means every registered backend (fast, checked, a
 * device backend; tests/support/bufs.h: inputs uploaded into its buffers,
 * outputs downloaded), compared with ref's result on host arrays; checked
 * (ref's code) equals ref bit for bit.
 * Tolerances as in test_backward.c (5e-6 relative to max(1, max|g|)).
 * Observed: rmsnorm ref vs double 1.2e-7, backward ≤ 4e-8 of max|g|,
 * cached: ref vs full attention and vs double ≤ 7.8e-7, fast vs ref ≤ 3e-7
 * (BLAS and no-BLAS builds). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "bufs.h"
#include "fdcheck.h"
#include "testutil.h"

/* "<prefix> <backend> vs ref" for check messages (one static buffer). */
static const char *vs(const char *prefix, const struct hm_backend *be)
{
    static char buf[128];
    snprintf(buf, sizeof buf, "%s %s vs ref", prefix, hm_backend_name(be));
    return buf;
}

/* ---- RMSNorm ---------------------------------------------------------------- */
struct rn { int64_t T, d; double eps; const double *R, *x, *w; int which; };

static void d_rmsnorm(double *y, const double *x, const double *w, int64_t T, int64_t d,
                      double eps)
{
    for (int64_t t = 0; t < T; t++) {
        double ss = 0;
        for (int64_t i = 0; i < d; i++)
            ss += x[t * d + i] * x[t * d + i];
        double r = 1.0 / sqrt(ss / (double)d + eps);
        for (int64_t i = 0; i < d; i++)
            y[t * d + i] = x[t * d + i] * r * w[i];
    }
}

static double rn_loss(const double *v, void *ctx)
{
    struct rn *c = ctx;
    const double *x = c->which == 0 ? v : c->x, *w = c->which == 1 ? v : c->w;
    double *y = malloc(sizeof(double) * (size_t)(c->T * c->d)), L = 0;
    d_rmsnorm(y, x, w, c->T, c->d, c->eps);
    for (int64_t i = 0; i < c->T * c->d; i++)
        L += c->R[i] * y[i];
    free(y);
    return L;
}

Test(kernels_family, rmsnorm_forward_and_backward)
{
    int64_t shapes[][2] = {{1, 1}, {3, 7}, {5, 64}, {17, 130}, {300, 48}};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const int64_t T = shapes[si][0], d = shapes[si][1];
        uint64_t s = 101 + si;
        double *x = malloc(8 * T * d), *w = malloc(8 * d), *R = malloc(8 * T * d);
        double *y = malloc(8 * T * d), *gx = malloc(8 * T * d), *gw = malloc(8 * d);
        tu_rand_fill(x, T * d, &s, 1.5);
        tu_rand_fill(w, d, &s, 0.5);
        for (int64_t i = 0; i < d; i++)
            w[i] = (float)(w[i] + 1.0);
        tu_rand_fill(R, T * d, &s, 1);
        const double eps = 1e-5;
        d_rmsnorm(y, x, w, T, d, eps);
        struct rn c = {T, d, eps, R, x, w, 0};
        tu_fd_grad(gx, x, T * d, rn_loss, &c);
        c.which = 1;
        tu_fd_grad(gw, w, d, rn_loss, &c);
        float *xf = tu_to_f32(x, T * d), *wf = tu_to_f32(w, d), *Rf = tu_to_f32(R, T * d);
        float *yr = calloc((size_t)(T * d), 4), *rstd = calloc((size_t)T, 4);
        float *dx = calloc((size_t)(T * d), 4), *dw = calloc((size_t)d, 4);
        float *yf = calloc((size_t)(T * d), 4), *rstdf = calloc((size_t)T, 4);
        hm_backend_rmsnorm_forward(hm_backend_get("ref"), yr, rstd, xf, wf, T, d, (float)eps);
        tu_check_fd("rmsnorm ref vs double", yr, y, T * d, 1e-6);
        const struct hm_backend *be;
        TB_EACH(be) {
            const float *xb = tb_in(be, xf, TB_F(T * d)), *wb = tb_in(be, wf, TB_F(d));
            float *yb = tb_out(be, TB_F(T * d)), *rb = tb_out(be, TB_F(T));
            hm_backend_rmsnorm_forward(be, yb, rb, xb, wb, T, d, (float)eps);
            tb_get(be, yf, yb, TB_F(T * d));
            tb_get(be, rstdf, rb, TB_F(T));
            tu_check_rel(vs("rmsnorm", be), yf, yr, T * d, 1e-6, 1);
            tu_check_rel(vs("rmsnorm rstd", be), rstdf, rstd, T, 1e-6, 1);
            tb_expect_ref_bits(be, "rmsnorm y", yf, yr, TB_F(T * d));
            tb_expect_ref_bits(be, "rmsnorm rstd", rstdf, rstd, TB_F(T));
            for (int64_t i = 0; i < d; i++)
                dw[i] = 0.25f; /* += contract: starts from a non-zero value */
            float *dxb = tb_out(be, TB_F(T * d)), *dwb = tb_in(be, dw, TB_F(d));
            hm_backend_rmsnorm_backward(be, dxb, dwb, tb_in(be, Rf, TB_F(T * d)), xb,
                                        tb_in(be, rstd, TB_F(T)), wb, T, d);
            tb_get(be, dx, dxb, TB_F(T * d));
            tb_get(be, dw, dwb, TB_F(d));
            tb_free_all(be);
            tb_keep(be, "rmsnorm dx", dx, TB_F(T * d));
            tb_keep(be, "rmsnorm dw", dw, TB_F(d));
            for (int64_t i = 0; i < d; i++)
                dw[i] -= 0.25f;
            tu_check_fd(hm_backend_name(be), dx, gx, T * d, 5e-6);
            tu_check_fd(hm_backend_name(be), dw, gw, d, 5e-6);
        }
        free(x), free(w), free(R), free(y), free(gx), free(gw), free(xf), free(wf), free(Rf);
        free(yr), free(rstd), free(dx), free(dw), free(yf), free(rstdf);
    }
}

/* ---- GQA expansion ------------------------------------------------------------- */
Test(kernels_family, qkv_expand_is_the_definition_and_its_adjoint)
{
    int64_t shapes[][4] = {{1, 1, 1, 2}, {3, 4, 2, 3}, {7, 8, 4, 8}, {5, 6, 6, 4}, {64, 12, 3, 16}};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const int64_t T = shapes[si][0], nh = shapes[si][1], nkv = shapes[si][2],
                      p = shapes[si][3];
        const int64_t in = (nh + 2 * nkv) * p, outw = 3 * nh * p;
        uint64_t s = 7 + si;
        double *x = malloc(8 * T * in), *r = malloc(8 * T * outw);
        tu_rand_fill(x, T * in, &s, 1);
        tu_rand_fill(r, T * outw, &s, 1);
        float *xf = tu_to_f32(x, T * in), *rf = tu_to_f32(r, T * outw);
        float *y[2], *dx[2];
        for (int k = 0; k < 2; k++) {
            y[k] = malloc(4 * (size_t)(T * outw));
            dx[k] = malloc(4 * (size_t)(T * in));
        }
        const struct hm_backend *ref = hm_backend_get("ref"), *be;
        hm_backend_qkv_expand_forward(ref, y[0], xf, T, nh, nkv, p);
        hm_backend_qkv_expand_backward(ref, dx[0], rf, T, nh, nkv, p);
        /* the definition: head h reads query head h and key/value head h / (nh / nkv) */
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < nh; h++)
                for (int64_t i = 0; i < p; i++) {
                    int64_t g = h * nkv / nh;
                    cr_assert_eq(y[0][t * outw + h * 3 * p + i], xf[t * in + h * p + i]);
                    cr_assert_eq(y[0][t * outw + h * 3 * p + p + i],
                                 xf[t * in + nh * p + g * p + i]);
                    cr_assert_eq(y[0][t * outw + h * 3 * p + 2 * p + i],
                                 xf[t * in + (nh + nkv) * p + g * p + i]);
                }
        double lhs = 0, rhs = 0;
        for (int64_t i = 0; i < T * outw; i++)
            lhs += (double)y[0][i] * (double)rf[i];
        for (int64_t i = 0; i < T * in; i++)
            rhs += (double)xf[i] * (double)dx[0][i];
        cr_assert(fabs(lhs - rhs) <= 1e-5 * (1 + fabs(lhs)), "adjoint: %.10g vs %.10g", lhs, rhs);
        TB_EACH(be) {
            float *yb = tb_out(be, TB_F(T * outw)), *dxb = tb_out(be, TB_F(T * in));
            hm_backend_qkv_expand_forward(be, yb, tb_in(be, xf, TB_F(T * in)), T, nh, nkv, p);
            hm_backend_qkv_expand_backward(be, dxb, tb_in(be, rf, TB_F(T * outw)), T, nh, nkv, p);
            tb_get(be, y[1], yb, TB_F(T * outw));
            tb_get(be, dx[1], dxb, TB_F(T * in));
            tb_free_all(be);
            cr_assert(memcmp(y[0], y[1], 4 * (size_t)(T * outw)) == 0, "%s forward differs",
                      hm_backend_name(be));
            cr_assert(memcmp(dx[0], dx[1], 4 * (size_t)(T * in)) == 0, "%s backward differs",
                      hm_backend_name(be));
        }
        free(x), free(r), free(xf), free(rf);
        for (int k = 0; k < 2; k++)
            free(y[k]), free(dx[k]);
    }
}

/* ---- new rows against the KV cache (decoding steps and prefill chunks) ----------- */

/* want [T, nh, p]: the rows P0 .. P0+T-1 of causal GQA attention in double,
 * straight from the projections x [P0 + T, (nh + 2 nkv) p] as [q | k | v]. */
static void d_attention_rows(double *want, const double *x, int64_t P0, int64_t T, int64_t nh,
                             int64_t nkv, int64_t p)
{
    const int64_t in = (nh + 2 * nkv) * p, grp = nh / nkv;
    double *sc = malloc(8 * (size_t)(P0 + T));
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < nh; h++) {
            const int64_t g = h / grp, n = P0 + t + 1;
            const double *qr = x + (P0 + t) * in + h * p;
            double mx = -INFINITY, sum = 0;
            for (int64_t s = 0; s < n; s++) {
                double a = 0;
                for (int64_t i = 0; i < p; i++)
                    a += qr[i] * x[s * in + nh * p + g * p + i];
                sc[s] = a / sqrt((double)p);
                mx = sc[s] > mx ? sc[s] : mx;
            }
            for (int64_t s = 0; s < n; s++)
                sum += (sc[s] = exp(sc[s] - mx));
            double *w = want + (t * nh + h) * p;
            for (int64_t i = 0; i < p; i++)
                w[i] = 0;
            for (int64_t s = 0; s < n; s++)
                for (int64_t i = 0; i < p; i++)
                    w[i] += sc[s] / sum * x[s * in + (nh + nkv) * p + g * p + i];
        }
    free(sc);
}

Test(kernels_family, attention_cached_rows_are_causal_attention_rows)
{
    /* {P0, T, nh, nkv, p}. T = 1 past 2048 positions splits the softmax
     * over blocks in fast (nh = 32, p = 64: two head batches per group);
     * n = P0 + T > 512: no full-attention oracle (too slow in double). */
    int64_t shapes[][5] = {{0, 1, 1, 1, 4},    {4, 1, 4, 2, 8},     {69, 1, 8, 4, 16},
                           {0, 33, 6, 1, 10},  {50, 17, 8, 8, 16},  {300, 64, 8, 2, 64},
                           {0, 2, 3, 3, 5},    {1, 5, 2, 1, 130},   {3000, 1, 8, 2, 64},
                           {2100, 1, 32, 1, 64}, {4500, 1, 3, 1, 20}, {1500, 40, 4, 1, 32}};
    const struct hm_backend *ref = hm_backend_get("ref");
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const int64_t P0 = shapes[si][0], T = shapes[si][1], nh = shapes[si][2],
                      nkv = shapes[si][3], p = shapes[si][4], n = P0 + T;
        const int64_t in = (nh + 2 * nkv) * p, H3 = 3 * nh * p, no = T * nh * p;
        cr_log_info("attention_cached P0 %lld T %lld nh %lld nkv %lld p %lld", (long long)P0,
                    (long long)T, (long long)nh, (long long)nkv, (long long)p);
        uint64_t s = 31 + si;
        double *x = malloc(8 * n * in);
        tu_rand_fill(x, n * in, &s, 1);
        float *xf = tu_to_f32(x, n * in), *heads = malloc(4 * (size_t)(n * H3));
        hm_backend_qkv_expand_forward(ref, heads, xf, n, nh, nkv, p);
        /* caches [n, nkv, p] straight from [q | k | v] */
        float *kc = malloc(4 * (size_t)(n * nkv * p)), *vc = malloc(4 * (size_t)(n * nkv * p));
        for (int64_t t = 0; t < n; t++) {
            memcpy(kc + t * nkv * p, xf + t * in + nh * p, 4 * (size_t)(nkv * p));
            memcpy(vc + t * nkv * p, xf + t * in + (nh + nkv) * p, 4 * (size_t)(nkv * p));
        }
        /* q of the new rows: strided in the fused [T, nh, 3p] layout, and contiguous */
        const float *qs = heads + P0 * H3;
        float *qc = malloc(4 * (size_t)no);
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < nh; h++)
                memcpy(qc + (t * nh + h) * p, qs + t * H3 + h * 3 * p, 4 * (size_t)p);
        /* the scratch exactly as large as documented; outputs with guard floats */
        const int64_t nsc = hm_backend_attention_cached_scratch_floats(T, n, nh), G = 16;
        float *scratch = malloc(4 * (size_t)(nsc + G)), *out[4];
        for (int k = 0; k < 4; k++) {
            out[k] = malloc(4 * (size_t)(no + G));
            for (int64_t i = 0; i < no + G; i++)
                out[k][i] = TU_SENT;
        }
        for (int64_t i = 0; i < G; i++)
            scratch[nsc + i] = TU_SENT;
        for (int k = 0; k < 2; k++) /* ref strided, ref contiguous (host arrays) */
            hm_backend_attention_cached(ref, out[k], k % 2 ? qc : qs, k % 2 ? nh * p : H3,
                                        k % 2 ? p : 3 * p, kc, vc, P0, T, nh, nkv, p, scratch);
        for (int k = 0; k < 2; k++)
            for (int64_t i = no; i < no + G; i++)
                cr_assert_eq(out[k][i], TU_SENT, "output %d written past its end", k);
        for (int64_t i = 0; i < G; i++)
            cr_assert_eq(scratch[nsc + i], TU_SENT, "scratch written past its end");
        cr_expect(memcmp(out[0], out[1], 4 * (size_t)no) == 0, "ref: q layout changes the result");
        if (n <= 512) {
            float *full = malloc(4 * (size_t)(n * nh * p));
            size_t wsz = hm_backend_attention_ws_size(ref, n, nh, p);
            void *ws = malloc(wsz ? wsz : 1);
            hm_backend_attention_forward(ref, full, NULL, heads, n, nh, p, ws, wsz);
            tu_check_rel("ref vs full attention", out[0], full + P0 * nh * p, no, 2e-6, 1);
            free(full), free(ws);
        }
        double *want = malloc(8 * (size_t)no);
        d_attention_rows(want, x, P0, T, nh, nkv, p);
        tu_check_fd("ref vs double", out[0], want, no, 2e-6);
        /* every backend, strided and contiguous q; the scratch exactly as
         * large as documented (bufs.h guards every buffer's end) */
        const struct hm_backend *be;
        TB_EACH(be) {
            const float *hb = tb_in(be, heads, TB_F(n * H3)), *qcb = tb_in(be, qc, TB_F(no));
            const float *kb = tb_in(be, kc, TB_F(n * nkv * p)), *vb = tb_in(be, vc, TB_F(n * nkv * p));
            float *sb = tb_out(be, TB_F(nsc));
            for (int k = 2; k < 4; k++) {
                float *ob = tb_out(be, TB_F(no));
                hm_backend_attention_cached(be, ob, k % 2 ? qcb : hb + P0 * H3, k % 2 ? nh * p : H3,
                                            k % 2 ? p : 3 * p, kb, vb, P0, T, nh, nkv, p, sb);
                tb_get(be, out[k], ob, TB_F(no));
            }
            tb_free_all(be);
            tu_check_rel(vs("(strided q)", be), out[2], out[0], no, 2e-6, 1);
            tu_check_rel(vs("(contiguous q)", be), out[3], out[0], no, 2e-6, 1);
            tb_expect_ref_bits(be, "attention_cached (strided q)", out[2], out[0], TB_F(no));
            tb_expect_ref_bits(be, "attention_cached (contiguous q)", out[3], out[1], TB_F(no));
        }
        free(x), free(xf), free(heads), free(kc), free(vc), free(qc), free(scratch), free(want);
        for (int k = 0; k < 4; k++)
            free(out[k]);
    }
}

/* ---- prefill: a chunk's scan from a carried state --------------------------------- */
Test(kernels_family, ssm_chunk_carry_equals_the_recurrence_from_the_state)
{
    const int64_t T = 23, nh = 3, F2 = 6, p = 5, P1 = p + 1;
    for (int hedgehog = 0; hedgehog < 2; hedgehog++) {
        uint64_t s = 91 + (uint64_t)hedgehog;
        double *Cd = malloc(8 * T * nh * F2), *Bd = malloc(8 * T * nh * F2);
        double *vd = malloc(8 * T * nh * p), *S0 = malloc(8 * nh * F2 * P1);
        tu_rand_phi(Cd, T * nh, F2, &s, 1.0);
        tu_rand_phi(Bd, T * nh, F2, &s, 1.0);
        tu_rand_fill(vd, T * nh * p, &s, 1);
        for (int64_t i = 0; i < nh * F2 * P1; i++)
            S0[i] = (float)(fabs(tu_rand_normal(&s)) * 0.5);
        float dt[23 * 3], A[3] = {-0.3f, -0.05f, 0.0f}, D[3] = {0.2f, -0.4f, 0.0f};
        for (int64_t i = 0; i < T * nh; i++)
            dt[i] = (float)(0.2 + fabs(tu_rand_normal(&s)));
        float *C = tu_to_f32(Cd, T * nh * F2), *B = tu_to_f32(Bd, T * nh * F2);
        float *v = tu_to_f32(vd, T * nh * p), *S = tu_to_f32(S0, nh * F2 * P1);
        float *y = malloc(4 * (size_t)(T * nh * p)), *den = malloc(4 * (size_t)(nh * T));
        const float *dtp = hedgehog ? NULL : dt, *Ap = hedgehog ? NULL : A, *Dp = hedgehog ? NULL : D;
        /* the recurrence in double, literally, from S0 */
        double *want = malloc(8 * T * nh * p), *Sw = malloc(8 * nh * F2 * P1);
        memcpy(Sw, S0, 8 * (size_t)(nh * F2 * P1));
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < nh; h++) {
                const double dl = hedgehog ? 1.0 : dt[t * nh + h];
                const double al = hedgehog ? 1.0 : exp(dl * A[h]), Dh = hedgehog ? 0.0 : D[h];
                double *Sh = Sw + h * F2 * P1, dn = 1e-6, num[5] = {0};
                for (int64_t f = 0; f < F2; f++) {
                    for (int64_t i = 0; i < P1; i++) {
                        const double vi = i < p ? (double)v[(t * nh + h) * p + i] : 1.0;
                        Sh[f * P1 + i] = al * Sh[f * P1 + i] + dl * B[(t * nh + h) * F2 + f] * vi;
                    }
                    const double cf = C[(t * nh + h) * F2 + f];
                    dn += cf * Sh[f * P1 + p];
                    for (int64_t i = 0; i < p; i++)
                        num[i] += cf * Sh[f * P1 + i];
                }
                for (int64_t i = 0; i < p; i++)
                    want[(t * nh + h) * p + i] = num[i] / dn + Dh * v[(t * nh + h) * p + i];
            }
        const struct hm_backend *be;
        TB_EACH(be) {
            const int64_t nphi = T * nh * F2, nv = T * nh * p;
            const float *Cb = tb_in(be, C, TB_F(nphi)), *Bb = tb_in(be, B, TB_F(nphi));
            const float *vb = tb_in(be, v, TB_F(nv)), *dtb = tb_in(be, dtp, TB_F(T * nh));
            const float *Ab = tb_in(be, Ap, TB_F(nh)), *Db = tb_in(be, Dp, TB_F(nh));
            float *yb = tb_out(be, TB_F(nv)), *denb = tb_out(be, TB_F(nh * T));
            float *Sb = tb_in(be, S, TB_F(nh * F2 * P1));
            size_t wsz = hedgehog ? hm_backend_linattn_ws_size(be, T, nh, F2, p, 0)
                                  : hm_backend_ssm_ws_size(be, T, nh, F2, p, 0);
            void *ws = tb_out(be, wsz);
            if (hedgehog)
                hm_backend_linattn_forward(be, yb, denb, Cb, Bb, vb, T, nh, F2, p, nh * p, p, 1e-6f,
                                           0, NULL, ws, wsz);
            else
                hm_backend_ssm_forward(be, yb, denb, Cb, Bb, vb, dtb, Ab, Db, T, nh, F2, p, nh * p,
                                       p, 1e-6f, 0, ws, wsz);
            hm_backend_ssm_chunk_carry(be, yb, denb, Cb, Bb, vb, dtb, Ab, Db, Sb, T, nh, F2, p,
                                       nh * p, p);
            float *Sn = malloc(4 * (size_t)(nh * F2 * P1));
            tb_get(be, y, yb, TB_F(nv));
            tb_get(be, den, denb, TB_F(nh * T));
            tb_get(be, Sn, Sb, TB_F(nh * F2 * P1));
            tb_free_all(be);
            tb_keep(be, "chunk carry y", y, TB_F(nv));
            tb_keep(be, "chunk carry den", den, TB_F(nh * T));
            tb_keep(be, "chunk carry S", Sn, TB_F(nh * F2 * P1));
            char what[96];
            snprintf(what, sizeof what, "%s: %s", hm_backend_name(be),
                     hedgehog ? "linattn + carry vs recurrence" : "ssm + carry vs recurrence");
            tu_check_fd(what, y, want, T * nh * p, 2e-6);
            snprintf(what, sizeof what, "%s: state after the chunk", hm_backend_name(be));
            tu_check_fd(what, Sn, Sw, nh * F2 * P1, 2e-6);
            free(Sn);
        }
        free(Cd), free(Bd), free(vd), free(S0), free(C), free(B), free(v), free(S), free(y);
        free(den), free(want), free(Sw);
    }
}
