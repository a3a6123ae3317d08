/* Backward passes against central finite differences in double precision.
 *
 * Each op: a scalar L = Σ R ⊙ op(inputs) with a fixed random R; the op's
 * forward is re-implemented here in double (independently of kernels/),
 * differentiated by central differences (h = 1e-6, so truncation ~1e-12),
 * and compared with the fp32 backward of every registered backend given
 * dy = R (ref, fast, checked, a device backend: tests/support/bufs.h,
 * inputs uploaded into its buffers, gradients downloaded; checked, ref's
 * code, equals ref bit for bit).
 * Tolerance: max|Δ| ≤ 5e-6 · max(1, max|g|) — the kernels take fp32
 * inputs and write fp32 outputs, so ~1e-7 relative per value plus
 * accumulation; observed ≤ 6.2e-7 over every op, shape and backend.
 * The whole model is checked the same way against tests/support/ref_neox.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "bufs.h"
#include "trainer.h"
#include "optim.h"
#include "ref_neox.h"
#include "fdcheck.h"
#include "testutil.h"

#define TOL 5e-6
#define check_close(what, got, want, n) tu_check_fd(what, got, want, n, TOL)


/* round a double vector to fp32 values (so fp32 kernels see the same inputs) */
static void round_f(double *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)x[i];
}


/* ---- matmul ---------------------------------------------------------------- */
struct mm { int64_t T, in, out; const double *R; double *x, *w, *b; int which; };

static double mm_loss(const double *v, void *ctx)
{
    struct mm *c = ctx;
    const double *x = c->which == 0 ? v : c->x, *w = c->which == 1 ? v : c->w;
    const double *b = c->which == 2 ? v : c->b;
    double L = 0;
    for (int64_t t = 0; t < c->T; t++)
        for (int64_t o = 0; o < c->out; o++) {
            double y = b[o];
            for (int64_t i = 0; i < c->in; i++)
                y += x[t * c->in + i] * w[o * c->in + i];
            L += c->R[t * c->out + o] * y;
        }
    return L;
}

Test(backward, matmul)
{
    int64_t shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {13, 17, 11}, {2, 64, 3}};
    for (size_t si = 0; si < 4; si++) {
        int64_t T = shapes[si][0], in = shapes[si][1], out = shapes[si][2];
        uint64_t s = 11 + si;
        double *x = malloc(8 * T * in), *w = malloc(8 * out * in), *b = malloc(8 * out);
        double *R = malloc(8 * T * out);
        tu_rand_fill(x, T * in, &s, 1);
        tu_rand_fill(w, out * in, &s, 0.5);
        tu_rand_fill(b, out, &s, 0.5);
        tu_rand_fill(R, T * out, &s, 1);
        round_f(x, T * in);
        round_f(w, out * in);
        round_f(b, out);
        round_f(R, T * out);
        struct mm c = {T, in, out, R, x, w, b, 0};
        double *gx = malloc(8 * T * in), *gw = malloc(8 * out * in), *gb = malloc(8 * out);
        c.which = 0;
        tu_fd_grad(gx, x, T * in, mm_loss, &c);
        c.which = 1;
        tu_fd_grad(gw, w, out * in, mm_loss, &c);
        c.which = 2;
        tu_fd_grad(gb, b, out, mm_loss, &c);
        const struct hm_backend *be;
        TB_EACH(be) {
            float *fx = tu_to_f32(x, T * in), *fw = tu_to_f32(w, out * in), *fR = tu_to_f32(R, T * out);
            float *dx = calloc(T * in, 4), *dw = calloc(out * in, 4), *db = calloc(out, 4);
            dw[0] = 0.25f; /* parameter grads accumulate */
            db[0] = -0.5f;
            float *dxb = tb_out(be, TB_F(T * in)), *dwb = tb_in(be, dw, TB_F(out * in));
            float *dbb = tb_in(be, db, TB_F(out));
            hm_backend_matmul_backward(be, dxb, dwb, dbb, tb_in(be, fR, TB_F(T * out)),
                                       tb_in(be, fx, TB_F(T * in)), tb_in(be, fw, TB_F(out * in)),
                                       T, in, out);
            tb_get(be, dx, dxb, TB_F(T * in));
            tb_get(be, dw, dwb, TB_F(out * in));
            tb_get(be, db, dbb, TB_F(out));
            tb_free_all(be);
            tb_keep(be, "matmul dx", dx, TB_F(T * in));
            tb_keep(be, "matmul dw", dw, TB_F(out * in));
            tb_keep(be, "matmul db", db, TB_F(out));
            dw[0] -= 0.25f;
            db[0] += 0.5f;
            check_close("matmul dx", dx, gx, T * in);
            check_close("matmul dw", dw, gw, out * in);
            check_close("matmul db", db, gb, out);
            free(fx); free(fw); free(fR); free(dx); free(dw); free(db);
        }
        free(x); free(w); free(b); free(R); free(gx); free(gw); free(gb);
    }
}

/* ---- layernorm ------------------------------------------------------------- */
struct ln { int64_t T, d; const double *R; double *x, *w, *b; int which; };

