/* ref_llama.c — see ref_llama.h. Naive double loops from contract §1b, §2, §3. */
#include "ref_llama.h"
#include "model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend.h"
#include "checkpoint.h"
#include "dtype.h"

#define RL_EPS_LIN 1e-6 /* ε of the linear attention / HedgeMamba normalizer */

/* Sizes of one model, derived here from the raw config fields (0 = default). */
struct rl_dims {
    int64_t d, nh, nkv, p, I, V, L, F, K;
    int64_t qd, kd, C;   /* n_h·p, n_kv·p, (n_h + 2 n_kv)·p */
    double eps;
};

/* One layer's tensors (NULL where absent or unused). */
struct rl_layer {
    const double *ln1, *ln2;                         /* [d] */
    const double *wq, *bq, *wk, *bk, *wv, *bv;       /* [n_h p, d] / [n_kv p, d], biases */
    const double *wo, *bo;                           /* [d, n_h p], [d] */
    const double *wg, *bg, *wu, *bu, *wd, *bd;       /* gate/up [I, d], down [d, I] */
    const double *fq, *fqb, *fk, *fkb;               /* [n_h, p, F], [n_h, F] */
    const double *cw, *cb;                           /* conv1d [C, K], [C] */
    const double *dtw, *dtb, *A, *D;                 /* [n_h, d], [n_h], [n_h], [n_h] */
    const double *gw, *gb;                           /* gate_proj [n_h p, d], [n_h p] */
};

static void rl_dims_init(struct rl_dims *m, const struct hm_config *c)
{
    m->d = c->hidden_size;
    m->nh = c->num_attention_heads;
    m->nkv = c->num_key_value_heads > 0 ? c->num_key_value_heads : m->nh;
    m->p = c->head_dim > 0 ? c->head_dim : m->d / m->nh;
    m->I = c->intermediate_size;
    m->V = c->vocab_size;
    m->L = c->num_hidden_layers;
    m->F = c->feature_dim > 0 ? c->feature_dim : m->p;
    m->K = c->conv_width;
    m->qd = m->nh * m->p;
    m->kd = m->nkv * m->p;
    m->C = m->qd + 2 * m->kd;
    m->eps = c->layer_norm_eps;
    if (m->nh % m->nkv || m->p % 2) {
        fprintf(stderr, "ref_llama: n_h %lld not a multiple of n_kv %lld, or odd head_dim %lld\n",
                (long long)m->nh, (long long)m->nkv, (long long)m->p);
        abort();
    }
}

static double *rl_alloc(int64_t n)
{
    double *x = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    if (!x)
        abort();
    return x;
}

/* ---- weights by name ---------------------------------------------------- */

