/* model.c — the model of every family × mixer: weights (carved from the one
 * table of params.c), loading, the activation workspace (contract §1). See
 * model.h. The forward pass is in forward/ (forward.c, model_forward.c).
 *
 * Gotchas that have caused bugs:
 *  - real Pythia files hold legacy buffers (attention.bias U8, masked_bias
 *    F16 -inf, rotary_emb.inv_freq); they are never read here. */
#include "model.h"

#include "mixer.h"
#include "model_internal.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where each layer slot of the table lives in struct hm_layer. */
static const size_t layer_slot_off[HM_SLOT_COUNT] = {
    [HM_SLOT_LN1_W] = offsetof(struct hm_layer, ln1_w),
    [HM_SLOT_LN1_B] = offsetof(struct hm_layer, ln1_b),
    [HM_SLOT_LN2_W] = offsetof(struct hm_layer, ln2_w),
    [HM_SLOT_LN2_B] = offsetof(struct hm_layer, ln2_b),
    [HM_SLOT_QKV_W] = offsetof(struct hm_layer, qkv_w),
    [HM_SLOT_QKV_B] = offsetof(struct hm_layer, qkv_b),
    [HM_SLOT_DENSE_W] = offsetof(struct hm_layer, dense_w),
    [HM_SLOT_DENSE_B] = offsetof(struct hm_layer, dense_b),
    [HM_SLOT_FQ_W] = offsetof(struct hm_layer, fq_w),
    [HM_SLOT_FQ_B] = offsetof(struct hm_layer, fq_b),
    [HM_SLOT_FK_W] = offsetof(struct hm_layer, fk_w),
    [HM_SLOT_FK_B] = offsetof(struct hm_layer, fk_b),
    [HM_SLOT_CONV_W] = offsetof(struct hm_layer, conv_w),
    [HM_SLOT_CONV_B] = offsetof(struct hm_layer, conv_b),
    [HM_SLOT_DT_W] = offsetof(struct hm_layer, dt_w),
    [HM_SLOT_DT_B] = offsetof(struct hm_layer, dt_b),
    [HM_SLOT_A] = offsetof(struct hm_layer, A),
    [HM_SLOT_D] = offsetof(struct hm_layer, D),
    [HM_SLOT_GATE_W] = offsetof(struct hm_layer, gate_w),
    [HM_SLOT_GATE_B] = offsetof(struct hm_layer, gate_b),
    [HM_SLOT_FCG_W] = offsetof(struct hm_layer, fcg_w),
    [HM_SLOT_FCG_B] = offsetof(struct hm_layer, fcg_b),
    [HM_SLOT_FC1_W] = offsetof(struct hm_layer, fc1_w),
    [HM_SLOT_FC1_B] = offsetof(struct hm_layer, fc1_b),
    [HM_SLOT_FC2_W] = offsetof(struct hm_layer, fc2_w),
    [HM_SLOT_FC2_B] = offsetof(struct hm_layer, fc2_b),
};

float **hm_model_slot(struct hm_model *m, const struct hm_param_spec *s)
{
    switch (s->slot) {
    case HM_SLOT_EMBED: return &m->embed_in;
    case HM_SLOT_NORMF_W: return &m->lnf_w;
    case HM_SLOT_NORMF_B: return &m->lnf_b;
    case HM_SLOT_HEAD: return &m->embed_out;
    default: return (float **)((char *)&m->layers[s->layer] + layer_slot_off[s->slot]);
    }
}

void hm_model_inv_freq(const struct hm_config *c, float *inv_freq)
{
    const int64_t r = c->rotary_dims;
    hm_rotary_inv_freq(inv_freq, r, c->rotary_emb_base);
    if (c->rope_scaling.type != HM_ROPE_LLAMA3)
        return;
    /* HF _compute_llama3_parameters on fp32 tensors: a Python scalar meets
     * a float tensor in fp32, and scalar / tensor is reciprocal(t) * s. */
    const float factor = (float)c->rope_scaling.factor;
    const float lo = (float)c->rope_scaling.low_freq_factor;
    const float old = (float)c->rope_scaling.original_max_position_embeddings;
    const double old_d = (double)c->rope_scaling.original_max_position_embeddings;
    const float lo_wl = (float)(old_d / c->rope_scaling.low_freq_factor);
    const float hi_wl = (float)(old_d / c->rope_scaling.high_freq_factor);
    const float span = (float)(c->rope_scaling.high_freq_factor - c->rope_scaling.low_freq_factor);
    const float two_pi = (float)(2.0 * M_PI);
    for (int64_t j = 0; j < r / 2; j++) {
        const float f = inv_freq[j];
        const float wl = (1.0f / f) * two_pi;
        float g = wl > lo_wl ? f / factor : f;
        const float smooth = ((1.0f / wl) * old - lo) / span;
        const float smoothed = (1.0f - smooth) * g / factor + smooth * g;
        if (!(wl < hi_wl) && !(wl > lo_wl))
            g = smoothed;
        inv_freq[j] = g;
    }
}