static double ln_loss(const double *v, void *ctx)
{
    struct ln *c = ctx;
    const double *x = c->which == 0 ? v : c->x, *w = c->which == 1 ? v : c->w;
    const double *b = c->which == 2 ? v : c->b;
    double L = 0;
    for (int64_t t = 0; t < c->T; t++) {
        double mu = 0, var = 0;
        for (int64_t i = 0; i < c->d; i++)
            mu += x[t * c->d + i];
        mu /= (double)c->d;
        for (int64_t i = 0; i < c->d; i++)
            var += (x[t * c->d + i] - mu) * (x[t * c->d + i] - mu);
        var /= (double)c->d;
        for (int64_t i = 0; i < c->d; i++)
            L += c->R[t * c->d + i] * ((x[t * c->d + i] - mu) / sqrt(var + 1e-5) * w[i] + b[i]);
    }
    return L;
}

Test(backward, layernorm)
{
    int64_t shapes[][2] = {{1, 2}, {5, 7}, {3, 131}};
    for (size_t si = 0; si < 3; si++) {
        int64_t T = shapes[si][0], d = shapes[si][1];
        uint64_t s = 21 + si;
        double *x = malloc(8 * T * d), *w = malloc(8 * d), *b = malloc(8 * d), *R = malloc(8 * T * d);
        tu_rand_fill(x, T * d, &s, 1);
        tu_rand_fill(w, d, &s, 1);
        tu_rand_fill(b, d, &s, 1);
        tu_rand_fill(R, T * d, &s, 1);
        round_f(x, T * d);
        round_f(w, d);
        round_f(b, d);
        round_f(R, T * d);
        struct ln c = {T, d, R, x, w, b, 0};
        double *gx = malloc(8 * T * d), *gw = malloc(8 * d), *gb = malloc(8 * d);
        c.which = 0;
        tu_fd_grad(gx, x, T * d, ln_loss, &c);
        c.which = 1;
        tu_fd_grad(gw, w, d, ln_loss, &c);
        c.which = 2;
        tu_fd_grad(gb, b, d, ln_loss, &c);
        const struct hm_backend *be;
        TB_EACH(be) {
            float *fx = tu_to_f32(x, T * d), *fw = tu_to_f32(w, d), *fb = tu_to_f32(b, d), *fR = tu_to_f32(R, T * d);
            float *y = malloc(4 * T * d), *mean = malloc(4 * T), *rstd = malloc(4 * T);
            float *dx = calloc(T * d, 4), *dw = calloc(d, 4), *db = calloc(d, 4);
            const float *xb = tb_in(be, fx, TB_F(T * d)), *wb = tb_in(be, fw, TB_F(d));
            float *yb = tb_out(be, TB_F(T * d)), *mb = tb_out(be, TB_F(T)), *rb = tb_out(be, TB_F(T));
            float *dxb = tb_out(be, TB_F(T * d)), *dwb = tb_in(be, dw, TB_F(d));
            float *dbb = tb_in(be, db, TB_F(d));
            hm_backend_layernorm_forward(be, yb, mb, rb, xb, wb, tb_in(be, fb, TB_F(d)), T, d, 1e-5f);
            hm_backend_layernorm_backward(be, dxb, dwb, dbb, tb_in(be, fR, TB_F(T * d)), xb, mb, rb,
                                          wb, T, d);
            tb_get(be, dx, dxb, TB_F(T * d));
            tb_get(be, dw, dwb, TB_F(d));
            tb_get(be, db, dbb, TB_F(d));
            tb_free_all(be);
            tb_keep(be, "layernorm dx", dx, TB_F(T * d));
            tb_keep(be, "layernorm dw", dw, TB_F(d));
            tb_keep(be, "layernorm db", db, TB_F(d));
            check_close("layernorm dx", dx, gx, T * d);
            check_close("layernorm dw", dw, gw, d);
            check_close("layernorm db", db, gb, d);
            free(fx); free(fw); free(fb); free(fR); free(y); free(mean); free(rstd);
            free(dx); free(dw); free(db);
        }
        free(x); free(w); free(b); free(R); free(gx); free(gw); free(gb);
    }
}

/* ---- gelu ------------------------------------------------------------------ */
struct ge { int64_t n; const double *R; int tanh_form; };

static double ge_loss(const double *x, void *ctx)
{
    struct ge *c = ctx;
    double L = 0;
    for (int64_t i = 0; i < c->n; i++) {
        double v = x[i];
        double y = c->tanh_form
                       ? 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)))
                       : 0.5 * v * (1 + erf(v / sqrt(2.0)));
        L += c->R[i] * y;
    }
    return L;
}