static const double *rl_get(tu_ref_get_fn get, void *ctx, int required, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static const double *rl_get(tu_ref_get_fn get, void *ctx, int required, const char *fmt, ...)
{
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    const double *x = get(ctx, name);
    if (!x && required) {
        fprintf(stderr, "ref_llama: tensor '%s' is missing\n", name);
        abort();
    }
    return x;
}

#define RL_ATT "model.layers.%lld.self_attn."
#define RL_MLP "model.layers.%lld.mlp."

/* The teacher tensors of layer l (biases only when the config has them). */
static void rl_layer_teacher(struct rl_layer *w, const struct hm_config *c, tu_ref_get_fn get,
                             void *ctx, long long l)
{
    const int ab = c->attention_bias, mb = c->mlp_bias;
    memset(w, 0, sizeof *w);
    w->ln1 = rl_get(get, ctx, 1, "model.layers.%lld.input_layernorm.weight", l);
    w->ln2 = rl_get(get, ctx, 1, "model.layers.%lld.post_attention_layernorm.weight", l);
    w->wq = rl_get(get, ctx, 1, RL_ATT "q_proj.weight", l);
    w->wk = rl_get(get, ctx, 1, RL_ATT "k_proj.weight", l);
    w->wv = rl_get(get, ctx, 1, RL_ATT "v_proj.weight", l);
    w->wo = rl_get(get, ctx, 1, RL_ATT "o_proj.weight", l);
    w->bq = ab ? rl_get(get, ctx, 1, RL_ATT "q_proj.bias", l) : NULL;
    w->bk = ab ? rl_get(get, ctx, 1, RL_ATT "k_proj.bias", l) : NULL;
    w->bv = ab ? rl_get(get, ctx, 1, RL_ATT "v_proj.bias", l) : NULL;
    w->bo = ab ? rl_get(get, ctx, 1, RL_ATT "o_proj.bias", l) : NULL;
    w->wg = rl_get(get, ctx, 1, RL_MLP "gate_proj.weight", l);
    w->wu = rl_get(get, ctx, 1, RL_MLP "up_proj.weight", l);
    w->wd = rl_get(get, ctx, 1, RL_MLP "down_proj.weight", l);
    w->bg = mb ? rl_get(get, ctx, 1, RL_MLP "gate_proj.bias", l) : NULL;
    w->bu = mb ? rl_get(get, ctx, 1, RL_MLP "up_proj.bias", l) : NULL;
    w->bd = mb ? rl_get(get, ctx, 1, RL_MLP "down_proj.bias", l) : NULL;
}

static void rl_layer_fmaps(struct rl_layer *w, tu_ref_get_fn get, void *ctx, long long l)
{
    w->fq = rl_get(get, ctx, 1, RL_ATT "feature_map_q.weight", l);
    w->fqb = rl_get(get, ctx, 1, RL_ATT "feature_map_q.bias", l);
    w->fk = rl_get(get, ctx, 1, RL_ATT "feature_map_k.weight", l);
    w->fkb = rl_get(get, ctx, 1, RL_ATT "feature_map_k.bias", l);
}

static void rl_layer_ssm(struct rl_layer *w, tu_ref_get_fn get, void *ctx, long long l)
{
    w->cw = rl_get(get, ctx, 1, RL_ATT "conv1d.weight", l);
    w->cb = rl_get(get, ctx, 1, RL_ATT "conv1d.bias", l);
    w->dtw = rl_get(get, ctx, 1, RL_ATT "dt_proj.weight", l);
    w->dtb = rl_get(get, ctx, 1, RL_ATT "dt_proj.bias", l);
    w->A = rl_get(get, ctx, 1, RL_ATT "A", l);
    w->D = rl_get(get, ctx, 1, RL_ATT "D", l);
    w->gw = rl_get(get, ctx, 1, RL_ATT "gate_proj.weight", l);
    w->gb = rl_get(get, ctx, 1, RL_ATT "gate_proj.bias", l);
}

/* All tensors layer l of a model with this config reads (its layer's mixer:
 * a hybrid's kept layers are softmax). */
static void rl_layer_load(struct rl_layer *w, const struct hm_config *c, tu_ref_get_fn get,
                          void *ctx, int64_t l)
{
    rl_layer_teacher(w, c, get, ctx, (long long)l);
    if (hm_layer_mixer(c, l) != HM_MIXER_SOFTMAX)
        rl_layer_fmaps(w, get, ctx, (long long)l);
    if (hm_layer_mixer(c, l) == HM_MIXER_HEDGEMAMBA)
        rl_layer_ssm(w, get, ctx, (long long)l);
}

/* ---- elementwise pieces ------------------------------------------------- */

/* y [d] = x / sqrt(mean(x²) + eps) * w */
static void rl_rmsnorm(double *y, const double *x, const double *w, int64_t d, double eps)
{
    double ss = 0;
    for (int64_t i = 0; i < d; i++)
        ss += x[i] * x[i];
    const double r = 1.0 / sqrt(ss / (double)d + eps);
    for (int64_t i = 0; i < d; i++)
        y[i] = x[i] * r * w[i];
}

/* y [out] = W [out, in] x [in] + b (b may be NULL) */
static void rl_linear(double *y, const double *x, const double *W, const double *b, int64_t in,
                      int64_t out)
{
    for (int64_t o = 0; o < out; o++) {
        double s = b ? b[o] : 0;
        for (int64_t i = 0; i < in; i++)
            s += W[o * in + i] * x[i];
        y[o] = s;
    }
}

static double rl_silu(double z) { return z / (1 + exp(-z)); }
static double rl_softplus(double u) { return u > 30 ? u : log1p(exp(u)); }

/* φ(x) = [softmax(u), softmax(−u)], u = x W + b: x [p], W [p, F], b [F] → out [2F] */
static void rl_fmap(double *out, const double *x, const double *W, const double *b, int64_t p,
                    int64_t F)
{
    double mx = -INFINITY, mn = INFINITY, sp = 0, sm = 0;
    for (int64_t f = 0; f < F; f++) {
        double u = b[f];
        for (int64_t i = 0; i < p; i++)
            u += x[i] * W[i * F + f];
        out[f] = u;
        mx = u > mx ? u : mx;
        mn = u < mn ? u : mn;
    }
    for (int64_t f = 0; f < F; f++) {
        sp += exp(out[f] - mx);
        sm += exp(mn - out[f]);
    }
    for (int64_t f = 0; f < F; f++) {
        const double u = out[f];
        out[f] = exp(u - mx) / sp;
        out[F + f] = exp(mn - u) / sm;
    }
}

/* ---- rotary ------------------------------------------------------------- */

/* HF _compute_llama3_parameters for one fp32 base frequency, in double. */
static double rl_llama3(const struct hm_config *c, double inv)
{
    const double factor = c->rope_scaling.factor, lo = c->rope_scaling.low_freq_factor;
    const double hi = c->rope_scaling.high_freq_factor;
    const double old = (double)c->rope_scaling.original_max_position_embeddings;
    const double low_freq_wavelen = old / lo, high_freq_wavelen = old / hi;
    const double wavelen = 2 * M_PI / inv;
    double r = wavelen > low_freq_wavelen ? inv / factor : inv;
    const double smooth = (old / wavelen - lo) / (hi - lo);
    const double smoothed = (1 - smooth) * r / factor + smooth * r;
    if (!(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen))
        r = smoothed;
    return r;
}

void tu_ref_llama_inv_freq(const struct hm_config *c, double *inv_freq)
{
    struct rl_dims m;
    rl_dims_init(&m, c);
    for (int64_t j = 0; j < m.p / 2; j++) {
        /* HF: 1.0 / (base ** (arange(0, p, 2).float() / p)), all fp32 */
        const float e = (float)(2 * j) / (float)m.p;
        const float inv = 1.0f / (float)pow(c->rotary_emb_base, (double)e);
        inv_freq[j] = c->rope_scaling.type == HM_ROPE_LLAMA3 ? (float)rl_llama3(c, inv) : inv;
    }
}

/* cs, sn [T, p/2]: fp32 angle (float)pos · inv_freq, fp32 cos and sin. */
static void rl_rope_tables(const struct hm_config *c, const struct rl_dims *m, int64_t T,
                           double *cs, double *sn)
{
    const int64_t h = m->p / 2;
    double *inv = rl_alloc(h);
    tu_ref_llama_inv_freq(c, inv);
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < h; j++) {
            const float th = (float)t * (float)inv[j];
            cs[t * h + j] = (float)cos((double)th);
            sn[t * h + j] = (float)sin((double)th);
        }
    free(inv);
}

