/* map_decay.c — the decay of hm-map-ssm --decay-from (see map_decay.h). */
#include "map_decay.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_forward.h"
#include "params.h"

enum hm_status hm_decay_teacher_load(const struct hm_ckpt *ck, const struct hm_backend *be,
                                     struct hm_model **out, struct hm_error *err)
{
    *out = NULL;
    struct hm_config sc = *hm_ckpt_config(ck);
    if (sc.mixer == HM_MIXER_HEDGEMAMBA)
        return hm_error_set(err, HM_ERR_INVALID,
                            "a hedgemamba model holds no softmax teacher to measure");
    /* the reverse of hm-linearize's student config: the same skeleton with
     * the teacher's softmax mixer (the feature maps are simply not read) */
    sc.mixer = HM_MIXER_SOFTMAX;
    sc.feature_dim = 0;
    enum hm_status st = hm_config_finish(&sc, err);
    /* it is only run: its bf16/f16 layer weights stay narrow */
    return st == HM_OK ? hm_model_load_narrow(ck, &sc, be, out, err) : st;
}

/* ---- the statistic ------------------------------------------------------------ */

struct dist_ctx {
    const struct hm_backend *be;
    int64_t nh, p;
    float *qkv;    /* [T, n_h, 3, p] host copy of the layer's rotated q, k, v */
    double *sc;    /* [n_h, T] one query row's scores, per head */
    double *sum;   /* [L, n_h] Σ over windows and t of the row's mean distance */
};

/* The teacher's hook: the causal softmax of layer l's q, k (plain double
 * loops) and its mean distance per head, added to c->sum. Heads run in
 * parallel, each summed in one order: the same bits for any thread count. */
static enum hm_status on_layer(void *ctx, int64_t l, const float *a_in, const float *qkv,
                               const float *attn_out, int64_t T, int64_t d,
                               struct hm_error *err)
{
    struct dist_ctx *c = ctx;
    (void)a_in, (void)attn_out, (void)d;
    const int64_t nh = c->nh, p = c->p, row = 3 * nh * p;
    hm_backend_download(c->be, c->qkv, qkv, sizeof(float) * (size_t)(T * row));
    enum hm_status st = hm_backend_sync(c->be, err);
    if (st != HM_OK)
        return st;
    const double scale = 1.0 / sqrt((double)p);
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t h = 0; h < nh; h++) {
        double *sc = c->sc + h * T;
        double total = 0;
        for (int64_t t = 0; t < T; t++) {
            const float *q = c->qkv + t * row + h * 3 * p;
            double mx = -INFINITY;
            for (int64_t s = 0; s <= t; s++) {
                const float *k = c->qkv + s * row + h * 3 * p + p;
                double dot = 0;
                for (int64_t i = 0; i < p; i++)
                    dot += (double)q[i] * (double)k[i];
                sc[s] = dot * scale;
                mx = sc[s] > mx ? sc[s] : mx;
            }
            double z = 0, zd = 0;
            for (int64_t s = 0; s <= t; s++) {
                double e = exp(sc[s] - mx);
                z += e;
                zd += e * (double)(t - s);
            }
            total += zd / z;
        }
        c->sum[l * nh + h] += total;
    }
    return HM_OK;
}

enum hm_status hm_decay_attn_distance(const struct hm_model *m, const struct hm_backend *be,
                                      const int32_t *tokens, int64_t W, int64_t T, double *md,
                                      struct hm_error *err)
{
    const struct hm_config *c = &m->cfg;
    if (c->mixer != HM_MIXER_SOFTMAX)
        return hm_error_set(err, HM_ERR_INVALID,
                            "the attention distance is a softmax teacher's, not %s's",
                            hm_arch_name(c));
    if (W < 1 || T < 1)
        return hm_error_set(err, HM_ERR_INVALID, "no windows to measure");
    const int64_t L = c->num_hidden_layers, nh = c->num_attention_heads, p = c->head_dim;
    struct dist_ctx x = {be, nh, p, malloc(sizeof(float) * (size_t)(T * 3 * nh * p)),
                         malloc(sizeof(double) * (size_t)(nh * T)), md};
    struct hm_model_hooks hooks = {.on_layer = on_layer, .ctx = &x, .stop_after_last_hook = 1};
    struct hm_model_ws ws;
    hm_model_ws_init(&ws);
    enum hm_status st = HM_OK;
    if (!x.qkv || !x.sc)
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory for the attention statistics");
    for (int64_t i = 0; i < L * nh; i++)
        md[i] = 0;
    for (int64_t w = 0; w < W && st == HM_OK; w++)
        st = hm_model_hidden(m, be, tokens + w * T, T, &ws, &hooks, err);
    for (int64_t i = 0; i < L * nh; i++)
        md[i] /= (double)W * (double)T;
    hm_model_ws_release(&ws);
    free(x.qkv);
    free(x.sc);
    return st;
}

/* ---- the decay ---------------------------------------------------------------- */

double hm_decay_mean_distance(double alpha, int64_t T)
{
    double s0 = 0, s1 = 0, ak = 1, total = 0; /* Σ α^k, Σ k α^k, α^k */
    for (int64_t t = 0; t < T; t++) {
        s0 += ak;
        s1 += (double)t * ak;
        total += s1 / s0;
        ak *= alpha;
    }
    return T > 0 ? total / (double)T : 0.0;
}

double hm_decay_alpha(double md, int64_t T)
{
    double lo = HM_DECAY_ALPHA_MIN, hi = 1.0;
    if (!(md < hm_decay_mean_distance(hi, T)))
        return hi;
    double glo = hm_decay_mean_distance(lo, T), ghi = hm_decay_mean_distance(hi, T);
    if (md <= glo)
        return lo;
    /* G is increasing: keep G(lo) < md ≤ G(hi) until no double lies between */
    for (;;) {
        double mid = lo + 0.5 * (hi - lo);
        if (!(mid > lo && mid < hi))
            break;
        double g = hm_decay_mean_distance(mid, T);
        if (g < md)
            lo = mid, glo = g;
        else
            hi = mid, ghi = g;
    }
    return md - glo <= ghi - md ? lo : hi;
}

enum hm_status hm_decay_reset(struct hm_model *m, int64_t *layer, int64_t *head,
                              struct hm_error *err)
{
    const struct hm_config *c = &m->cfg;
    *layer = *head = -1;
    if (c->mixer != HM_MIXER_HEDGEMAMBA)
        return hm_error_set(err, HM_ERR_INVALID, "a %s model has no decay A", hm_arch_name(c));
    const int64_t L = c->num_hidden_layers, nh = c->num_attention_heads;
    for (int64_t l = 0; l < L; l++)
        for (int64_t h = 0; h < nh; h++) {
            float a = m->layers[l].A[h];
            if (isfinite(a) && a <= 0.0f)
                continue;
            char name[HM_PARAM_NAME_MAX];
            hm_param_name(c, HM_SLOT_A, l, name, sizeof name);
            *layer = l;
            *head = h;
            return hm_error_set(err, HM_ERR_INVALID,
                                "tensor '%s' head %lld is %g: a decay from teacher statistics "
                                "must be finite and <= 0", name, (long long)h, (double)a);
        }
    for (int64_t l = 0; l < L; l++)
        memset(m->layers[l].A, 0, sizeof(float) * (size_t)nh);
    return HM_OK;
}