Test(backward, gelu)
{
    const int64_t n = 97;
    for (int kind = 0; kind < 2; kind++) {
        uint64_t s = 31 + kind;
        double x[97], R[97], g[97];
        tu_rand_fill(x, n, &s, 2.5);
        tu_rand_fill(R, n, &s, 1);
        round_f(x, n);
        round_f(R, n);
        struct ge c = {n, R, kind};
        tu_fd_grad(g, x, n, ge_loss, &c);
        const struct hm_backend *be;
        TB_EACH(be) {
            float *fx = tu_to_f32(x, n), *fR = tu_to_f32(R, n), dx[97];
            float *dxb = tb_out(be, TB_F(n)), *Rb = tb_in(be, fR, TB_F(n));
            const float *xb = tb_in(be, fx, TB_F(n));
            hm_backend_gelu_backward(be, dxb, Rb, xb, n, kind ? HM_GELU_TANH : HM_GELU_ERF);
            tb_get(be, dx, dxb, TB_F(n));
            tb_keep(be, "gelu dx", dx, TB_F(n));
            check_close(kind ? "gelu tanh" : "gelu erf", dx, g, n);
            /* dx may alias dy */
            hm_backend_gelu_backward(be, Rb, Rb, xb, n, kind ? HM_GELU_TANH : HM_GELU_ERF);
            tb_get(be, fR, Rb, TB_F(n));
            tb_free_all(be);
            tb_keep(be, "gelu dx aliased", fR, TB_F(n));
            check_close("gelu aliased", fR, g, n);
            free(fx);
            free(fR);
        }
    }
}

/* ---- rotary (on a fused qkv layout) ---------------------------------------- */
struct ro { int64_t T, nh, p, r; const double *R; const float *inv; };

static double ro_loss(const double *x, void *ctx)
{
    struct ro *c = ctx;
    int64_t rs = 3 * c->nh * c->p, half = c->r / 2;
    double L = 0;
    for (int64_t t = 0; t < c->T; t++)
        for (int64_t h = 0; h < c->nh; h++)
            for (int64_t i = 0; i < c->p; i++) {
                const double *v = x + t * rs + h * 3 * c->p;
                double y = v[i];
                if (i < c->r) {
                    int64_t j = i < half ? i : i - half;
                    float th = (float)(t + 3) * c->inv[j];
                    double cs = (float)cos((double)th), sn = (float)sin((double)th);
                    y = i < half ? v[i] * cs - v[i + half] * sn : v[i] * cs + v[i - half] * sn;
                }
                L += c->R[t * rs + h * 3 * c->p + i] * y;
            }
    return L;
}

Test(backward, rotary)
{
    const int64_t T = 5, nh = 2, p = 6, r = 4, n = T * 3 * nh * p;
    float inv[2];
    hm_rotary_inv_freq(inv, r, 10000.0);
    uint64_t s = 41;
    double *x = malloc(8 * n), *R = calloc(n, 8), *g = malloc(8 * n);
    tu_rand_fill(x, n, &s, 1);
    round_f(x, n);
    for (int64_t t = 0; t < T; t++) /* only the q part of each head is rotated here */
        for (int64_t h = 0; h < nh; h++)
            for (int64_t i = 0; i < p; i++)
                R[t * 3 * nh * p + h * 3 * p + i] = (float)tu_rand_normal(&s);
    struct ro c = {T, nh, p, r, R, inv};
    tu_fd_grad(g, x, n, ro_loss, &c);
    const struct hm_backend *be;
    TB_EACH(be) {
        float *dx = tu_to_f32(R, n), *dxb = tb_in(be, dx, TB_F(n));
        hm_backend_rotary_backward(be, dxb, T, nh, r, 3 * nh * p, 3 * p, 3,
                                   tb_in(be, inv, sizeof inv));
        tb_get(be, dx, dxb, TB_F(n));
        tb_free_all(be);
        tb_keep(be, "rotary dx", dx, TB_F(n));
        check_close("rotary", dx, g, n);
        free(dx);
    }
    free(x); free(R); free(g);
}

/* ---- causal softmax attention ---------------------------------------------- */
struct at { int64_t T, nh, p; const double *R; };

static double at_loss(const double *qkv, void *ctx)
{
    struct at *c = ctx;
    int64_t d = c->nh * c->p, rs = 3 * d;
    double L = 0, sc[64];
    for (int64_t h = 0; h < c->nh; h++)
        for (int64_t i = 0; i < c->T; i++) {
            double mx = -INFINITY, se = 0;
            for (int64_t j = 0; j <= i; j++) {
                double s = 0;
                for (int64_t k = 0; k < c->p; k++)
                    s += qkv[i * rs + h * 3 * c->p + k] * qkv[j * rs + h * 3 * c->p + c->p + k];
                sc[j] = s / sqrt((double)c->p);
                mx = sc[j] > mx ? sc[j] : mx;
            }
            for (int64_t j = 0; j <= i; j++)
                se += exp(sc[j] - mx);
            for (int64_t k = 0; k < c->p; k++) {
                double y = 0;
                for (int64_t j = 0; j <= i; j++)
                    y += exp(sc[j] - mx) / se * qkv[j * rs + h * 3 * c->p + 2 * c->p + k];
                L += c->R[i * d + h * c->p + k] * y;
            }
        }
    return L;
}