/* rotate_half in place on one head vector x [p] at the position of cs, sn [p/2]:
 * y[i] = x[i] cos − x[i+p/2] sin, y[i+p/2] = x[i+p/2] cos + x[i] sin */
static void rl_rotate(double *x, const double *cs, const double *sn, int64_t p)
{
    for (int64_t i = 0; i < p / 2; i++) {
        const double x0 = x[i], x1 = x[i + p / 2];
        x[i] = x0 * cs[i] - x1 * sn[i];
        x[i + p / 2] = x1 * cs[i] + x0 * sn[i];
    }
}

/* ---- mixers --------------------------------------------------------------
 * x [T, C] holds per position [q (n_h p) | k (n_kv p) | v (n_kv p)], head-major
 * inside each part; query head h reads key/value head g(h) = h / (n_h / n_kv). */

static const double *rl_q(const struct rl_dims *m, const double *x, int64_t t, int64_t h)
{
    return x + t * m->C + h * m->p;
}
static const double *rl_k(const struct rl_dims *m, const double *x, int64_t t, int64_t h)
{
    return x + t * m->C + m->qd + (h / (m->nh / m->nkv)) * m->p;
}
static const double *rl_v(const struct rl_dims *m, const double *x, int64_t t, int64_t h)
{
    return x + t * m->C + m->qd + m->kd + (h / (m->nh / m->nkv)) * m->p;
}

/* y [T, n_h p] = causal softmax(q_h k_g^T / sqrt p) v_g, per query head */
static void rl_softmax_attn(const struct rl_dims *m, const double *x, int64_t T, double *y)
{
    const int64_t p = m->p;
    double *sc = rl_alloc(T);
    for (int64_t h = 0; h < m->nh; h++)
        for (int64_t t = 0; t < T; t++) {
            double mx = -INFINITY, se = 0;
            for (int64_t s = 0; s <= t; s++) {
                double dot = 0;
                for (int64_t i = 0; i < p; i++)
                    dot += rl_q(m, x, t, h)[i] * rl_k(m, x, s, h)[i];
                sc[s] = dot / sqrt((double)p);
                mx = sc[s] > mx ? sc[s] : mx;
            }
            for (int64_t s = 0; s <= t; s++)
                se += exp(sc[s] - mx);
            for (int64_t i = 0; i < p; i++) {
                double acc = 0;
                for (int64_t s = 0; s <= t; s++)
                    acc += exp(sc[s] - mx) / se * rl_v(m, x, s, h)[i];
                y[t * m->qd + h * p + i] = acc;
            }
        }
    free(sc);
}

/* φq, φk [T, n_h, 2F]: head h's maps on rotated q_h and rotated k_g(h) */
static void rl_features(const struct rl_dims *m, const struct rl_layer *w, const double *x,
                        int64_t T, double *pq, double *pk)
{
    const int64_t p = m->p, F = m->F;
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < m->nh; h++) {
            rl_fmap(pq + (t * m->nh + h) * 2 * F, rl_q(m, x, t, h), w->fq + h * p * F,
                    w->fqb + h * F, p, F);
            rl_fmap(pk + (t * m->nh + h) * 2 * F, rl_k(m, x, t, h), w->fk + h * p * F,
                    w->fkb + h * F, p, F);
        }
}