enum hm_status hm_model_build(const struct hm_config *cfg, const unsigned char *narrow,
                                  struct hm_model **out, struct hm_error *err)
{
    *out = NULL;
    const int64_t d = cfg->hidden_size, I = cfg->intermediate_size, V = cfg->vocab_size;
    const int64_t L = cfg->num_hidden_layers, n_h = cfg->num_attention_heads;
    if (d <= 0 || I <= 0 || V <= 0 || L < 0 || n_h <= 0 || cfg->head_dim <= 0 ||
        cfg->num_key_value_heads <= 0 || n_h % cfg->num_key_value_heads ||
        cfg->attn_dim != n_h * cfg->head_dim || cfg->rotary_dims < 0 ||
        cfg->rotary_dims > cfg->head_dim || cfg->rotary_dims % 2 ||
        (cfg->qkv_layout == HM_QKV_FUSED && cfg->attn_dim != d) ||
        !hm_mixer_unit(cfg->mixer) ||
        ((hm_mixers_bufs(cfg) & HM_MIX_FMAP) && cfg->feature_dim < 1) ||
        ((hm_mixers_bufs(cfg) & HM_MIX_SSM) && cfg->conv_width < 1))
        return hm_error_set(err, HM_ERR_INVALID, "inconsistent %s config", hm_arch_name(cfg));
    struct hm_param_spec *specs = NULL;
    const int64_t n = hm_param_specs(cfg, &specs);
    if (n < 0)
        return hm_error_set(err, HM_ERR_NOMEM, "model size overflows");
    int64_t total = 0;
    struct hm_model *m = calloc(1, sizeof *m);
    struct hm_tensor_view *views = calloc((size_t)n + 1, sizeof *views);
    if (!m || !views) {
        free(m);
        free(views);
        free(specs);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory for the model");
    }
    m->views = views;
    m->n_views = n;
    for (int64_t i = 0; i < n; i++) {
        int64_t numel = 1;
        for (int k = 0; k < specs[i].ndim; k++)
            numel *= specs[i].shape[k]; /* checked by hm_param_specs */
        views[i] = (struct hm_tensor_view){.spec = specs[i], .numel = numel};
        if (!(narrow && narrow[i]) && hm_add_i64(total, numel, &total))
            total = INT64_MAX;
    }
    free(specs);
    if (total > (int64_t)(SIZE_MAX / sizeof(float)) / 2) {
        hm_model_free(m);
        return hm_error_set(err, HM_ERR_NOMEM, "model size overflows");
    }
    m->cfg = *cfg;
    m->n_params = total;
    m->storage = calloc((size_t)(total > 0 ? total : 1), sizeof(float));
    m->layers = calloc((size_t)(L > 0 ? L : 1), sizeof *m->layers);
    m->inv_freq = calloc((size_t)(cfg->rotary_dims / 2 + 1), sizeof(float));
    if (!m->storage || !m->layers || !m->inv_freq) {
        hm_model_free(m);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory for %lld model weights",
                            (long long)total);
    }
    /* carve the storage in table order; a slot points at its first tensor */
    float *p = m->storage;
    for (int64_t i = 0; i < n; i++) {
        if (narrow && narrow[i])
            continue;
        views[i].data = p;
        p += views[i].numel;
        float **slot = hm_model_slot(m, &views[i].spec);
        if (!*slot)
            *slot = views[i].data;
    }
    if (cfg->tie_word_embeddings)
        m->embed_out = m->embed_in; /* one tensor, stored once (contract §1b) */
    for (int64_t l = 0; !narrow && l < L; l++) {
        const struct hm_mixer_unit *u = hm_layer_unit(cfg, l);
        if (u->identity)
            u->identity(m, l); /* the mixer's own tensors start at their identity values */
    }
    hm_model_inv_freq(cfg, m->inv_freq);
    *out = m;
    return HM_OK;
}