Test(backward, attention)
{
    int64_t shapes[][3] = {{1, 1, 1}, {7, 2, 3}, {13, 3, 5}, {40, 1, 8}};
    for (size_t si = 0; si < 4; si++) {
        int64_t T = shapes[si][0], nh = shapes[si][1], p = shapes[si][2], d = nh * p;
        uint64_t s = 51 + si;
        double *qkv = malloc(8 * T * 3 * d), *R = malloc(8 * T * d), *g = malloc(8 * T * 3 * d);
        tu_rand_fill(qkv, T * 3 * d, &s, 1);
        tu_rand_fill(R, T * d, &s, 1);
        round_f(qkv, T * 3 * d);
        round_f(R, T * d);
        struct at c = {T, nh, p, R};
        tu_fd_grad(g, qkv, T * 3 * d, at_loss, &c);
        const struct hm_backend *be;
        TB_EACH(be) {
            float *fq = tu_to_f32(qkv, T * 3 * d), *fR = tu_to_f32(R, T * d);
            float *dq = malloc(4 * T * 3 * d);
            size_t fws = hm_backend_attention_ws_size(be, T, nh, p);
            size_t bws = hm_backend_attention_backward_ws_size(be, T, nh, p);
            void *ws = tb_out(be, fws > bws ? fws : bws);
            const float *qb = tb_in(be, fq, TB_F(T * 3 * d));
            float *ob = tb_out(be, TB_F(T * d)), *lb = tb_out(be, TB_F(nh * T));
            float *dqb = tb_out(be, TB_F(T * 3 * d));
            hm_backend_attention_forward(be, ob, lb, qb, T, nh, p, ws, fws);
            hm_backend_attention_backward(be, dqb, tb_in(be, fR, TB_F(T * d)), qb, ob, lb, T, nh, p,
                                          ws, bws);
            tb_get(be, dq, dqb, TB_F(T * 3 * d));
            tb_free_all(be);
            tb_keep(be, "attention dqkv", dq, TB_F(T * 3 * d));
            check_close("attention dqkv", dq, g, T * 3 * d);
            free(fq); free(fR); free(dq);
        }
        free(qkv); free(R); free(g);
    }
}

/* Past one block of the fast backward (64 rows; T = 600 is 9 full blocks
 * + a partial one, T = 256 exactly 4, T = 257 one row more), at a
 * Pythia-like head width (8 × 64), and with a workspace of one head's
 * size (the heads then run one group at a time): fast = ref. */
Test(backward, attention_blocked_fast_vs_ref)
{
    int64_t shapes[][4] = {{600, 2, 16, 0}, {256, 1, 8, 0}, {257, 3, 4, 0}, {130, 8, 64, 0},
                           {200, 3, 24, 1}};
    for (size_t si = 0; si < 5; si++) {
        int64_t T = shapes[si][0], nh = shapes[si][1], p = shapes[si][2], d = nh * p;
        uint64_t s = 91 + si;
        double *qkv = malloc(8 * T * 3 * d), *R = malloc(8 * T * d);
        tu_rand_fill(qkv, T * 3 * d, &s, 1);
        tu_rand_fill(R, T * d, &s, 1);
        float *fq = tu_to_f32(qkv, T * 3 * d), *fR = tu_to_f32(R, T * d);
        float *out = malloc(4 * T * d), *lse = malloc(4 * nh * T);
        float *dq[2] = {malloc(4 * T * 3 * d), malloc(4 * T * 3 * d)};
        const struct hm_backend *ref = hm_backend_get("ref"), *be;
        size_t fws = hm_backend_attention_ws_size(ref, T, nh, p);
        size_t bws = hm_backend_attention_backward_ws_size(ref, T, nh, p);
        void *ws = malloc(fws > bws ? fws : bws);
        /* ref on host arrays: the forward every backend's backward reads, and
         * the backward they are compared with */
        hm_backend_attention_forward(ref, out, lse, fq, T, nh, p, ws, fws);
        hm_backend_attention_backward(ref, dq[0], fR, fq, out, lse, T, nh, p, ws, bws);
        double *want = malloc(8 * T * 3 * d);
        for (int64_t i = 0; i < T * 3 * d; i++)
            want[i] = dq[0][i];
        TB_EACH(be) {
            size_t full = hm_backend_attention_backward_ws_size(be, T, nh, p);
            size_t w = hm_backend_attention_backward_ws_size(be, T, shapes[si][3] ? 1 : nh, p);
            float *dqb = tb_out(be, TB_F(T * 3 * d));
            hm_backend_attention_backward(be, dqb, tb_in(be, fR, TB_F(T * d)),
                                          tb_in(be, fq, TB_F(T * 3 * d)), tb_in(be, out, TB_F(T * d)),
                                          tb_in(be, lse, TB_F(nh * T)), T, nh, p,
                                          tb_out(be, full > w ? full : w), w);
            tb_get(be, dq[1], dqb, TB_F(T * 3 * d));
            tb_free_all(be);
            char what[96];
            snprintf(what, sizeof what, "attention backward %s vs ref", hm_backend_name(be));
            tu_check_fd(what, dq[1], want, T * 3 * d, 1e-5);
            tb_expect_ref_bits(be, what, dq[1], dq[0], TB_F(T * 3 * d));
        }
        free(qkv), free(R), free(fq), free(fR), free(out), free(lse), free(dq[0]), free(dq[1]);
        free(ws), free(want);
    }
}