/* Hedgehog: y_t = Σ_{s≤t} (φq_t·φk_s) v_s / (Σ_{s≤t} φq_t·φk_s + ε), per query head */
static void rl_hedgehog_attn(const struct rl_dims *m, const struct rl_layer *w, const double *x,
                             int64_t T, double *y)
{
    const int64_t p = m->p, F2 = 2 * m->F;
    double *pq = rl_alloc(T * m->nh * F2), *pk = rl_alloc(T * m->nh * F2);
    rl_features(m, w, x, T, pq, pk);
    for (int64_t h = 0; h < m->nh; h++)
        for (int64_t t = 0; t < T; t++) {
            double den = 0, *yt = y + t * m->qd + h * p;
            for (int64_t i = 0; i < p; i++)
                yt[i] = 0;
            for (int64_t s = 0; s <= t; s++) {
                double a = 0;
                for (int64_t f = 0; f < F2; f++)
                    a += pq[(t * m->nh + h) * F2 + f] * pk[(s * m->nh + h) * F2 + f];
                den += a;
                for (int64_t i = 0; i < p; i++)
                    yt[i] += a * rl_v(m, x, s, h)[i];
            }
            for (int64_t i = 0; i < p; i++)
                yt[i] /= den + RL_EPS_LIN;
        }
    free(pq);
    free(pk);
}

/* One HedgeMamba head h over the sequence, literally (contract §3 step 7):
 * S_t = α_t S_{t−1} + Δ_t B_t [v_t; 1]^T, n = C_t^T S_t, y = n[:p] / (n[p] + ε) + D v_t.
 *   a [T, d] layer input, pq/pk [T, n_h, 2F], S [2F, p+1] scratch, y [T, n_h p] */
static void rl_ssm_head(const struct rl_dims *m, const struct rl_layer *w, const double *a,
                        const double *x, const double *pq, const double *pk, int64_t T,
                        int64_t h, double *S, double *y)
{
    const int64_t p = m->p, F2 = 2 * m->F, P1 = p + 1;
    memset(S, 0, sizeof(double) * (size_t)(F2 * P1));
    for (int64_t t = 0; t < T; t++) {
        double u;
        rl_linear(&u, a + t * m->d, w->dtw + h * m->d, w->dtb + h, m->d, 1);
        const double dt = rl_softplus(u), al = exp(dt * w->A[h]);
        const double *vt = rl_v(m, x, t, h), *B = pk + (t * m->nh + h) * F2;
        const double *Cq = pq + (t * m->nh + h) * F2;
        for (int64_t f = 0; f < F2; f++) {
            for (int64_t i = 0; i < p; i++)
                S[f * P1 + i] = al * S[f * P1 + i] + dt * B[f] * vt[i];
            S[f * P1 + p] = al * S[f * P1 + p] + dt * B[f];
        }
        double den = 0;
        for (int64_t f = 0; f < F2; f++)
            den += Cq[f] * S[f * P1 + p];
        for (int64_t i = 0; i < p; i++) {
            double n = 0;
            for (int64_t f = 0; f < F2; f++)
                n += Cq[f] * S[f * P1 + i];
            y[t * m->qd + h * p + i] = n / (den + RL_EPS_LIN) + w->D[h] * vt[i];
        }
    }
}

/* HedgeMamba after the conv and rotary: every head's recurrence, then the gate
 * y ⊙ silu(a Wg^T + bg). a [T, d], x [T, C], y [T, n_h p] */
static void rl_hedgemamba_mix(const struct rl_dims *m, const struct rl_layer *w, const double *a,
                              const double *x, int64_t T, double *y)
{
    const int64_t F2 = 2 * m->F;
    double *pq = rl_alloc(T * m->nh * F2), *pk = rl_alloc(T * m->nh * F2);
    double *S = rl_alloc(F2 * (m->p + 1)), *g = rl_alloc(m->qd);
    rl_features(m, w, x, T, pq, pk);
    for (int64_t h = 0; h < m->nh; h++)
        rl_ssm_head(m, w, a, x, pq, pk, T, h, S, y);
    for (int64_t t = 0; t < T; t++) {
        rl_linear(g, a + t * m->d, w->gw, w->gb, m->d, m->qd);
        for (int64_t ch = 0; ch < m->qd; ch++)
            y[t * m->qd + ch] *= rl_silu(g[ch]);
    }
    free(pq);
    free(pk);
    free(S);
    free(g);
}

/* Depthwise causal conv in place over x [T, C]:
 * c[t, ch] = b[ch] + Σ_{k<K} w[ch, k] x[t − (K−1) + k, ch] (zero before t = 0). */
static void rl_conv(const struct rl_dims *m, const struct rl_layer *w, double *x, int64_t T)
{
    const int64_t C = m->C, K = m->K;
    double *c = rl_alloc(T * C);
    for (int64_t t = 0; t < T; t++)
        for (int64_t ch = 0; ch < C; ch++) {
            double acc = w->cb[ch];
            for (int64_t k = 0; k < K; k++) {
                const int64_t src = t - (K - 1) + k;
                if (src >= 0)
                    acc += w->cw[ch * K + k] * x[src * C + ch];
            }
            c[t * C + ch] = acc;
        }
    memcpy(x, c, sizeof(double) * (size_t)(T * C));
    free(c);
}