enum hm_status hm_model_new_without(const struct hm_config *cfg, const unsigned char *skip,
                                    struct hm_model **out, struct hm_error *err)
{
    return hm_model_build(cfg, skip, out, err);
}

enum hm_status hm_model_new(const struct hm_config *cfg, struct hm_model **out,
                            struct hm_error *err)
{
    return hm_model_build(cfg, NULL, out, err);
}

const char *hm_model_first_nonfinite(const struct hm_model *m, int64_t *index)
{
    if (m->scanned) { /* found while loading: its weights are in m->be's memory */
        *index = m->bad_at;
        return m->bad_view < 0 ? NULL : m->views[m->bad_view].spec.name;
    }
    for (int64_t i = 0; i < m->n_views; i++)
        for (int64_t j = 0; m->views[i].data && j < m->views[i].numel; j++)
            if (!isfinite(m->views[i].data[j])) {
                *index = j;
                return m->views[i].spec.name;
            }
    *index = -1;
    return NULL;
}

void hm_model_free(struct hm_model *m)
{
    if (!m)
        return;
    if (m->be) {
        hm_backend_free(m->be, (void **)&m->storage);
        hm_backend_free(m->be, (void **)&m->inv_freq);
    }
    if (m->narrow && !m->base) {
        hm_backend_free(m->be, (void **)&m->narrow->bits);
        hm_backend_free(m->be, (void **)&m->narrow->wide);
        hm_backend_free(m->be, (void **)&m->narrow->tmp);
        hm_backend_free(m->be, (void **)&m->narrow->col_ids);
        free(m->narrow);
    }
    free(m->storage);
    free(m->layers);
    free(m->inv_freq);
    free(m->views);
    free(m);
}

/* Every pointer of m into its storage (views, slots, the tied head) moved
 * from base `from` to base `to`; inv_freq likewise. */
static void rebase(struct hm_model *m, const float *from, float *to, float *inv_freq)
{
    for (int64_t i = 0; i < m->n_views; i++) {
        /* several views may share one slot (llama's q, k, v projections):
         * a slot moves once, while it still points into the old storage */
        float **slot = hm_model_slot(m, &m->views[i].spec);
        if (*slot && *slot >= from && *slot < from + m->n_params)
            *slot = to + (*slot - from);
        if (!m->views[i].narrow && m->views[i].data) /* narrow: the widened layer */
            m->views[i].data = to + (m->views[i].data - from);
    }
    if (m->cfg.tie_word_embeddings)
        m->embed_out = m->embed_in;
    m->storage = to;
    m->inv_freq = inv_freq;
}

enum hm_status hm_model_place(struct hm_model *m, const struct hm_backend *be,
                              struct hm_error *err)
{
    if (m->be == be)
        return HM_OK;
    if (m->narrow)
        return hm_error_set(err, HM_ERR_INVALID, "a model with narrow weights stays on backend "
                            "'%s' (hm_model_load_narrow)", hm_backend_name(m->be));
    /* host memory to host memory (NULL, ref, fast): the buffers are adopted
     * as they are, so the peak stays one copy of the weights */
    if ((!m->be || hm_backend_host_memory(m->be)) && (!be || hm_backend_host_memory(be))) {
        m->be = be;
        return HM_OK;
    }
    const size_t bytes = sizeof(float) * (size_t)(m->n_params > 0 ? m->n_params : 1);
    const size_t fbytes = sizeof(float) * (size_t)(m->cfg.rotary_dims / 2 + 1);
    float *host = m->storage, *hfreq = m->inv_freq;
    if (m->be) { /* from another backend: through host memory */
        host = malloc(bytes);
        hfreq = malloc(fbytes);
        if (!host || !hfreq) {
            free(host);
            free(hfreq);
            return hm_error_set(err, HM_ERR_NOMEM, "out of memory moving the model");
        }
        hm_backend_download(m->be, host, m->storage, bytes);
        hm_backend_download(m->be, hfreq, m->inv_freq, fbytes);
    }
    float *dst = NULL, *dfreq = NULL;
    if (be) {
        dst = hm_backend_alloc_copy(be, host, bytes);
        dfreq = hm_backend_alloc_copy(be, hfreq, fbytes);
    } else {
        dst = host, dfreq = hfreq;
        host = hfreq = NULL; /* kept: they become the model's */
    }
    if (!dst || !dfreq) {
        if (be) {
            hm_backend_free(be, (void **)&dst);
            hm_backend_free(be, (void **)&dfreq);
        }
        if (m->be) {
            free(host);
            free(hfreq);
        }
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory for %lld model weights on "
                            "backend '%s'", (long long)m->n_params,
                            be ? hm_backend_name(be) : "host");
    }
    float *old = m->storage, *oldfreq = m->inv_freq;
    rebase(m, old, dst, dfreq);
    if (m->be) {
        hm_backend_free(m->be, (void **)&old);
        hm_backend_free(m->be, (void **)&oldfreq);
        free(host);
        free(hfreq);
    } else {
        free(old);
        free(oldfreq);
    }
    m->be = be;
    return HM_OK;
}