/* ---- embedding and cross-entropy ------------------------------------------- */
Test(backward, embedding_scatter)
{
    const int64_t T = 6, d = 3, V = 4;
    int32_t ids[6] = {2, 0, 2, 3, 2, 1};
    float dy[18], table[12] = {0};
    uint64_t s = 61;
    for (int i = 0; i < 18; i++)
        dy[i] = (float)tu_rand_normal(&s);
    const struct hm_backend *be;
    TB_EACH(be) {
        memset(table, 0, sizeof table);
        float *tb = tb_in(be, table, sizeof table);
        hm_backend_embedding_backward(be, tb, tb_in(be, dy, sizeof dy), tb_in(be, ids, sizeof ids),
                                      T, d);
        tb_get(be, table, tb, sizeof table);
        tb_free_all(be);
        tb_keep(be, "embedding dtable", table, sizeof table);
        for (int64_t v = 0; v < V; v++)
            for (int64_t i = 0; i < d; i++) {
                double want = 0;
                for (int64_t t = 0; t < T; t++)
                    if (ids[t] == v)
                        want += dy[t * d + i];
                cr_expect(fabs(table[v * d + i] - want) < 1e-6);
            }
    }
}

struct ce { int64_t T, V; const int32_t *tg; double scale; };

static double ce_loss(const double *l, void *ctx)
{
    struct ce *c = ctx;
    double L = 0;
    for (int64_t t = 0; t < c->T; t++) {
        if (c->tg[t] < 0)
            continue;
        double mx = -INFINITY, se = 0;
        for (int64_t v = 0; v < c->V; v++)
            mx = l[t * c->V + v] > mx ? l[t * c->V + v] : mx;
        for (int64_t v = 0; v < c->V; v++)
            se += exp(l[t * c->V + v] - mx);
        L += mx + log(se) - l[t * c->V + c->tg[t]];
    }
    return L * c->scale;
}

Test(backward, cross_entropy)
{
    const int64_t T = 5, V = 13;
    int32_t tg[5] = {3, 0, -1, 12, 7};
    uint64_t s = 71;
    double l[65], g[65];
    tu_rand_fill(l, T * V, &s, 3);
    round_f(l, T * V);
    struct ce c = {T, V, tg, 0.25};
    tu_fd_grad(g, l, T * V, ce_loss, &c);
    double want_total = ce_loss(l, &c) / 0.25;
    const struct hm_backend *be;
    TB_EACH(be) {
        float *fl = tu_to_f32(l, T * V), dl[65];
        double total = 0;
        double *lossb = tb_in(be, &total, sizeof total); /* the loss: backend memory */
        float *dlb = tb_out(be, sizeof dl);
        hm_backend_cross_entropy_backward(be, lossb, dlb, tb_in(be, fl, TB_F(T * V)),
                                          tb_in(be, tg, sizeof tg), T, V, 0.25f);
        tb_get(be, &total, lossb, sizeof total);
        tb_get(be, dl, dlb, sizeof dl);
        tb_free_all(be);
        tb_keep(be, "cross entropy loss", &total, sizeof total);
        tb_keep(be, "cross entropy dlogits", dl, sizeof dl);
        cr_expect(fabs(total - want_total) < 1e-5 * fabs(want_total), "loss %g vs %g", total,
                  want_total);
        check_close("cross entropy", dl, g, T * V);
        free(fl);
    }
}

/* At a real vocabulary (past the threading threshold, 256-term partial
 * sums, the vectorized exp): every probability of both backends within
 * 5e-6 relative of the double softmax (they are ~1/V, so the absolute
 * check above would not see them; fast computes l − max in fp32, whose
 * rounding at |l − max| ≈ 40 is 2e-6 of e^(l − max)), the loss and
 * nll_forward within 1e-6. cpu_vexp.h's own accuracy: test_kernels_cpu. */
Test(backward, cross_entropy_large_vocab)
{
    const int64_t T = 4, V = 50304;
    int32_t tg[4] = {17, -1, 50303, 0};
    uint64_t s = 72;
    double *l = malloc(8 * T * V);
    tu_rand_fill(l, T * V, &s, 4);
    round_f(l, T * V);
    l[2 * V + 5] = 30; /* one dominant logit */
    float *fl = tu_to_f32(l, T * V), *dl = malloc(4 * T * V);
    double want_total = 0, *lse = malloc(8 * T);
    for (int64_t t = 0; t < T; t++) {
        double mx = -INFINITY, se = 0;
        for (int64_t v = 0; v < V; v++)
            mx = fmax(mx, l[t * V + v]);
        for (int64_t v = 0; v < V; v++)
            se += exp(l[t * V + v] - mx);
        lse[t] = mx + log(se);
        if (tg[t] >= 0)
            want_total += lse[t] - l[t * V + tg[t]];
    }
    const struct hm_backend *be;
    TB_EACH(be) {
        const char *name = hm_backend_name(be);
        double total = 0;
        double *lossb = tb_in(be, &total, sizeof total); /* the loss: backend memory */
        const float *lb = tb_in(be, fl, TB_F(T * V));
        float *dlb = tb_out(be, TB_F(T * V));
        hm_backend_cross_entropy_backward(be, lossb, dlb, lb, tb_in(be, tg, sizeof tg), T, V, 0.5f);
        tb_get(be, &total, lossb, sizeof total);
        tb_get(be, dl, dlb, TB_F(T * V));
        tb_keep(be, "cross entropy loss", &total, sizeof total);
        tb_keep(be, "cross entropy dlogits", dl, TB_F(T * V));
        cr_expect(fabs(total - want_total) <= 1e-6 * fabs(want_total), "%s loss %.9g vs %.9g",
                  name, total, want_total);
        double worst = 0;
        for (int64_t t = 0; t < T; t++)
            for (int64_t v = 0; v < V; v++) {
                double p = tg[t] < 0 ? 0 : 0.5 * exp(l[t * V + v] - lse[t]);
                double want = p - (v == tg[t] ? 0.5 : 0.0);
                double e = fabs(dl[t * V + v] - want) / (fabs(want) > 1e-30 ? fabs(want) : 1);
                if (tg[t] < 0)
                    e = dl[t * V + v] != 0.0f;
                worst = e > worst ? e : worst;
            }
        cr_expect(worst <= 5e-6, "%s cross-entropy gradient: worst relative error %.3g",
                  name, worst);
        float nll[4], lsef[4];
        int32_t tg2[4] = {17, 3, 50303, 0};
        float *nb = tb_out(be, sizeof nll), *sb = tb_out(be, sizeof lsef);
        hm_backend_nll_forward(be, nb, sb, lb, tb_in(be, tg2, sizeof tg2), T, V);
        tb_get(be, nll, nb, sizeof nll);
        tb_get(be, lsef, sb, sizeof lsef);
        tb_free_all(be);
        tb_keep(be, "nll", nll, sizeof nll);
        tb_keep(be, "nll lse", lsef, sizeof lsef);
        for (int64_t t = 0; t < T; t++) {
            double want = lse[t] - l[t * V + tg2[t]];
            cr_expect(fabs(nll[t] - want) <= 1e-6 * fabs(want) + 1e-6, "%s nll row %lld: %.9g vs %.9g",
                      name, (long long)t, nll[t], want);
            cr_expect(fabs(lsef[t] - lse[t]) <= 1e-6 * fabs(lse[t]), "%s lse row %lld", name,
                      (long long)t);
        }
    }
    free(l), free(fl), free(dl), free(lse);
}