/* The token mixer of one layer: a [T, d] (= RMSNorm1(h)) → o [T, d] (after o_proj). */
static void rl_mixer(const struct hm_config *c, const struct rl_dims *m, enum hm_mixer mixer,
                     const struct rl_layer *w, const double *a, int64_t T, double *o)
{
    const int64_t p = m->p, h2 = p / 2;
    double *x = rl_alloc(T * m->C), *y = rl_alloc(T * m->qd);
    double *cs = rl_alloc(T * h2), *sn = rl_alloc(T * h2);
    for (int64_t t = 0; t < T; t++) {
        double *xt = x + t * m->C;
        rl_linear(xt, a + t * m->d, w->wq, w->bq, m->d, m->qd);
        rl_linear(xt + m->qd, a + t * m->d, w->wk, w->bk, m->d, m->kd);
        rl_linear(xt + m->qd + m->kd, a + t * m->d, w->wv, w->bv, m->d, m->kd);
    }
    if (mixer == HM_MIXER_HEDGEMAMBA)
        rl_conv(m, w, x, T);
    rl_rope_tables(c, m, T, cs, sn);
    for (int64_t t = 0; t < T; t++)
        for (int64_t hd = 0; hd < m->nh + m->nkv; hd++) /* q heads, then k heads */
            rl_rotate(x + t * m->C + hd * p, cs + t * h2, sn + t * h2, p);
    if (mixer == HM_MIXER_SOFTMAX)
        rl_softmax_attn(m, x, T, y);
    else if (mixer == HM_MIXER_HEDGEHOG)
        rl_hedgehog_attn(m, w, x, T, y);
    else
        rl_hedgemamba_mix(m, w, a, x, T, y);
    for (int64_t t = 0; t < T; t++)
        rl_linear(o + t * m->d, y + t * m->qd, w->wo, w->bo, m->qd, m->d);
    free(x);
    free(y);
    free(cs);
    free(sn);
}

/* h [T, d] += o [T, d], then h += down(silu(gate(n)) ⊙ up(n)), n = RMSNorm2(h) */
static void rl_residual_mlp(const struct rl_dims *m, const struct rl_layer *w, double *h,
                            const double *o, int64_t T)
{
    double *n = rl_alloc(m->d), *g = rl_alloc(m->I), *u = rl_alloc(m->I), *dn = rl_alloc(m->d);
    for (int64_t t = 0; t < T; t++) {
        double *ht = h + t * m->d;
        for (int64_t i = 0; i < m->d; i++)
            ht[i] += o[t * m->d + i];
        rl_rmsnorm(n, ht, w->ln2, m->d, m->eps);
        rl_linear(g, n, w->wg, w->bg, m->d, m->I);
        rl_linear(u, n, w->wu, w->bu, m->d, m->I);
        for (int64_t i = 0; i < m->I; i++)
            g[i] = rl_silu(g[i]) * u[i];
        rl_linear(dn, g, w->wd, w->bd, m->I, m->d);
        for (int64_t i = 0; i < m->d; i++)
            ht[i] += dn[i];
    }
    free(n);
    free(g);
    free(u);
    free(dn);
}

/* a [T, d] = RMSNorm1(h) of every position */
static void rl_norm_rows(const struct rl_dims *m, const double *w, const double *h, int64_t T,
                         double *a)
{
    for (int64_t t = 0; t < T; t++)
        rl_rmsnorm(a + t * m->d, h + t * m->d, w, m->d, m->eps);
}

/* h [T, d] = embed_tokens[tokens] */
static void rl_embed(const struct rl_dims *m, tu_ref_get_fn get, void *ctx,
                     const int32_t *tokens, int64_t T, double *h)
{
    const double *emb = rl_get(get, ctx, 1, "model.embed_tokens.weight");
    for (int64_t t = 0; t < T; t++) {
        if (tokens[t] < 0 || tokens[t] >= m->V) {
            fprintf(stderr, "ref_llama: token %d out of range\n", (int)tokens[t]);
            abort();
        }
        memcpy(h + t * m->d, emb + (int64_t)tokens[t] * m->d, sizeof(double) * (size_t)m->d);
    }
}

void tu_ref_llama_logits(const struct hm_config *c, tu_ref_get_fn get, void *ctx,
                         const int32_t *tokens, int64_t T, double *logits)
{
    struct rl_dims m;
    rl_dims_init(&m, c);
    double *h = rl_alloc(T * m.d), *a = rl_alloc(T * m.d), *o = rl_alloc(T * m.d);
    rl_embed(&m, get, ctx, tokens, T, h);
    for (int64_t l = 0; l < m.L; l++) {
        struct rl_layer w;
        rl_layer_load(&w, c, get, ctx, l);
        rl_norm_rows(&m, w.ln1, h, T, a);
        rl_mixer(c, &m, hm_layer_mixer(c, l), &w, a, T, o);
        rl_residual_mlp(&m, &w, h, o, T);
    }
    const double *nw = rl_get(get, ctx, 1, "model.norm.weight");
    const double *head = c->tie_word_embeddings ? rl_get(get, ctx, 1, "model.embed_tokens.weight")
                                                : rl_get(get, ctx, 1, "lm_head.weight");
    rl_norm_rows(&m, nw, h, T, a);
    for (int64_t t = 0; t < T; t++)
        rl_linear(logits + t * m.V, a + t * m.d, head, NULL, m.d, m.V);
    free(h);
    free(a);
    free(o);
}

