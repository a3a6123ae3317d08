#include "ref_neox.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "model_views.h"
#include "params.h"

double *tu_ref_params_from_model(const struct hm_model *m, int64_t *n)
{
    struct hm_tensor_view *v;
    int64_t nv = hm_model_views(m, &v), total = 0;
    for (int64_t i = 0; i < nv; i++)
        total += v[i].numel;
    double *w = malloc(sizeof(double) * (size_t)total);
    int64_t k = 0;
    for (int64_t i = 0; i < nv; i++) {
        const float *data = v[i].data;
        float *host = NULL;
        if (m->be) { /* placed: read the backend's memory through a download */
            host = malloc(sizeof(float) * (size_t)(v[i].numel > 0 ? v[i].numel : 1));
            hm_backend_download(m->be, host, v[i].data, sizeof(float) * (size_t)v[i].numel);
            data = host;
        }
        for (int64_t j = 0; j < v[i].numel; j++)
            w[k++] = data[j];
        free(host);
    }
    free(v);
    *n = total;
    return w;
}

struct W {
    const double *emb, *lnf_w, *lnf_b, *out;
    const double **ly; /* per layer: 12 tensors in spec order */
};

static void layernorm(double *y, const double *x, const double *w, const double *b, int64_t d,
                      double eps)
{
    double mu = 0, var = 0;
    for (int64_t i = 0; i < d; i++)
        mu += x[i];
    mu /= (double)d;
    for (int64_t i = 0; i < d; i++)
        var += (x[i] - mu) * (x[i] - mu);
    var /= (double)d;
    for (int64_t i = 0; i < d; i++)
        y[i] = (x[i] - mu) / sqrt(var + eps) * w[i] + b[i];
}

static double gelu(double x, int tanh_form)
{
    if (!tanh_form)
        return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

/* y[out] = W[out,in] x + b */
static void linear(double *y, const double *x, const double *W, const double *b, int64_t in,
                   int64_t out)
{
    for (int64_t o = 0; o < out; o++) {
        double s = b ? b[o] : 0;
        for (int64_t i = 0; i < in; i++)
            s += W[o * in + i] * x[i];
        y[o] = s;
    }
}

/* contract §1 rotary on q and k of one position s of a fused qkv row [3d]:
 * fp32 inv_freq and angle, cos/sin rounded to fp32, the rest in double. */
static void rotary_row(double *row, int64_t s, const struct hm_config *c)
{
    const int64_t nh = c->num_attention_heads, p = c->head_dim, r = c->rotary_dims;
    for (int64_t hh = 0; hh < nh; hh++)
        for (int sel = 0; sel < 2; sel++) {
            double *x = row + hh * 3 * p + sel * p;
            for (int64_t j = 0; j < r / 2; j++) {
                float e = (float)(2 * j) / (float)r;
                float inv = 1.0f / (float)pow(c->rotary_emb_base, (double)e);
                float th = (float)s * inv;
                double cs = (float)cos((double)th), sn = (float)sin((double)th);
                double x0 = x[j], x1 = x[j + r / 2];
                x[j] = x0 * cs - x1 * sn;
                x[j + r / 2] = x1 * cs + x0 * sn;
            }
        }
}

/* Causal softmax attention of one sequence, per head, in double:
 * att[i, h·p + k] = Σ_{j≤i} softmax_j(q_i·k_j / sqrt p) v_j[k].
 *   att: [T, d]  qkv: [T, 3d] fused per head (rotated)  sc: [T] scratch */
static void softmax_attention(double *att, const double *qkv, int64_t T, int64_t nh, int64_t p,
                              double *sc)
{
    const int64_t d = nh * p;
    for (int64_t hh = 0; hh < nh; hh++)
        for (int64_t i = 0; i < T; i++) {
            double mx = -INFINITY, se = 0;
            for (int64_t j = 0; j <= i; j++) {
                double s = 0;
                for (int64_t k = 0; k < p; k++)
                    s += qkv[i * 3 * d + hh * 3 * p + k] * qkv[j * 3 * d + hh * 3 * p + p + k];
                sc[j] = s / sqrt((double)p);
                mx = sc[j] > mx ? sc[j] : mx;
            }
            for (int64_t j = 0; j <= i; j++)
                se += exp(sc[j] - mx);
            for (int64_t k = 0; k < p; k++) {
                double acc = 0;
                for (int64_t j = 0; j <= i; j++)
                    acc += exp(sc[j] - mx) / se * qkv[j * 3 * d + hh * 3 * p + 2 * p + k];
                att[i * d + hh * p + k] = acc;
            }
        }
}

/* φ = [softmax(u), softmax(−u)], u = x W + b; x [p], W [p, F], b [F] → out [2F] */
static void fmap(double *out, const double *x, const double *W, const double *b, int64_t p,
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
        double u = out[f];
        out[f] = exp(u - mx) / sp;
        out[F + f] = exp(mn - u) / sm;
    }
}

