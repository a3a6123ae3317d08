/* recurrent.c — one token at a time through any model (recurrent.h): the
 * forward skeleton (forward.h) with B = T = 1, positions counting up from 0,
 * and each layer's mixer state (mixer.h): the KV cache (softmax, grown by
 * its unit), or the conv window and S of a student (constant size). */
#include "recurrent.h"

#include <stdlib.h>
#include <string.h>

#include "forward.h"

struct hm_model_state {
    int64_t pos;
    int64_t L, floats;             /* constant-size state floats per layer */
    float *store;                  /* owned: windows and states of every layer */
    struct hm_mixer_state *st;     /* [L] */
    struct hm_layer_acts acts;     /* one token's activations */
    float *o, *mo, *hf;            /* [d] */
    float *scratch;                /* owned: the per-token vectors */
};

void hm_model_state_free(struct hm_model_state *s)
{
    if (!s)
        return;
    for (int64_t l = 0; s->st && l < s->L; l++) {
        free(s->st[l].kc);
        free(s->st[l].vc);
        free(s->st[l].scores);
    }
    free(s->st);
    free(s->store);
    free(s->scratch);
    free(s);
}

void hm_model_state_reset(struct hm_model_state *s)
{
    s->pos = 0;
    memset(s->store, 0, sizeof(float) * (size_t)(s->L * s->floats));
}

int64_t hm_model_state_floats(const struct hm_model_state *s, int64_t n_kv, int64_t p)
{
    int64_t kv = s->st && s->st[0].kc ? 2 * s->pos * n_kv * p : 0;
    return s->L * (s->floats + kv);
}

enum hm_status hm_model_state_new(const struct hm_model *m, struct hm_model_state **out,
                                  struct hm_error *err)
{
    *out = NULL;
    const struct hm_config *c = &m->cfg;
    const int64_t L = c->num_hidden_layers, d = c->hidden_size, I = c->intermediate_size;
    const int64_t nh = c->num_attention_heads, F2 = 2 * c->feature_dim;
    const int64_t Q = c->qkv_dim, Da = c->attn_dim;
    const int64_t win = c->mixer == HM_MIXER_HEDGEMAMBA ? (c->conv_width - 1) * Q : 0;
    struct hm_model_state *s = calloc(1, sizeof *s);
    if (!s)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    s->L = L;
    s->floats = hm_mixer_unit(c->mixer)->state_floats(c);
    s->store = calloc((size_t)(L * s->floats) + 1, sizeof(float));
    s->st = calloc((size_t)L + 1, sizeof *s->st);
    const int64_t n = 2 * Q + 3 * Da + 5 * Da + 6 * d + 3 * I + 2 * nh * F2 + 4 * nh;
    s->scratch = calloc((size_t)n, sizeof(float));
    if (!s->store || !s->st || !s->scratch) {
        hm_model_state_free(s);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    }
    float *q = s->scratch;
#define TAKE(ptr, k) (ptr) = q, q += (k)
    struct hm_layer_acts *a = &s->acts;
    TAKE(a->xraw, Q);
    TAKE(a->proj, Q);
    a->qkv = a->proj; /* neox: the fused layout is per head */
    if (c->qkv_layout == HM_QKV_GQA)
        TAKE(a->qkv, 3 * Da);
    TAKE(a->att, Da);
    TAKE(a->z, Da);
    TAKE(a->y, Da);
    TAKE(a->h, d);
    TAKE(a->a, d);
    TAKE(a->a2, d);
    TAKE(s->o, d);
    TAKE(s->mo, d);
    TAKE(s->hf, d);
    TAKE(a->mh, I);
    TAKE(a->mg, I);
    TAKE(a->phiq, nh * F2);
    TAKE(a->phik, nh * F2);
    TAKE(a->dt, nh);
    a->dtz = a->dt;
    a->t = a->h;
    float *one, *zero, *qv, *vv;
    TAKE(one, nh);
    TAKE(zero, nh);
    TAKE(qv, Da);
    TAKE(vv, Da);
#undef TAKE
    for (int64_t h = 0; h < nh; h++)
        one[h] = 1.0f;
    for (int64_t l = 0; l < L; l++) {
        struct hm_mixer_state *ms = &s->st[l];
        ms->win = s->store + l * s->floats;
        ms->S = ms->win + win;
        ms->q = qv;
        ms->v = vv;
        ms->one = one;
        ms->zero = zero;
    }
    *out = s;
    return HM_OK;
}

enum hm_status hm_model_step(const struct hm_model *m, const struct hm_backend *be,
                             struct hm_model_state *s, int32_t token, float *logits,
                             struct hm_error *err)
{
    const struct hm_config *c = &m->cfg;
    const int64_t d = c->hidden_size;
    if (token < 0 || token >= c->vocab_size)
        return hm_error_set(err, HM_ERR_INVALID, "token id %d is outside the vocabulary (%lld)",
                            token, (long long)c->vocab_size);
    const struct hm_fwd f = {.B = 1, .T = 1, .pos0 = s->pos, .la = &s->acts, .shared = 1,
                             .h_out = s->acts.h, .o = s->o, .m = s->mo, .act = s->acts.mh,
                             .st = s->st};
    enum hm_status st = hm_model_layers_forward(m, be, &token, &f, err);
    if (st != HM_OK)
        return st;
    s->pos++;
    if (!logits)
        return HM_OK;
    hm_model_norm_forward(m, be, s->hf, NULL, NULL, s->acts.h, m->lnf_w, m->lnf_b, 1);
    hm_backend_matmul_forward(be, logits, s->hf, m->embed_out, NULL, 1, d, m->cfg.vocab_size);
    return hm_backend_sync(be, err);
}