/* ---- whole model ----------------------------------------------------------- */
struct whole { const struct hm_config *cfg; const int32_t *tok; int64_t B, T; };

static double whole_loss(const double *w, void *ctx)
{
    struct whole *c = ctx;
    return tu_ref_neox_loss(c->cfg, w, c->tok, c->B, c->T, NULL);
}

/* A tiny model with random weights, placed on the backend `bename`. */
static struct hm_model *tiny_model_arch(int parallel, enum hm_act act, uint64_t seed,
                                       enum hm_mixer arch, int64_t F, const char *bename)
{
    struct hm_config c;
    hm_config_defaults(&c);
    c.vocab_size = 11;
    c.hidden_size = 8;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 2;
    c.intermediate_size = 12;
    c.rotary_pct = 0.5;
    c.use_parallel_residual = parallel;
    c.hidden_act = act;
    c.mixer = arch;
    c.feature_dim = F;
    cr_assert_eq(hm_config_finish(&c, NULL), HM_OK);
    struct hm_model *m;
    cr_assert_eq(hm_model_new(&c, &m, NULL), HM_OK);
    hm_rotary_inv_freq(m->inv_freq, c.rotary_dims, c.rotary_emb_base);
    struct hm_tensor_view *v;
    int64_t nv = hm_model_views(m, &v);
    uint64_t s = seed;
    for (int64_t i = 0; i < nv; i++)
        for (int64_t j = 0; j < v[i].numel; j++)
            v[i].data[j] = (float)(v[i].spec.group == HM_PG_NORM && strstr(v[i].spec.name, "weight")
                                       ? 1 + 0.2 * tu_rand_normal(&s)
                                       : 0.4 * tu_rand_normal(&s));
    /* HedgeMamba: decays A ≤ 0 as the optimizer keeps them */
    for (int64_t l = 0; arch == HM_MIXER_HEDGEMAMBA && l < c.num_hidden_layers; l++)
        for (int64_t h = 0; h < c.num_attention_heads; h++)
            m->layers[l].A[h] = -fabsf(m->layers[l].A[h]) * 2;
    free(v);
    struct hm_error err;
    cr_assert_eq(hm_model_place(m, hm_backend_get(bename), &err), HM_OK, "%s", err.msg);
    return m;
}

static struct hm_model *tiny_model(int parallel, enum hm_act act, uint64_t seed,
                                   const char *bename)
{
    return tiny_model_arch(parallel, act, seed, HM_MIXER_SOFTMAX, 0, bename);
}