enum hm_status hm_model_check_tensors(const struct hm_ckpt *ck, struct hm_error *err)
{
    const struct hm_config *cfg = hm_ckpt_config(ck);
    struct hm_param_spec *specs = NULL;
    int64_t ns = hm_param_specs(cfg, &specs), other = 0;
    const char *first = NULL;
    if (ns < 0)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    for (int64_t j = 0; j < hm_ckpt_n_tensors(ck); j++) {
        const char *name = hm_ckpt_tensor_at(ck, j)->name;
        int known = hm_is_ignored_buffer(name);
        for (int64_t i = 0; i < ns && !known; i++)
            known = strcmp(specs[i].name, name) == 0;
        if (!known && other++ == 0)
            first = name;
    }
    free(specs);
    if (!other)
        return HM_OK;
    return hm_error_set(err, HM_ERR_INVALID,
                        "%lld tensor%s not part of a %s model, as its config says (first '%s'): "
                        "the config does not describe these tensors", (long long)other,
                        other == 1 ? " is" : "s are", hm_arch_name(cfg), first);
}

enum hm_status hm_model_load_as(const struct hm_ckpt *ck, const struct hm_config *cfg,
                                struct hm_model **out, struct hm_error *err)
{
    *out = NULL;
    struct hm_model *m = NULL;
    enum hm_status st = hm_model_check_tensors(ck, err);
    if (st != HM_OK)
        return st;
    st = hm_model_new(cfg, &m, err);
    for (int64_t i = 0; st == HM_OK && i < m->n_views; i++) {
        const struct hm_tensor_view *v = &m->views[i];
        st = hm_ckpt_load_f32(ck, v->spec.name, v->spec.ndim, v->spec.shape, v->data, err);
    }
    if (st != HM_OK) {
        hm_model_free(m);
        return st;
    }
    *out = m;
    return HM_OK;
}

enum hm_status hm_model_load(const struct hm_ckpt *ck, struct hm_model **out,
                             struct hm_error *err)
{
    return hm_model_load_as(ck, hm_ckpt_config(ck), out, err);
}

enum hm_status hm_model_check_placed(const struct hm_model *m, const struct hm_backend *be,
                                     struct hm_error *err)
{
    if (m->be == be)
        return HM_OK;
    return hm_error_set(err, HM_ERR_INVALID,
                        "the model's weights are in %s memory, not on backend '%s' "
                        "(hm_model_place)",
                        m->be ? hm_backend_name(m->be) : "host", hm_backend_name(be));
}

/* ---- workspace ------------------------------------------------------------ */

void hm_model_ws_init(struct hm_model_ws *ws) { memset(ws, 0, sizeof *ws); }