double tu_ref_llama_loss(const struct hm_config *c, tu_ref_get_fn get, void *ctx,
                         const int32_t *tokens, int64_t B, int64_t T)
{
    const int64_t V = c->vocab_size;
    double *lg = rl_alloc(T * V), loss = 0;
    for (int64_t b = 0; b < B; b++) {
        const int32_t *tok = tokens + b * (T + 1);
        tu_ref_llama_logits(c, get, ctx, tok, T, lg);
        for (int64_t t = 0; t < T; t++) {
            const double *r = lg + t * V;
            double mx = r[0], se = 0;
            for (int64_t v = 1; v < V; v++)
                mx = r[v] > mx ? r[v] : mx;
            for (int64_t v = 0; v < V; v++)
                se += exp(r[v] - mx);
            loss += mx + log(se) - r[tok[t + 1]];
        }
    }
    free(lg);
    return loss / (double)(B * T);
}

/* mean over t of 1 − cos(x_t, y_t); x, y [T, d] */
static double rl_mean_one_minus_cos(const double *x, const double *y, int64_t T, int64_t d)
{
    double acc = 0;
    for (int64_t t = 0; t < T; t++) {
        double xy = 0, xx = 0, yy = 0;
        for (int64_t i = 0; i < d; i++) {
            xy += x[t * d + i] * y[t * d + i];
            xx += x[t * d + i] * x[t * d + i];
            yy += y[t * d + i] * y[t * d + i];
        }
        acc += 1 - xy / (sqrt(xx) * sqrt(yy));
    }
    return acc / (double)T;
}

double tu_ref_llama_stage1_loss(const struct hm_config *tc, tu_ref_get_fn get_teacher,
                                void *tctx, const struct hm_config *sc,
                                tu_ref_get_fn get_student, void *sctx,
                                const int32_t *tokens, int64_t T)
{
    struct rl_dims m, ms;
    rl_dims_init(&m, tc);
    ms = m;
    ms.F = sc->feature_dim > 0 ? sc->feature_dim : m.p;
    double *h = rl_alloc(T * m.d), *a = rl_alloc(T * m.d);
    double *ot = rl_alloc(T * m.d), *os = rl_alloc(T * m.d), loss = 0;
    rl_embed(&m, get_teacher, tctx, tokens, T, h);
    for (int64_t l = 0; l < m.L; l++) {
        struct rl_layer w;
        rl_layer_teacher(&w, tc, get_teacher, tctx, (long long)l);
        rl_layer_fmaps(&w, get_student, sctx, (long long)l);
        rl_norm_rows(&m, w.ln1, h, T, a);
        rl_mixer(tc, &m, HM_MIXER_SOFTMAX, &w, a, T, ot);
        rl_mixer(tc, &ms, HM_MIXER_HEDGEHOG, &w, a, T, os);
        loss += rl_mean_one_minus_cos(os, ot, T, m.d);
        rl_residual_mlp(&m, &w, h, ot, T);
    }
    free(h);
    free(a);
    free(ot);
    free(os);
    return loss / (double)m.L;
}