static void whole_model_check_arch(int parallel, enum hm_act act, const char *bename, int freeze,
                                   enum hm_mixer arch)
{
    struct hm_model *m = tiny_model_arch(parallel, act, 5 + (uint64_t)parallel, arch, 3, bename);
    const int64_t B = 2, T = 5;
    int32_t tok[12] = {1, 4, 9, 10, 0, 3, 7, 7, 2, 5, 6, 8};
    /* fast: the output layer in passes of 3, 3, 3, 1 rows (ref: one pass) */
    struct hm_train_opts o = {.B = B, .T = T, .accum = 1, .freeze_embeddings = freeze,
                              .kd_temperature = 1, .ce_weight = 1,
                              .ce_rows = strcmp(bename, "fast") ? 0 : 3};
    struct hm_trainer *tr;
    cr_assert_eq(hm_trainer_new(m, hm_backend_get(bename), &o, &tr, NULL), HM_OK);
    hm_trainer_zero_grad(tr);
    struct hm_train_loss loss;
    cr_assert_eq(hm_trainer_accumulate(tr, tok, NULL, &loss, NULL), HM_OK);
    int64_t n;
    double *w = tu_ref_params_from_model(m, &n);
    struct whole c = {&m->cfg, tok, B, T};
    double ref = whole_loss(w, &c);
    cr_expect(fabs(loss.ce - ref) < 1e-5 * fabs(ref), "loss %.9g vs ref %.9g", loss.ce, ref);
    double *g = malloc(sizeof(double) * (size_t)n);
    tu_fd_grad(g, w, n, whole_loss, &c);
    /* the grads model has the same layout: compare view by view */
    struct hm_tensor_view *gv;
    int64_t nv = hm_model_views(hm_trainer_grads(tr), &gv), off = 0;
    for (int64_t i = 0; i < nv; i++) {
        int is_frozen = freeze && gv[i].spec.group == HM_PG_EMBED;
        if (is_frozen) { /* a frozen tensor has no gradient storage at all */
            cr_expect_null(gv[i].data, "frozen %s has a gradient slot", gv[i].spec.name);
        } else {
            check_close(gv[i].spec.name, gv[i].data, g + off, gv[i].numel);
        }
        off += gv[i].numel;
    }
    int64_t np;
    hm_trainer_params(tr, &np);
    cr_expect_eq(np, freeze ? nv - 2 : nv);
    free(gv);
    free(g);
    free(w);
    hm_trainer_free(tr);
    hm_model_free(m);
}

static void whole_model_check(int parallel, enum hm_act act, const char *bename, int freeze)
{
    whole_model_check_arch(parallel, act, bename, freeze, HM_MIXER_SOFTMAX);
}

/* Hedgehog (contract §2): feature maps + linear attention in the full model, as
 * hm-finetune trains the paper's Hedgehog baseline. */
Test(backward, whole_model_hedgehog_ref) { whole_model_check_arch(1, HM_ACT_GELU, "ref", 0, HM_MIXER_HEDGEHOG); }
Test(backward, whole_model_hedgehog_fast) { whole_model_check_arch(0, HM_ACT_GELU, "fast", 0, HM_MIXER_HEDGEHOG); }

/* HedgeMamba (contract §3): conv, Δ, the scan with the ones channel, D, gate —
 * stage 2's full model, every component active. */
Test(backward, whole_model_hedgemamba_ref) { whole_model_check_arch(1, HM_ACT_GELU, "ref", 1, HM_MIXER_HEDGEMAMBA); }
Test(backward, whole_model_hedgemamba_fast) { whole_model_check_arch(0, HM_ACT_GELU_TANH, "fast", 0, HM_MIXER_HEDGEMAMBA); }

Test(backward, whole_model_parallel_ref) { whole_model_check(1, HM_ACT_GELU, "ref", 0); }
Test(backward, whole_model_parallel_fast) { whole_model_check(1, HM_ACT_GELU, "fast", 0); }
Test(backward, whole_model_sequential_tanh) { whole_model_check(0, HM_ACT_GELU_TANH, "fast", 0); }
Test(backward, whole_model_frozen_embeddings) { whole_model_check(1, HM_ACT_GELU, "fast", 1); }

/* One SGD step exposes the gradient: (w0 − w1) / η = the test's own FD gradient. */
Test(backward, sgd_step_exposes_gradient)
{
    struct hm_model *m = tiny_model(1, HM_ACT_GELU, 9, "fast");
    const int64_t B = 2, T = 5;
    int32_t tok[12] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8};
    int64_t n;
    double *w0 = tu_ref_params_from_model(m, &n), *g = malloc(sizeof(double) * (size_t)n);
    struct whole c = {&m->cfg, tok, B, T};
    tu_fd_grad(g, w0, n, whole_loss, &c);
    struct hm_train_opts o = {.B = B, .T = T, .accum = 1, .kd_temperature = 1, .ce_weight = 1};
    struct hm_trainer *tr;
    cr_assert_eq(hm_trainer_new(m, hm_backend_get("fast"), &o, &tr, NULL), HM_OK);
    hm_trainer_zero_grad(tr);
    struct hm_train_loss loss;
    cr_assert_eq(hm_trainer_accumulate(tr, tok, NULL, &loss, NULL), HM_OK);
    int64_t np;
    const struct hm_opt_param *p = hm_trainer_params(tr, &np);
    struct hm_optim_cfg oc;
    hm_optim_cfg_defaults(&oc, HM_OPTIM_SGD, 0);
    struct hm_optim opt;
    cr_assert_eq(hm_optim_init(&opt, &oc, hm_backend_get("fast"), p, np, NULL), HM_OK);
    const double eta = 0.5;
    double sq = 0;
    hm_grad_sqnorm(hm_backend_get("fast"), p, np, &sq);
    hm_optim_step(&opt, hm_backend_get("fast"), (struct hm_opt_param *)p, np, eta, sqrt(sq));
    double *w1 = tu_ref_params_from_model(m, &n);
    double mx = 1, err = 0;
    for (int64_t i = 0; i < n; i++) {
        double exposed = (w0[i] - w1[i]) / eta;
        mx = fabs(g[i]) > mx ? fabs(g[i]) : mx;
        err = fabs(exposed - g[i]) > err ? fabs(exposed - g[i]) : err;
    }
    /* w1 is rounded to fp32: |w0| ≤ ~2 gives ≤ 1.2e-7 / 0.5 extra error */
    cr_expect(err <= TOL * mx, "exposed gradient off by %g (scale %g)", err, mx);
    hm_optim_release(&opt);
    free(w0);
    free(w1);
    free(g);
    hm_trainer_free(tr);
    hm_model_free(m);
}