void hm_model_ws_release(struct hm_model_ws *ws)
{
    if (!ws)
        return;
    if (ws->be) {
        if (ws->qkv == ws->proj)
            ws->qkv = NULL;
        float **bufs[] = {&ws->h, &ws->a, &ws->proj, &ws->qkv, &ws->att, &ws->o, &ws->a2,
                          &ws->mh, &ws->mg, &ws->m, &ws->hf, &ws->logits, &ws->phiq,
                          &ws->phik, &ws->xraw, &ws->dt, &ws->z, &ws->y, &ws->nll,
                          &ws->out};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            hm_backend_free(ws->be, (void **)bufs[i]);
        hm_backend_free(ws->be, (void **)&ws->ids);
        hm_backend_free(ws->be, (void **)&ws->tg);
        hm_backend_free(ws->be, &ws->att_ws);
    }
    memset(ws, 0, sizeof *ws);
}

/* *buf = n elements of size `size` of be's memory (the old one freed). */
static enum hm_status grow(const struct hm_backend *be, void **buf, int64_t n, size_t size,
                          struct hm_error *err)
{
    hm_backend_free(be, buf);
    if (n < 0 || (uint64_t)n > SIZE_MAX / size ||
        !(*buf = hm_backend_alloc(be, size * (size_t)(n > 0 ? n : 1))))
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory for activations (%lld floats)",
                            (long long)n);
    return HM_OK;
}

size_t hm_model_mixer_ws_size(const struct hm_config *c, const struct hm_backend *be, int64_t T)
{
    return hm_mixers_ws_size(c, be, T, 0);
}

/* One activation buffer of struct hm_model_ws and its floats. */
struct ws_buf {
    float **b;
    int64_t n;
};
#define WS_NBUF 18

/* The buffers of ws for B sequences of T rows (N = B·T) and their floats:
 * the one table behind hm_model_ws_reserve_batch and hm_model_ws_bytes.
 * Returns 0, or -1 when a size overflows. */
static int ws_table(struct hm_model_ws *ws, const struct hm_config *c, int64_t B, int64_t T,
                    struct ws_buf g[WS_NBUF])
{
    const int64_t d = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    const int64_t nh = c->num_attention_heads;
    const unsigned bufs = hm_mixers_bufs(c);
    const int llama = c->qkv_layout == HM_QKV_GQA, ssm = (bufs & HM_MIX_SSM) != 0;
    int64_t N, nd, ni, nv, nq, n3, na, nf = 1, nt = 1;
    if (hm_mul_i64(B, T, &N) || hm_mul_i64(N, d, &nd) || hm_mul_i64(N, I, &ni) ||
        hm_mul_i64(B, HM_MODEL_NLL_ROWS, &nv) || hm_mul_i64(nv, V, &nv) ||
        hm_mul_i64(N, c->qkv_dim, &nq) || hm_mul_i64(N, 3 * c->attn_dim, &n3) ||
        hm_mul_i64(N, c->attn_dim, &na) || hm_mul_i64(N, nh, &nt) ||
        ((bufs & HM_MIX_FMAP) && hm_mul_i64(nt, 2 * c->feature_dim, &nf)))
        return -1;
    const struct ws_buf t[WS_NBUF] = {
        {&ws->h, nd}, {&ws->a, nd}, {&ws->proj, nq}, {&ws->qkv, llama ? n3 : 1},
        {&ws->att, na}, {&ws->o, nd}, {&ws->a2, nd}, {&ws->mh, ni},
        {&ws->mg, llama ? ni : 1}, {&ws->m, nd}, {&ws->hf, nd}, {&ws->logits, nv},
        {&ws->phiq, nf}, {&ws->phik, nf}, {&ws->xraw, ssm ? nq : 1},
        {&ws->dt, ssm ? nt : 1}, {&ws->z, ssm ? na : 1}, {&ws->y, ssm ? na : 1}};
    memcpy(g, t, sizeof t);
    return 0;
}

int64_t hm_model_eval_batch(const struct hm_config *cfg, const struct hm_backend *be, int64_t T,
                            int64_t windows)
{
    int64_t B = 1;
    while (B < HM_EVAL_BATCH_MAX && B < windows &&
           hm_model_ws_bytes(cfg, be, B + 1, T) <= HM_EVAL_BATCH_BYTES)
        B++;
    return B;
}

size_t hm_model_ws_bytes(const struct hm_config *c, const struct hm_backend *be, int64_t B,
                         int64_t T)
{
    struct hm_model_ws dummy = {0};
    struct ws_buf g[WS_NBUF];
    if (B <= 0 || T <= 0 || ws_table(&dummy, c, B, T, g))
        return SIZE_MAX;
    size_t total = hm_model_mixer_ws_size(c, be, T);
    for (size_t i = 0; i < WS_NBUF; i++) {
        if ((uint64_t)g[i].n > (SIZE_MAX - total) / sizeof(float))
            return SIZE_MAX;
        total += sizeof(float) * (size_t)g[i].n;
    }
    return total;
}