double tu_ref_neox_loss(const struct hm_config *c, const double *w, const int32_t *tokens,
                        int64_t B, int64_t T, double *logits_out)
{
    struct hm_param_spec *specs;
    int64_t ns = hm_param_specs(c, &specs);
    const double **ptr = malloc(sizeof(double *) * (size_t)ns);
    int64_t off = 0;
    for (int64_t i = 0; i < ns; i++) {
        ptr[i] = w + off;
        int64_t n = 1;
        for (int k = 0; k < specs[i].ndim; k++)
            n *= specs[i].shape[k];
        off += n;
    }
    const int64_t d = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    const int64_t L = c->num_hidden_layers, nh = c->num_attention_heads, p = c->head_dim;
    /* spec order: embed_in, per layer 12 tensors, lnf w, lnf b, embed_out */
    /* per layer: ln1 w,b ln2 w,b qkv w,b dense w,b [fq w,b fk w,b] fc1 w,b fc2 w,b */
    /* hedgemamba adds: conv w,b dt w,b A D gate w,b (after the feature maps) */
    const int is_hm = c->mixer == HM_MIXER_HEDGEMAMBA;
    const int is_hh = c->mixer == HM_MIXER_HEDGEHOG || is_hm; /* has feature maps */
    const int64_t K = 12 + (is_hh ? 4 : 0) + (is_hm ? 8 : 0), F = c->feature_dim, F2 = 2 * F;
    const int64_t CW = c->conv_width;
    double *xraw = is_hm ? malloc(sizeof(double) * (size_t)(T * 3 * d)) : NULL;
    double *aall = is_hm ? malloc(sizeof(double) * (size_t)(T * d)) : NULL;
    double *S = is_hm ? malloc(sizeof(double) * (size_t)(F2 * (p + 1))) : NULL;
    const double *emb = ptr[0], *lnfw = ptr[1 + K * L], *lnfb = ptr[2 + K * L];
    const double *wout = ptr[3 + K * L];
    double *pq = is_hh ? malloc(sizeof(double) * (size_t)(T * F2)) : NULL;
    double *pk = is_hh ? malloc(sizeof(double) * (size_t)(T * F2)) : NULL;
    double *h = calloc((size_t)(T * d), sizeof(double)), *a = malloc(sizeof(double) * d);
    double *qkv = malloc(sizeof(double) * (size_t)(T * 3 * d));
    double *att = malloc(sizeof(double) * (size_t)(T * d)), *o = malloc(sizeof(double) * d);
    double *a2 = malloc(sizeof(double) * d), *mh = malloc(sizeof(double) * I);
    double *mo = malloc(sizeof(double) * d), *t = malloc(sizeof(double) * d);
    double *hn = malloc(sizeof(double) * (size_t)(T * d)), *lg = malloc(sizeof(double) * V);
    double *sc = malloc(sizeof(double) * (size_t)T);
    double loss = 0;
    for (int64_t b = 0; b < B; b++) {
        const int32_t *tok = tokens + b * (T + 1);
        for (int64_t s = 0; s < T; s++)
            memcpy(h + s * d, emb + (int64_t)tok[s] * d, sizeof(double) * d);
        for (int64_t l = 0; l < L; l++) {
            const double **q = ptr + 1 + K * l;
            const double **mq = q + (K - 12); /* mq[8..11]: fc1 w,b fc2 w,b */
            for (int64_t s = 0; s < T; s++) {
                layernorm(a, h + s * d, q[0], q[1], d, c->layer_norm_eps);
                if (is_hm) {
                    /* qkv before the conv; the rotary comes after the conv, below */
                    linear(xraw + s * 3 * d, a, q[4], q[5], d, 3 * d);
                    memcpy(aall + s * d, a, sizeof(double) * d);
                    continue;
                }
                linear(qkv + s * 3 * d, a, q[4], q[5], d, 3 * d);
                rotary_row(qkv + s * 3 * d, s, c);
            }
            if (is_hm) {
                /* causal depthwise conv over the 3d channels, then rotary */
                for (int64_t s = 0; s < T; s++)
                    for (int64_t ch = 0; ch < 3 * d; ch++) {
                        double acc = q[13][ch];
                        for (int64_t k = 0; k < CW; k++) {
                            int64_t src = s - (CW - 1) + k;
                            if (src >= 0)
                                acc += q[12][ch * CW + k] * xraw[src * 3 * d + ch];
                        }
                        qkv[s * 3 * d + ch] = acc;
                    }
                for (int64_t s = 0; s < T; s++)
                    rotary_row(qkv + s * 3 * d, s, c);
            }
            for (int64_t hd = 0; is_hh && hd < nh; hd++) {
                /* Hedgehog: φ on rotated q, k, then causal normalized linear attention */
                for (int64_t s = 0; s < T; s++) {
                    fmap(pq + s * F2, qkv + s * 3 * d + hd * 3 * p, q[8] + hd * p * F,
                         q[9] + hd * F, p, F);
                    fmap(pk + s * F2, qkv + s * 3 * d + hd * 3 * p + p, q[10] + hd * p * F,
                         q[11] + hd * F, p, F);
                }
                if (is_hm) {
                    /* S_t = α_t S_{t−1} + Δ_t B_t [v_t; 1]^T, y_t = n[:p] / (n[p] + ε) + D v_t,
                     * Δ_t = softplus(a_t Wdt^T + bdt), α_t = exp(Δ_t A), then the SiLU gate */
                    memset(S, 0, sizeof(double) * (size_t)(F2 * (p + 1)));
                    for (int64_t t2 = 0; t2 < T; t2++) {
                        double u = q[15][hd];
                        for (int64_t i2 = 0; i2 < d; i2++)
                            u += q[14][hd * d + i2] * aall[t2 * d + i2];
                        double dt = u > 30 ? u : log1p(exp(u)), al = exp(dt * q[16][hd]);
                        const double *vt = qkv + t2 * 3 * d + hd * 3 * p + 2 * p;
                        for (int64_t f = 0; f < F2; f++) {
                            for (int64_t k = 0; k < p; k++)
                                S[f * (p + 1) + k] = al * S[f * (p + 1) + k] + dt * pk[t2 * F2 + f] * vt[k];
                            S[f * (p + 1) + p] = al * S[f * (p + 1) + p] + dt * pk[t2 * F2 + f];
                        }
                        double den = 0;
                        for (int64_t f = 0; f < F2; f++)
                            den += pq[t2 * F2 + f] * S[f * (p + 1) + p];
                        for (int64_t k = 0; k < p; k++) {
                            double n = 0;
                            for (int64_t f = 0; f < F2; f++)
                                n += pq[t2 * F2 + f] * S[f * (p + 1) + k];
                            double y = n / (den + 1e-6) + q[17][hd] * vt[k];
                            double z = q[19][hd * p + k];
                            for (int64_t i2 = 0; i2 < d; i2++)
                                z += q[18][(hd * p + k) * d + i2] * aall[t2 * d + i2];
                            att[t2 * d + hd * p + k] = y * z / (1 + exp(-z));
                        }
                    }
                    continue;
                }
                for (int64_t i = 0; i < T; i++) {
                    double den = 0;
                    for (int64_t k = 0; k < p; k++)
                        att[i * d + hd * p + k] = 0;
                    for (int64_t j = 0; j <= i; j++) {
                        double aij = 0;
                        for (int64_t f = 0; f < F2; f++)
                            aij += pq[i * F2 + f] * pk[j * F2 + f];
                        den += aij;
                        for (int64_t k = 0; k < p; k++)
                            att[i * d + hd * p + k] += aij * qkv[j * 3 * d + hd * 3 * p + 2 * p + k];
                    }
                    for (int64_t k = 0; k < p; k++)
                        att[i * d + hd * p + k] /= den + 1e-6;
                }
            }
            if (!is_hh)
                softmax_attention(att, qkv, T, nh, p, sc);
            for (int64_t s = 0; s < T; s++) {
                const double *hs = h + s * d;
                linear(o, att + s * d, q[6], q[7], d, d);
                const double *min = hs;
                if (!c->use_parallel_residual) {
                    for (int64_t i = 0; i < d; i++)
                        t[i] = o[i] + hs[i];
                    min = t;
                }
                layernorm(a2, min, q[2], q[3], d, c->layer_norm_eps);
                linear(mh, a2, mq[8], mq[9], d, I);
                for (int64_t i = 0; i < I; i++)
                    mh[i] = gelu(mh[i], c->hidden_act != HM_ACT_GELU);
                linear(mo, mh, mq[10], mq[11], I, d);
                for (int64_t i = 0; i < d; i++)
                    hn[s * d + i] = c->use_parallel_residual ? mo[i] + o[i] + hs[i] : mo[i] + t[i];
            }
            memcpy(h, hn, sizeof(double) * (size_t)(T * d));
        }
        for (int64_t s = 0; s < T; s++) {
            layernorm(a, h + s * d, lnfw, lnfb, d, c->layer_norm_eps);
            linear(lg, a, wout, NULL, d, V);
            if (logits_out)
                memcpy(logits_out + (b * T + s) * V, lg, sizeof(double) * V);
            double mx = lg[0], se = 0;
            for (int64_t v = 1; v < V; v++)
                mx = lg[v] > mx ? lg[v] : mx;
            for (int64_t v = 0; v < V; v++)
                se += exp(lg[v] - mx);
            loss += mx + log(se) - lg[tok[s + 1]];
        }
    }
    free(h); free(a); free(qkv); free(att); free(o); free(a2); free(mh); free(mo); free(t);
    free(hn); free(lg); free(sc); free(ptr); free(specs); free(pq); free(pk);
    free(xraw); free(aall); free(S);
    return loss / (double)(B * T);
}

