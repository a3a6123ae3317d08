/* fast_attention.c — fast CPU rotary and causal softmax attention.
 * Semantics: kernels/backend.h; checked against ref_attention.c.
 *
 * Attention is one OpenMP parallel region: one task per (head, block of
 * HM_ATT_BQ query rows), largest blocks first, no BLAS inside.
 * A task copies K[0:end] of its head transposed and zero-padded into the
 * thread's workspace (Kt [p, end rounded up to 16]); scores are register
 * tiles of 4 query rows × 16 keys accumulated over the p head dims; then the
 * softmax in place and P·V as stride-1 axpys over the head dims. Workspace
 * per thread: Kt + 4 score rows + acc (per_thread_floats), sized for the
 * current thread count; a smaller one means fewer threads.
 *
 * Measured alternative (rejected): per head and 128-row block, S = Q K^T and
 * P V as two multi-threaded sgemm calls on the strided qkv with an OpenMP
 * softmax between them. On the shared 2-core machine it was 4x slower
 * (160m shapes, T = 512: ~400 ms vs ~90 ms per layer): 96 small BLAS calls
 * and as many barriers per layer, each paying thread wake-ups.
 *
 * The block kernel is compiled for AVX-512, AVX2+FMA and baseline x86-64
 * (target_clones, chosen at load time) since the project builds for the
 * generic ISA. */
#include <math.h>
#include <omp.h>

#include "cpu_ops.h"
#include "cpu_simd.h"
#include "cpu_vexp.h"

#define HM_ATT_BQ 64

void hm_fast_rotary_forward(HM_CPU_CTX, float *x, int64_t T, int64_t n_h, int64_t r, int64_t row_stride,
                            int64_t head_stride, int64_t pos0, const float *inv_freq)
{
    int64_t half = r / 2;
#pragma omp parallel for schedule(static) if (T * n_h * r >= 32768)
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < half; j++) {
            /* identical rounding to the ref: fp32 angle, cos/sin rounded to fp32 */
            float theta = (float)(pos0 + t) * inv_freq[j];
            float c = (float)cos((double)theta), s = (float)sin((double)theta);
            for (int64_t h = 0; h < n_h; h++) {
                float *v = x + t * row_stride + h * head_stride;
                float a = v[j], b = v[j + half];
                v[j] = a * c - b * s;
                v[j + half] = b * c + a * s;
            }
        }
}

/* The transpose rotation R(θ)^T on a gradient, in place: the ref's angles
 * and rounding, cos/sin once per (position, frequency) instead of per head. */
void hm_fast_rotary_backward(HM_CPU_CTX, float *dx, int64_t T, int64_t n_h, int64_t r,
                             int64_t row_stride, int64_t head_stride, int64_t pos0,
                             const float *inv_freq)
{
    int64_t half = r / 2;
#pragma omp parallel for schedule(static) if (T * n_h * r >= 32768)
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < half; j++) {
            float theta = (float)(pos0 + t) * inv_freq[j];
            float c = (float)cos((double)theta), s = (float)sin((double)theta);
            for (int64_t h = 0; h < n_h; h++) {
                float *v = dx + t * row_stride + h * head_stride;
                float a = v[j], b = v[j + half];
                v[j] = a * c + b * s;
                v[j + half] = b * c - a * s;
            }
        }
}

#define HM_ATT_RB 4  /* query rows per score tile */
#define HM_ATT_KB 16 /* keys per score tile (one AVX-512 vector) */

/* Kt [p, T + KB] + scores [RB, T + KB] + acc [p], rounded up to 64 bytes. */
static int64_t per_thread_floats(int64_t T, int64_t p)
{
    int64_t n = (p + HM_ATT_RB) * (T + HM_ATT_KB) + p;
    return (n + 15) / 16 * 16;
}

size_t hm_fast_attention_ws_size(HM_CPU_CTX, int64_t T, int64_t n_h, int64_t p)
{
    (void)n_h;
    int nt = omp_get_max_threads();
    return sizeof(float) * (size_t)per_thread_floats(T > 0 ? T : 1, p) * (size_t)(nt > 0 ? nt : 1);
}


/* Rows [t0, t1) of head h. my: this thread's workspace.
 * Scores are computed in tiles of RB rows × KB keys held in registers
 * (one load of Kt feeds RB FMAs); keys past a row's own position are
 * computed for the tile but never read. */
