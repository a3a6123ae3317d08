/* mixer.c — the mixer registry (mixer.h): a mixer, or a layer of a config,
 * → its unit; the sizes over all of a (hybrid) config's layers. */
#include "mixer.h"

#include "config.h"

const struct hm_mixer_unit *hm_mixer_unit(enum hm_mixer mixer)
{
    switch (mixer) {
    case HM_MIXER_SOFTMAX: return &hm_mixer_softmax;
    case HM_MIXER_HEDGEHOG: return &hm_mixer_hedgehog;
    case HM_MIXER_HEDGEMAMBA: return &hm_mixer_hedgemamba;
    default: return NULL;
    }
}

const struct hm_mixer_unit *hm_layer_unit(const struct hm_config *c, int64_t l)
{
    return hm_mixer_unit(hm_layer_mixer(c, l));
}

/* The units c's layers use: [0] the student's (or the teacher's), [1] softmax
 * when a hybrid keeps any layer; *n_student, *n_kept their layer counts. */
static int units_of(const struct hm_config *c, const struct hm_mixer_unit *u[2],
                    int64_t n[2])
{
    const int64_t kept = c->mixer == HM_MIXER_SOFTMAX ? 0 : hm_config_kept_count(c);
    int k = 0;
    if (c->num_hidden_layers > kept) {
        u[k] = hm_mixer_unit(c->mixer);
        n[k++] = c->num_hidden_layers - kept;
    }
    if (kept > 0) {
        u[k] = &hm_mixer_softmax;
        n[k++] = kept;
    }
    return k;
}

unsigned hm_mixers_bufs(const struct hm_config *c)
{
    const struct hm_mixer_unit *u[2];
    int64_t n[2];
    unsigned b = 0;
    for (int i = 0, k = units_of(c, u, n); i < k; i++)
        b |= u[i]->bufs;
    return b;
}

size_t hm_mixers_ws_size(const struct hm_config *c, const struct hm_backend *be, int64_t T,
                         int backward)
{
    const struct hm_mixer_unit *u[2];
    int64_t n[2];
    size_t w = 0;
    for (int i = 0, k = units_of(c, u, n); i < k; i++) {
        size_t f = u[i]->ws_size(c, be, T);
        size_t b = backward ? u[i]->backward_ws_size(c, be, T) : 0;
        w = f > w ? f : w;
        w = b > w ? b : w;
    }
    return w;
}

double hm_mixers_flops(const struct hm_config *c, int64_t T)
{
    const struct hm_mixer_unit *u[2];
    int64_t n[2];
    double f = 0.0;
    for (int i = 0, k = units_of(c, u, n); i < k; i++)
        f += (double)n[i] * u[i]->flops_per_token(c, T);
    return f;
}