/* pointers to every tensor of w in spec order; owned array */
static const double **spec_ptrs(const struct hm_config *c, const double *w)
{
    struct hm_param_spec *specs;
    int64_t ns = hm_param_specs(c, &specs);
    const double **ptr = malloc(sizeof(double *) * (size_t)ns);
    int64_t off = 0;
    for (int64_t i = 0; i < ns; i++) {
        ptr[i] = w + off;
        int64_t n = 1;
        for (int k = 0; k < specs[i].ndim; k++)
            n *= specs[i].shape[k];
        off += n;
    }
    free(specs);
    return ptr;
}

void tu_ref_neox_layers(const struct hm_config *c, const double *w, const int32_t *tok,
                        int64_t T, double *qkv_out, double *o_out)
{
    const double **ptr = spec_ptrs(c, w);
    const int64_t d = c->hidden_size, I = c->intermediate_size, L = c->num_hidden_layers;
    const int64_t nh = c->num_attention_heads, p = c->head_dim;
    double *h = malloc(sizeof(double) * (size_t)(T * d)), *a = malloc(sizeof(double) * d);
    double *att = malloc(sizeof(double) * (size_t)(T * d)), *a2 = malloc(sizeof(double) * d);
    double *mh = malloc(sizeof(double) * I), *mo = malloc(sizeof(double) * d);
    double *t = malloc(sizeof(double) * d), *sc = malloc(sizeof(double) * (size_t)T);
    for (int64_t s = 0; s < T; s++)
        memcpy(h + s * d, ptr[0] + (int64_t)tok[s] * d, sizeof(double) * d);
    for (int64_t l = 0; l < L; l++) {
        const double **q = ptr + 1 + 12 * l;
        double *qkv = qkv_out + l * T * 3 * d, *o = o_out + l * T * d;
        for (int64_t s = 0; s < T; s++) {
            layernorm(a, h + s * d, q[0], q[1], d, c->layer_norm_eps);
            linear(qkv + s * 3 * d, a, q[4], q[5], d, 3 * d);
            rotary_row(qkv + s * 3 * d, s, c);
        }
        softmax_attention(att, qkv, T, nh, p, sc);
        for (int64_t s = 0; s < T; s++) {
            double *hs = h + s * d;
            linear(o + s * d, att + s * d, q[6], q[7], d, d);
            const double *min = hs;
            if (!c->use_parallel_residual) {
                for (int64_t i = 0; i < d; i++)
                    t[i] = o[s * d + i] + hs[i];
                min = t;
            }
            layernorm(a2, min, q[2], q[3], d, c->layer_norm_eps);
            linear(mh, a2, q[8], q[9], d, I);
            for (int64_t i = 0; i < I; i++)
                mh[i] = gelu(mh[i], c->hidden_act != HM_ACT_GELU);
            linear(mo, mh, q[10], q[11], I, d);
            for (int64_t i = 0; i < d; i++)
                hs[i] = c->use_parallel_residual ? mo[i] + o[s * d + i] + hs[i] : mo[i] + t[i];
        }
    }
    free(h); free(a); free(att); free(a2); free(mh); free(mo); free(t); free(sc); free(ptr);
}