HM_CLONES static void att_block(float *out, float *lse, const float *qkv, int64_t T, int64_t n_h,
                                int64_t p, int64_t h, int64_t t0, int64_t t1, float *my)
{
    int64_t d = n_h * p, ld = 3 * d, nk = t1; /* keys 0..t1-1 */
    int64_t nkp = (nk + HM_ATT_KB - 1) / HM_ATT_KB * HM_ATT_KB, sl = T + HM_ATT_KB;
    const float *q = qkv + h * 3 * p, *k = q + p, *v = q + 2 * p;
    float *kt = my, *sc = my + p * sl, *acc = sc + HM_ATT_RB * sl;
    float scale = (float)(1.0 / sqrt((double)p));

    for (int64_t i = 0; i < p; i++) {
        for (int64_t j = 0; j < nk; j++)
            kt[i * nkp + j] = k[j * ld + i];
        for (int64_t j = nk; j < nkp; j++)
            kt[i * nkp + j] = 0.0f;
    }

    for (int64_t t = t0; t < t1; t += HM_ATT_RB) {
        int64_t nr = t1 - t < HM_ATT_RB ? t1 - t : HM_ATT_RB;
        int64_t ntile = (t + nr + HM_ATT_KB - 1) / HM_ATT_KB * HM_ATT_KB; /* <= nkp */
        const float *q0 = q + t * ld;
        const float *q1 = nr > 1 ? q0 + ld : q0, *q2 = nr > 2 ? q0 + 2 * ld : q0;
        const float *q3 = nr > 3 ? q0 + 3 * ld : q0;
        for (int64_t j0 = 0; j0 < ntile; j0 += HM_ATT_KB) {
            float a0[HM_ATT_KB] = {0}, a1[HM_ATT_KB] = {0}, a2[HM_ATT_KB] = {0};
            float a3[HM_ATT_KB] = {0};
            for (int64_t i = 0; i < p; i++) {
                const float *kr = kt + i * nkp + j0;
                float x0 = q0[i], x1 = q1[i], x2 = q2[i], x3 = q3[i];
#pragma omp simd
                for (int jj = 0; jj < HM_ATT_KB; jj++) {
                    a0[jj] += x0 * kr[jj];
                    a1[jj] += x1 * kr[jj];
                    a2[jj] += x2 * kr[jj];
                    a3[jj] += x3 * kr[jj];
                }
            }
#pragma omp simd
            for (int jj = 0; jj < HM_ATT_KB; jj++) {
                sc[j0 + jj] = a0[jj] * scale;
                sc[sl + j0 + jj] = a1[jj] * scale;
                sc[2 * sl + j0 + jj] = a2[jj] * scale;
                sc[3 * sl + j0 + jj] = a3[jj] * scale;
            }
        }
        for (int64_t r = 0; r < nr; r++) {
            float *row = sc + r * sl;
            int64_t n = t + r + 1, tt = t + r;
            float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
            for (int64_t j = 0; j < n; j++)
                mx = row[j] > mx ? row[j] : mx;
            float sum = 0;
#pragma omp simd reduction(+ : sum)
            for (int64_t j = 0; j < n; j++) {
                row[j] = hm_vexpf(row[j] - mx);
                sum += row[j];
            }
            if (lse)
                lse[h * T + tt] = mx + logf(sum);
            for (int64_t i = 0; i < p; i++)
                acc[i] = 0;
            for (int64_t j = 0; j < n; j++) {
                float pj = row[j];
                const float *vr = v + j * ld;
#pragma omp simd
                for (int64_t i = 0; i < p; i++)
                    acc[i] += pj * vr[i];
            }
            float inv = 1.0f / sum;
            float *o = out + tt * d + h * p;
            for (int64_t i = 0; i < p; i++)
                o[i] = acc[i] * inv;
        }
    }
}

void hm_fast_attention_forward(HM_CPU_CTX, float *out, float *lse, const float *qkv, int64_t T,
                               int64_t n_h, int64_t p, void *ws, size_t ws_size)
{
    if (T <= 0 || n_h <= 0 || p <= 0)
        return;
    int64_t per = per_thread_floats(T, p);
    int64_t avail = (int64_t)(ws_size / (sizeof(float) * (size_t)per));
    int nthr = omp_get_max_threads();
    if (avail < nthr)
        nthr = (int)(avail > 0 ? avail : 1); /* precondition: ws holds one thread */
    int64_t nblk = (T + HM_ATT_BQ - 1) / HM_ATT_BQ, ntask = n_h * nblk;
    if (ntask < nthr)
        nthr = (int)ntask;
    float *base = ws;
#pragma omp parallel num_threads(nthr)
    {
        float *my = base + (int64_t)omp_get_thread_num() * per;
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < ntask; task++) {
            int64_t blk = nblk - 1 - task / n_h, h = task % n_h; /* big blocks first */
            int64_t t0 = blk * HM_ATT_BQ, t1 = t0 + HM_ATT_BQ < T ? t0 + HM_ATT_BQ : T;
            att_block(out, lse, qkv, T, n_h, p, h, t0, t1, my);
        }
    }
}