double tu_ref_llama_align_loss(const struct hm_config *tc, tu_ref_get_fn get_teacher,
                               void *tctx, const struct hm_config *sc,
                               tu_ref_get_fn get_student, void *sctx, const int32_t *tokens,
                               int64_t B, int64_t T, int mse)
{
    struct rl_dims m, ms;
    rl_dims_init(&m, tc);
    rl_dims_init(&ms, sc);
    double *h = rl_alloc(T * m.d), *a = rl_alloc(T * m.d);
    double *ot = rl_alloc(T * m.d), *os = rl_alloc(T * m.d), loss = 0;
    int64_t aligned = 0; /* a hybrid's kept layers are the teacher's: not aligned */
    for (int64_t l = 0; l < m.L; l++)
        aligned += hm_layer_mixer(sc, l) != HM_MIXER_SOFTMAX;
    for (int64_t b = 0; b < B; b++) {
        rl_embed(&m, get_teacher, tctx, tokens + b * (T + 1), T, h);
        for (int64_t l = 0; l < m.L; l++) {
            struct rl_layer w, ws;
            rl_layer_teacher(&w, tc, get_teacher, tctx, (long long)l);
            if (hm_layer_mixer(sc, l) == HM_MIXER_SOFTMAX) {
                rl_norm_rows(&m, w.ln1, h, T, a);
                rl_mixer(tc, &m, HM_MIXER_SOFTMAX, &w, a, T, ot);
                rl_residual_mlp(&m, &w, h, ot, T);
                continue;
            }
            rl_layer_load(&ws, sc, get_student, sctx, l);
            if (mse == 2) { /* whole blocks: the student's own block on the teacher's h_l */
                double *hs = rl_alloc(T * m.d), *as = rl_alloc(T * m.d), e = 0;
                memcpy(hs, h, sizeof(double) * (size_t)(T * m.d));
                rl_norm_rows(&ms, ws.ln1, hs, T, as);
                rl_mixer(sc, &ms, hm_layer_mixer(sc, l), &ws, as, T, os);
                rl_residual_mlp(&ms, &ws, hs, os, T);
                rl_norm_rows(&m, w.ln1, h, T, a);
                rl_mixer(tc, &m, HM_MIXER_SOFTMAX, &w, a, T, ot);
                rl_residual_mlp(&m, &w, h, ot, T);
                for (int64_t i = 0; i < T * m.d; i++)
                    e += (hs[i] - h[i]) * (hs[i] - h[i]);
                loss += e / (double)(T * m.d);
                free(hs);
                free(as);
                continue;
            }
            rl_norm_rows(&m, w.ln1, h, T, a);
            rl_mixer(tc, &m, HM_MIXER_SOFTMAX, &w, a, T, ot);
            rl_mixer(sc, &ms, hm_layer_mixer(sc, l), &ws, a, T, os);
            if (mse) {
                double e = 0;
                for (int64_t i = 0; i < T * m.d; i++)
                    e += (os[i] - ot[i]) * (os[i] - ot[i]);
                loss += e / (double)(T * m.d);
            } else {
                loss += rl_mean_one_minus_cos(os, ot, T, m.d);
            }
            rl_residual_mlp(&m, &w, h, ot, T);
        }
    }
    free(h);
    free(a);
    free(ot);
    free(os);
    return loss / (double)(aligned * B);
}

/* ---- tables --------------------------------------------------------------- */

#define RL_MAX_DIMS 8

struct rl_entry {
    char *name;
    enum hm_dtype dtype;
    int ndim;
    int64_t shape[RL_MAX_DIMS];
    int64_t numel;
    double *data;
};

struct tu_ref_table {
    struct rl_entry *e;
    int64_t n, cap;
};

struct tu_ref_table *tu_ref_table_new(void)
{
    struct tu_ref_table *t = calloc(1, sizeof *t);
    if (!t)
        abort();
    return t;
}

void tu_ref_table_free(struct tu_ref_table *t)
{
    if (!t)
        return;
    for (int64_t i = 0; i < t->n; i++) {
        free(t->e[i].name);
        free(t->e[i].data);
    }
    free(t->e);
    free(t);
}

int64_t tu_ref_table_find(const struct tu_ref_table *t, const char *name)
{
    for (int64_t i = 0; i < t->n; i++)
        if (strcmp(t->e[i].name, name) == 0)
            return i;
    return -1;
}

void tu_ref_table_put(struct tu_ref_table *t, const char *name, enum hm_dtype dtype, int ndim,
                      const int64_t *shape, const double *data)
{
    if (ndim < 0 || ndim > RL_MAX_DIMS)
        abort();
    int64_t i = tu_ref_table_find(t, name);
    if (i < 0) {
        if (t->n == t->cap) {
            t->cap = t->cap ? 2 * t->cap : 64;
            t->e = realloc(t->e, sizeof *t->e * (size_t)t->cap);
            if (!t->e)
                abort();
        }
        i = t->n++;
        t->e[i].name = strdup(name);
    } else {
        free(t->e[i].data);
    }
    struct rl_entry *x = &t->e[i];
    x->dtype = dtype;
    x->ndim = ndim;
    x->numel = 1;
    for (int k = 0; k < ndim; k++) {
        x->shape[k] = shape[k];
        x->numel *= shape[k];
    }
    x->data = rl_alloc(x->numel);
    memcpy(x->data, data, sizeof(double) * (size_t)x->numel);
}

const double *tu_ref_table_get(void *table, const char *name)
{
    const struct tu_ref_table *t = table;
    const int64_t i = tu_ref_table_find(t, name);
    return i < 0 ? NULL : t->e[i].data;
}

int64_t tu_ref_table_count(const struct tu_ref_table *t) { return t->n; }

int64_t tu_ref_table_at(const struct tu_ref_table *t, int64_t i, const char **name,
                        enum hm_dtype *dtype, int *ndim, const int64_t **shape,
                        const double **data)
{
    const struct rl_entry *x = &t->e[i];
    if (name)
        *name = x->name;
    if (dtype)
        *dtype = x->dtype;
    if (ndim)
        *ndim = x->ndim;
    if (shape)
        *shape = x->shape;
    if (data)
        *data = x->data;
    return x->numel;
}