double tu_ref_stage1_loss(const struct hm_config *c, const double *w, const double *fm,
                          const double *qkv_all, const double *o_all, int64_t T)
{
    return tu_ref_stage1_loss_obj(c, w, fm, qkv_all, o_all, T, 0);
}

/* attn-ce of one head: Σ_t −Σ_{s≤t} P_ts log(A_ts + 1e-12), P the softmax
 * of the teacher's q·k / sqrt(p), A = φq·φk / (Σ_{s≤t} φq·φk + 1e-6). */
static double attn_ce_head(const double *qkv, const double *pq, const double *pk, int64_t T,
                           int64_t d, int64_t h, int64_t p, int64_t F2)
{
    double *sc = malloc(sizeof(double) * (size_t)T), *e = malloc(sizeof(double) * (size_t)T);
    double total = 0;
    for (int64_t t = 0; t < T; t++) {
        double mx = -INFINITY, z = 0, den = 1e-6;
        for (int64_t s = 0; s <= t; s++) {
            sc[s] = 0;
            e[s] = 0;
            for (int64_t i = 0; i < p; i++)
                sc[s] += qkv[t * 3 * d + h * 3 * p + i] * qkv[s * 3 * d + h * 3 * p + p + i];
            sc[s] /= sqrt((double)p);
            for (int64_t f = 0; f < F2; f++)
                e[s] += pq[t * F2 + f] * pk[s * F2 + f];
            mx = sc[s] > mx ? sc[s] : mx;
            den += e[s];
        }
        for (int64_t s = 0; s <= t; s++)
            z += exp(sc[s] - mx);
        for (int64_t s = 0; s <= t; s++)
            total -= exp(sc[s] - mx) / z * log(e[s] / den + 1e-12);
    }
    free(sc);
    free(e);
    return total;
}