enum hm_status hm_model_ws_reserve_batch(struct hm_model_ws *ws, const struct hm_model *m,
                                         const struct hm_backend *be, int64_t B, int64_t T,
                                         struct hm_error *err)
{
    const struct hm_config *c = &m->cfg;
    const int64_t d = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    const int llama = c->qkv_layout == HM_QKV_GQA;
    if (T <= 0)
        return hm_error_set(err, HM_ERR_INVALID, "sequence length %lld must be positive",
                            (long long)T);
    if (B <= 0)
        return hm_error_set(err, HM_ERR_INVALID, "batch size %lld must be positive",
                            (long long)B);
    struct ws_buf g[WS_NBUF];
    if (ws_table(ws, c, B, T, g))
        return hm_error_set(err, HM_ERR_NOMEM, "activation size overflows");
    if (ws->be && ws->be != be)
        hm_model_ws_release(ws); /* another backend's buffers */
    ws->be = be;
    if (B * T > ws->T_cap || B > ws->B_cap || d != ws->d || I != ws->I || V != ws->V) {
        if (ws->qkv == ws->proj)
            ws->qkv = NULL;
        ws->T_cap = ws->B_cap = 0;
        for (size_t i = 0; i < WS_NBUF; i++) {
            enum hm_status st = grow(be, (void **)g[i].b, g[i].n, sizeof(float), err);
            if (st != HM_OK)
                return st;
        }
        enum hm_status st = grow(be, (void **)&ws->ids, B * T, sizeof(int32_t), err);
        if (st == HM_OK)
            st = grow(be, (void **)&ws->tg, B * T, sizeof(int32_t), err);
        if (st == HM_OK)
            st = grow(be, (void **)&ws->nll, B * T, sizeof(float), err);
        if (st != HM_OK)
            return st;
        if (!llama) {
            hm_backend_free(be, (void **)&ws->qkv);
            ws->qkv = ws->proj; /* the fused NeoX layout is already per head */
        }
        ws->T_cap = B * T;
        ws->B_cap = B;
        ws->d = d;
        ws->I = I;
        ws->V = V;
        /* the skeleton's layer: every layer reuses it; no saved statistics */
        ws->acts = (struct hm_layer_acts){.h = ws->h, .a = ws->a, .xraw = ws->xraw,
                                          .proj = ws->proj, .qkv = ws->qkv, .att = ws->att,
                                          .phiq = ws->phiq, .phik = ws->phik, .dtz = ws->dt,
                                          .dt = ws->dt, .z = ws->z, .y = ws->y, .t = ws->h,
                                          .a2 = ws->a2, .mh = ws->mh, .mg = ws->mg};
    }
    size_t need = hm_model_mixer_ws_size(c, be, T);
    if (need > ws->att_ws_size) {
        hm_backend_free(be, &ws->att_ws);
        ws->att_ws_size = 0;
        if (!(ws->att_ws = hm_backend_alloc(be, need)))
            return hm_error_set(err, HM_ERR_NOMEM, "out of memory for attention workspace");
        ws->att_ws_size = need;
    }
    return HM_OK;
}

enum hm_status hm_model_ws_reserve(struct hm_model_ws *ws, const struct hm_model *m,
                                   const struct hm_backend *be, int64_t T,
                                   struct hm_error *err)
{
    return hm_model_ws_reserve_batch(ws, m, be, 1, T, err);
}

double hm_model_flops_per_token(const struct hm_config *c, int64_t T)
{
    double d = (double)c->hidden_size, I = (double)c->intermediate_size;
    double V = (double)c->vocab_size, L = (double)c->num_hidden_layers;
    double Q = (double)c->qkv_dim, Da = (double)c->attn_dim;
    double mlp = (c->mlp_kind == HM_MLP_SWIGLU ? 3.0 : 2.0) * I * d;
    return L * 2.0 * (Q * d + Da * d + mlp) + hm_mixers_flops(c, T) + 2.0 * V * d;
}
