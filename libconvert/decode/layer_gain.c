/* layer_gain.c — KL gains of restoring each layer to softmax (layer_gain.h). */
#include "layer_gain.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_views.h"

/* The host view of m named name, or NULL. */
static const struct hm_tensor_view *view_named(const struct hm_model *m, const char *name)
{
    for (int64_t i = 0; i < m->n_views; i++)
        if (strcmp(m->views[i].spec.name, name) == 0)
            return &m->views[i];
    return NULL;
}

enum hm_status hm_model_restore_layer(const struct hm_model *s, const struct hm_model *t,
                                      int64_t l, struct hm_model **out, struct hm_error *err)
{
    *out = NULL;
    if (s->be || t->be || s->narrow || t->narrow)
        return hm_error_set(err, HM_ERR_INVALID, "restoring a layer needs fp32 host models");
    struct hm_config c = s->cfg;
    if (l >= 0 && hm_config_set_kept(&c, l, 1) != 0)
        return hm_error_set(err, HM_ERR_INVALID, "layer %lld is beyond what a hybrid holds",
                            (long long)l);
    struct hm_model *m = NULL;
    enum hm_status st = hm_model_new(&c, &m, err);
    for (int64_t i = 0; st == HM_OK && i < m->n_views; i++) {
        const struct hm_param_spec *sp = &m->views[i].spec;
        const int from_t = sp->layer == l && l >= 0 && sp->group == HM_PG_MIXER;
        const struct hm_tensor_view *v = view_named(from_t ? t : s, sp->name);
        if (!v || v->numel != m->views[i].numel) {
            st = hm_error_set(err, HM_ERR_INVALID, "the %s has no tensor '%s' of its shape",
                              from_t ? "teacher" : "student", sp->name);
            break;
        }
        memcpy(m->views[i].data, v->data, sizeof(float) * (size_t)v->numel);
    }
    if (st != HM_OK) {
        hm_model_free(m);
        return st;
    }
    *out = m;
    return HM_OK;
}

/* KL(S') of the host model m against tp on be (m is placed, measured, freed). */
static enum hm_status kl_of(struct hm_model *m, const struct hm_model *tp,
                            const struct hm_backend *be, const int32_t *tokens, int64_t n,
                            const struct hm_quality_opts *o, double *kl, struct hm_error *err)
{
    struct hm_quality q;
    enum hm_status st = hm_model_place(m, be, err);
    if (st == HM_OK)
        st = hm_quality_measure(m, tp, be, tokens, n, o, &q, err);
    hm_model_free(m);
    if (st == HM_OK)
        *kl = q.kl;
    return st;
}

void hm_layer_gains_free(struct hm_layer_gains *g)
{
    free(g->kl_l);
    free(g->gain);
    free(g->rank);
    memset(g, 0, sizeof *g);
}

enum hm_status hm_layer_gains_measure(const struct hm_model *s, const struct hm_model *t,
                                      const struct hm_model *tp, const struct hm_backend *be,
                                      const int32_t *tokens, int64_t n_tokens,
                                      const struct hm_quality_opts *o,
                                      struct hm_layer_gains *out, struct hm_error *err)
{
    memset(out, 0, sizeof *out);
    const int64_t L = s->cfg.num_hidden_layers;
    if (s->cfg.mixer == HM_MIXER_SOFTMAX)
        return hm_error_set(err, HM_ERR_INVALID, "the student is a %s teacher: no layer to "
                            "restore", hm_arch_name(&s->cfg));
    if (t->cfg.mixer != HM_MIXER_SOFTMAX || t->cfg.num_hidden_layers != L ||
        t->cfg.hidden_size != s->cfg.hidden_size || t->cfg.family != s->cfg.family)
        return hm_error_set(err, HM_ERR_INVALID,
                            "the teacher must be a softmax model of the student's skeleton");
    struct hm_quality_opts to = *o;
    to.prompts = 0; /* teacher-forced only */
    out->kl_l = malloc(sizeof(double) * (size_t)L);
    out->gain = malloc(sizeof(double) * (size_t)L);
    out->rank = malloc(sizeof(int64_t) * (size_t)L);
    if (!out->kl_l || !out->gain || !out->rank) {
        hm_layer_gains_free(out);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    }
    struct hm_model *m = NULL;
    enum hm_status st = hm_model_restore_layer(s, t, -1, &m, err);
    if (st == HM_OK)
        st = kl_of(m, tp, be, tokens, n_tokens, &to, &out->kl, err);
    for (int64_t l = 0; st == HM_OK && l < L; l++) {
        out->kl_l[l] = out->gain[l] = NAN;
        if (hm_layer_mixer(&s->cfg, l) == HM_MIXER_SOFTMAX)
            continue;
        if ((st = hm_model_restore_layer(s, t, l, &m, err)) == HM_OK &&
            (st = kl_of(m, tp, be, tokens, n_tokens, &to, &out->kl_l[l], err)) == HM_OK) {
            out->gain[l] = out->kl - out->kl_l[l];
            /* insertion by gain, largest first; ties keep the lower l first */
            int64_t k = out->n_rank++;
            while (k > 0 && out->gain[out->rank[k - 1]] < out->gain[l]) {
                out->rank[k] = out->rank[k - 1];
                k--;
            }
            out->rank[k] = l;
        }
    }
    if (st != HM_OK)
        hm_layer_gains_free(out);
    return st;
}