double tu_ref_stage1_loss_obj(const struct hm_config *c, const double *w, const double *fm,
                              const double *qkv_all, const double *o_all, int64_t T,
                              int objective)
{
    struct hm_config tc = *c;
    tc.mixer = HM_MIXER_SOFTMAX;
    const double **ptr = spec_ptrs(&tc, w);
    const int64_t d = c->hidden_size, L = c->num_hidden_layers, nh = c->num_attention_heads;
    const int64_t p = c->head_dim, F = c->feature_dim, F2 = 2 * F;
    const int64_t per_layer = 2 * (nh * p * F + nh * F);
    double *pq = malloc(sizeof(double) * (size_t)(T * F2)), *pk = malloc(sizeof(double) * (size_t)(T * F2));
    double *y = malloc(sizeof(double) * (size_t)(T * d)), *os = malloc(sizeof(double) * d);
    double total = 0;
    for (int64_t l = 0; l < L; l++) {
        const double *qkv = qkv_all + l * T * 3 * d, *o = o_all + l * T * d;
        const double *Wq = fm + l * per_layer, *bq = Wq + nh * p * F;
        const double *Wk = bq + nh * F, *bk = Wk + nh * p * F;
        const double *dw = ptr[1 + 12 * l + 6], *db = ptr[1 + 12 * l + 7];
        for (int64_t h = 0; h < nh; h++) {
            for (int64_t t = 0; t < T; t++) {
                fmap(pq + t * F2, qkv + t * 3 * d + h * 3 * p, Wq + h * p * F, bq + h * F, p, F);
                fmap(pk + t * F2, qkv + t * 3 * d + h * 3 * p + p, Wk + h * p * F, bk + h * F, p, F);
            }
            if (objective == 2) {
                total += attn_ce_head(qkv, pq, pk, T, d, h, p, F2) / (double)nh;
                continue;
            }
            for (int64_t t = 0; t < T; t++) {
                double den = 0;
                for (int64_t i = 0; i < p; i++)
                    y[t * d + h * p + i] = 0;
                for (int64_t s = 0; s <= t; s++) {
                    double a = 0;
                    for (int64_t f = 0; f < F2; f++)
                        a += pq[t * F2 + f] * pk[s * F2 + f];
                    den += a;
                    for (int64_t i = 0; i < p; i++)
                        y[t * d + h * p + i] += a * qkv[s * 3 * d + h * 3 * p + 2 * p + i];
                }
                for (int64_t i = 0; i < p; i++)
                    y[t * d + h * p + i] /= den + 1e-6;
            }
        }
        for (int64_t t = 0; t < T && objective != 2; t++) {
            linear(os, y + t * d, dw, db, d, d);
            if (objective == 1) {
                double se = 0;
                for (int64_t i = 0; i < d; i++)
                    se += (os[i] - o[t * d + i]) * (os[i] - o[t * d + i]);
                total += se / (double)d;
                continue;
            }
            double ab = 0, aa = 0, bb = 0;
            for (int64_t i = 0; i < d; i++) {
                ab += os[i] * o[t * d + i];
                aa += os[i] * os[i];
                bb += o[t * d + i] * o[t * d + i];
            }
            total += 1 - ab / sqrt(aa * bb);
        }
    }
    free(pq); free(pk); free(y); free(os); free(ptr);
    return total / (double)(L * T);
}