/* Distillation (hm-finetune --kd-teacher, contract §3 and §10):
 * loss = c·CE + w·τ²·KL(p_t ‖ p_s), p = softmax(logits/τ), per token
 * averaged over B·T; the student's gradient against finite differences of
 * the same objective computed here in double from the independent reference
 * logits of both models. */
struct kd { const struct hm_config *cfg; const int32_t *tok; int64_t B, T; const double *tlog;
            double w, c, tau; };

static double kd_loss(const double *wts, void *ctx)
{
    struct kd *k = ctx;
    const int64_t N = k->B * k->T, V = k->cfg->vocab_size;
    double *sl = malloc(sizeof(double) * (size_t)(N * V));
    double ce = tu_ref_neox_loss(k->cfg, wts, k->tok, k->B, k->T, sl), kl = 0;
    for (int64_t r = 0; r < N; r++) {
        const double *s = sl + r * V, *t = k->tlog + r * V;
        double ms = s[0] / k->tau, mt = t[0] / k->tau, zs = 0, zt = 0;
        for (int64_t v = 1; v < V; v++) {
            ms = s[v] / k->tau > ms ? s[v] / k->tau : ms;
            mt = t[v] / k->tau > mt ? t[v] / k->tau : mt;
        }
        for (int64_t v = 0; v < V; v++) {
            zs += exp(s[v] / k->tau - ms);
            zt += exp(t[v] / k->tau - mt);
        }
        for (int64_t v = 0; v < V; v++) {
            double lt = t[v] / k->tau - mt - log(zt), ls = s[v] / k->tau - ms - log(zs);
            kl += exp(lt) * (lt - ls);
        }
    }
    free(sl);
    return k->c * ce + k->w * k->tau * k->tau * kl / (double)N;
}

/* One micro-batch of a student distilled from a teacher at CE weight c,
 * KD weight w and temperature tau. */
static void distillation_check(double c, double w, double tau)
{
    struct hm_model *student = tiny_model(1, HM_ACT_GELU, 31, "fast"),
                    *teacher = tiny_model(1, HM_ACT_GELU, 32, "fast");
    const int64_t B = 2, T = 5, V = student->cfg.vocab_size;
    int32_t tok[12] = {2, 7, 1, 8, 2, 8, 1, 8, 2, 8, 4, 5};
    struct hm_train_opts o = {.B = B, .T = T, .accum = 1, .kd_teacher = teacher, .kd_weight = w,
                              .kd_temperature = tau, .ce_weight = c};
    struct hm_trainer *tr;
    cr_assert_eq(hm_trainer_new(student, hm_backend_get("fast"), &o, &tr, NULL), HM_OK);
    hm_trainer_zero_grad(tr);
    struct hm_train_loss loss;
    cr_assert_eq(hm_trainer_accumulate(tr, tok, NULL, &loss, NULL), HM_OK);
    int64_t n, nt;
    double *ws = tu_ref_params_from_model(student, &n), *wt = tu_ref_params_from_model(teacher, &nt);
    double *tlog = malloc(sizeof(double) * (size_t)(B * T * V));
    tu_ref_neox_loss(&teacher->cfg, wt, tok, B, T, tlog);
    struct kd k = {&student->cfg, tok, B, T, tlog, w, c, tau};
    double ref = kd_loss(ws, &k);
    cr_expect(fabs(loss.total - ref) < 1e-5 * fabs(ref), "c CE + w KL %.9g vs ref %.9g",
              loss.total, ref);
    cr_expect(loss.total == c * loss.ce + w * loss.kl, "the total is not c CE + w KL");
    cr_expect(loss.ce > 1, "CE is measured at weight %g: %g", c, loss.ce);
    cr_expect(loss.kl > 0, "KL between different models is positive");
    double *g = malloc(sizeof(double) * (size_t)n);
    tu_fd_grad(g, ws, n, kd_loss, &k);
    struct hm_tensor_view *gv;
    int64_t nv = hm_model_views(hm_trainer_grads(tr), &gv), off = 0;
    for (int64_t i = 0; i < nv; i++) {
        check_close(gv[i].spec.name, gv[i].data, g + off, gv[i].numel);
        off += gv[i].numel;
    }
    free(gv);
    free(g);
    free(tlog);
    free(ws);
    free(wt);
    hm_trainer_free(tr);
    hm_model_free(student);
    hm_model_free(teacher);
}

Test(backward, whole_model_distillation)
{
    distillation_check(1, 0.7, 1);
}

/* contract §10: a temperature, and pure distillation (c = 0: the gradient
 * is the KD term's alone while CE is still measured) */
Test(backward, whole_model_distillation_temperature)
{
    distillation_check(0.5, 0.7, 2);
    distillation_check(0, 1, 0.5);
}