/* dst [n] ← src stored little-endian as dt; -1 for a dtype with no numeric meaning */
static int rl_to_double(const void *src, enum hm_dtype dt, int64_t n, double *dst)
{
    const unsigned char *b = src;
    const size_t es = hm_dtype_size(dt);
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *q = b + (size_t)i * es;
        union { float f; double d; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
                uint64_t u64; int64_t i64; int8_t i8; uint8_t u8; } v;
        memcpy(&v, q, es);
        switch (dt) {
        case HM_DTYPE_F32: dst[i] = v.f; break;
        case HM_DTYPE_F64: dst[i] = v.d; break;
        case HM_DTYPE_F16: dst[i] = hm_f16_to_f32(v.u16); break;
        case HM_DTYPE_BF16: dst[i] = hm_bf16_to_f32(v.u16); break;
        case HM_DTYPE_BOOL:
        case HM_DTYPE_U8: dst[i] = v.u8; break;
        case HM_DTYPE_I8: dst[i] = v.i8; break;
        case HM_DTYPE_I16: dst[i] = v.i16; break;
        case HM_DTYPE_U16: dst[i] = v.u16; break;
        case HM_DTYPE_I32: dst[i] = v.i32; break;
        case HM_DTYPE_U32: dst[i] = v.u32; break;
        case HM_DTYPE_I64: dst[i] = (double)v.i64; break;
        case HM_DTYPE_U64: dst[i] = (double)v.u64; break;
        default: return -1;
        }
    }
    return 0;
}

static int rl_table_add_raw(struct tu_ref_table *t, const char *name, enum hm_dtype dt,
                            int ndim, const int64_t *shape, int64_t numel, const void *bytes)
{
    if (ndim > RL_MAX_DIMS) {
        fprintf(stderr, "ref_llama: tensor '%s' has %d dims (at most %d)\n", name, ndim,
                RL_MAX_DIMS);
        return -1;
    }
    double *v = rl_alloc(numel);
    int rc = rl_to_double(bytes, dt, numel, v);
    if (rc == 0)
        tu_ref_table_put(t, name, dt, ndim, shape, v);
    free(v);
    return rc;
}

/* A bare safetensors file (no config needed). */
static struct tu_ref_table *rl_table_from_st(const char *path)
{
    struct hm_st_file *f;
    struct hm_error err;
    if (hm_st_open(path, &f, &err) != HM_OK) {
        fprintf(stderr, "ref_llama: cannot read '%s': %s\n", path, err.msg);
        return NULL;
    }
    struct tu_ref_table *t = tu_ref_table_new();
    for (int64_t i = 0; i < hm_st_n_tensors(f); i++) {
        const struct hm_st_tensor *x = hm_st_tensor_at(f, i);
        if (rl_table_add_raw(t, x->name, x->dtype, x->ndim, x->shape, x->numel,
                             hm_st_data_view(f, i)) != 0) {
            tu_ref_table_free(t);
            t = NULL;
            break;
        }
    }
    hm_st_close(f);
    return t;
}

struct tu_ref_table *tu_ref_table_from_file(const char *path)
{
    struct hm_ckpt *ck;
    struct hm_error err;
    struct stat sb;
    if (hm_ckpt_open(path, &ck, &err) != HM_OK) {
        if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode))
            return rl_table_from_st(path); /* e.g. no config beside it */
        fprintf(stderr, "ref_llama: cannot read '%s': %s\n", path, err.msg);
        return NULL;
    }
    struct tu_ref_table *t = tu_ref_table_new();
    for (int64_t i = 0; i < hm_ckpt_n_tensors(ck); i++) {
        const struct hm_ckpt_tensor *x = hm_ckpt_tensor_at(ck, i);
        if (rl_table_add_raw(t, x->name, x->dtype, x->ndim, x->shape, x->numel,
                             hm_ckpt_data_view(ck, i)) != 0) {
            tu_ref_table_free(t);
            t = NULL;
            break;
        }
    }
    hm_ckpt_close(ck);
    return t;
}

struct tu_ref_table *tu_ref_table_from_model(const struct hm_model *m)
{
    struct tu_ref_table *t = tu_ref_table_new();
    for (int64_t i = 0; i < m->n_views; i++) {
        const struct hm_tensor_view *v = &m->views[i];
        double *d = malloc(sizeof(double) * (size_t)(v->numel > 0 ? v->numel : 1));
        const float *data = v->data;
        float *host = NULL;
        if (m->be) { /* placed: read the backend's memory through a download */
            host = malloc(sizeof(float) * (size_t)(v->numel > 0 ? v->numel : 1));
            hm_backend_download(m->be, host, v->data, sizeof(float) * (size_t)v->numel);
            data = host;
        }
        for (int64_t k = 0; k < v->numel; k++)
            d[k] = data[k];
        free(host);
        tu_ref_table_put(t, v->spec.name, HM_DTYPE_F32, v->spec.ndim, v->spec.shape, d);
        free(d);
    }
    return t;
}
