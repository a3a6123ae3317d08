#include "presets.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "batches.h"
#include "ckpt_write.h"
#include "dtype.h"
#include "params.h"
#include "model_views.h"

/* Shapes of real models (their HF config.json values); llama rows also fix
 * GQA, RMSNorm eps, rope_theta, tying and rope_scaling. */
static const struct {
    const char *name;
    enum hm_family family;
    int64_t V, d, L, nh, I, pos;
    int64_t nkv;        /* llama */
    double theta, eps;  /* llama: rope_theta, rms_norm_eps */
    int tied;
    int llama3;         /* llama3 rope_scaling {factor this, low 1, high 4, original 8192}; 0: none */
} presets[] = {
    {"tiny", HM_FAMILY_NEOX, 257, 128, 4, 4, 512, 256, 0, 0, 0, 0, 0},
    {"pythia-14m", HM_FAMILY_NEOX, 50304, 128, 6, 4, 512, 2048, 0, 0, 0, 0, 0},
    {"pythia-31m", HM_FAMILY_NEOX, 50304, 256, 6, 8, 1024, 2048, 0, 0, 0, 0, 0},
    {"pythia-70m", HM_FAMILY_NEOX, 50304, 512, 6, 8, 2048, 2048, 0, 0, 0, 0, 0},
    {"pythia-160m", HM_FAMILY_NEOX, 50304, 768, 12, 12, 3072, 2048, 0, 0, 0, 0, 0},
    {"pythia-410m", HM_FAMILY_NEOX, 50304, 1024, 24, 16, 4096, 2048, 0, 0, 0, 0, 0},
    {"pythia-1b", HM_FAMILY_NEOX, 50304, 2048, 16, 8, 8192, 2048, 0, 0, 0, 0, 0},
    /* llama2.c stories260K / stories15M */
    {"llama-tiny", HM_FAMILY_LLAMA, 512, 64, 5, 8, 172, 512, 4, 10000, 1e-5, 1, 0},
    {"stories15m", HM_FAMILY_LLAMA, 32000, 288, 6, 6, 768, 256, 6, 10000, 1e-5, 1, 0},
    {"smollm-135m", HM_FAMILY_LLAMA, 49152, 576, 30, 9, 1536, 2048, 3, 10000, 1e-5, 1, 0},
    {"tinyllama-1.1b", HM_FAMILY_LLAMA, 32000, 2048, 22, 32, 5632, 2048, 4, 10000, 1e-5, 0, 0},
    {"llama-3.2-1b", HM_FAMILY_LLAMA, 128256, 2048, 16, 32, 8192, 131072, 8, 500000, 1e-5, 1, 32},
    {"llama-3.1-8b", HM_FAMILY_LLAMA, 128256, 4096, 32, 32, 14336, 131072, 8, 500000, 1e-5, 0, 8},
};

int hm_config_preset(const char *name, struct hm_config *cfg)
{
    for (size_t i = 0; i < sizeof presets / sizeof *presets; i++) {
        const char *n = presets[i].name;
        if (strcmp(name, n) != 0 && !(strncmp(n, "pythia-", 7) == 0 && strcmp(name, n + 7) == 0))
            continue;
        hm_config_defaults(cfg);
        cfg->family = presets[i].family;
        cfg->vocab_size = presets[i].V;
        cfg->hidden_size = presets[i].d;
        cfg->num_hidden_layers = presets[i].L;
        cfg->num_attention_heads = presets[i].nh;
        cfg->intermediate_size = presets[i].I;
        cfg->max_position_embeddings = presets[i].pos;
        if (presets[i].family == HM_FAMILY_LLAMA) {
            cfg->num_key_value_heads = presets[i].nkv;
            cfg->rotary_emb_base = presets[i].theta;
            cfg->layer_norm_eps = presets[i].eps;
            cfg->tie_word_embeddings = presets[i].tied;
            if (presets[i].llama3) {
                cfg->rope_scaling.type = HM_ROPE_LLAMA3;
                cfg->rope_scaling.factor = presets[i].llama3;
                cfg->rope_scaling.low_freq_factor = 1;
                cfg->rope_scaling.high_freq_factor = 4;
                cfg->rope_scaling.original_max_position_embeddings = 8192;
            }
        }
        return hm_config_finish(cfg, NULL) == HM_OK ? 0 : -1;
    }
    return -1;
}

const char *hm_preset_names(void)
{
    return "tiny, pythia-14m, pythia-31m, pythia-70m, pythia-160m, pythia-410m, pythia-1b, "
           "llama-tiny, stories15m, smollm-135m, tinyllama-1.1b, llama-3.2-1b, llama-3.1-8b";
}

/* Student extras keep their identity values: they are not drawn. */
static int is_extra(const struct hm_param_spec *sp)
{
    return sp->group == HM_PG_FEATURE_MAP || sp->group == HM_PG_SSM ||
           sp->group == HM_PG_CONV || sp->group == HM_PG_GATE;
}

/* Values j0 .. j0+n-1 of spec sp into dst[n]: a weight (ndim >= 2) takes one
 * normal per element from *s; a norm weight is 1, every other vector 0. */
static void init_values(const struct hm_param_spec *sp, uint64_t *s, double std, float *dst,
                        int64_t n)
{
    int is_weight = sp->ndim >= 2;
    int is_ln_w = sp->group == HM_PG_NORM && strstr(sp->name, ".weight") != NULL;
    for (int64_t j = 0; j < n; j++)
        dst[j] = is_weight ? (float)(std * hm_rand_normal(s)) : (is_ln_w ? 1.0f : 0.0f);
}

void hm_model_init_random(struct hm_model *m, uint64_t seed, double std)
{
    struct hm_tensor_view *v = NULL;
    int64_t n = hm_model_views(m, &v);
    uint64_t s = seed;
    for (int64_t i = 0; i < n; i++)
        if (!is_extra(&v[i].spec))
            init_values(&v[i].spec, &s, std, v[i].data, v[i].numel);
    free(v);
}

/* hm_init_write: each tensor's values are produced when the writer reaches
 * it (sorted by name), from the generator state it would have in table
 * order: splitmix64 adds one constant per call and hm_rand_normal makes two
 * calls, so the state before tensor i is seed + 2·γ·(draws before i). */
#define SPLITMIX_GAMMA 0x9E3779B97F4A7C15ull
#define INIT_CHUNK 65536 /* values made and converted at a time */

struct init_ctx {
    const struct hm_param_spec *specs; /* [n] the tensors as added */
    const uint64_t *state;             /* [n] generator state before each */
    double std;
    enum hm_dtype dtype;
};

static enum hm_status init_fill(void *ctx, int64_t index, size_t off, void *dst, size_t nbytes,
                                struct hm_error *err)
{
    (void)off; /* added whole (hm_st_writer_add_fill): off is 0 */
    const struct init_ctx *c = ctx;
    const struct hm_param_spec *sp = &c->specs[index];
    size_t es = hm_dtype_size(c->dtype);
    int64_t numel = (int64_t)(nbytes / es);
    uint64_t s = c->state[index];
    float buf[INIT_CHUNK];
    for (int64_t j = 0; j < numel; j += INIT_CHUNK) {
        int64_t k = numel - j < INIT_CHUNK ? numel - j : INIT_CHUNK;
        init_values(sp, &s, c->std, buf, k);
        enum hm_status st = hm_from_f32(buf, k, c->dtype, (char *)dst + (size_t)j * es, err);
        if (st != HM_OK)
            return st;
    }
    return HM_OK;
}

enum hm_status hm_init_write(const struct hm_config *cfg, uint64_t seed, double std,
                             enum hm_dtype dtype, const char *provenance, const char *path,
                             int flags, struct hm_error *err)
{
    if (cfg->mixer != HM_MIXER_SOFTMAX)
        return hm_error_set(err, HM_ERR_INVALID, "hm_init_write makes teachers, not '%s'",
                            hm_arch_name(cfg));
    if (dtype != HM_DTYPE_F32 && dtype != HM_DTYPE_F16 && dtype != HM_DTYPE_BF16)
        return hm_error_set(err, HM_ERR_UNSUPPORTED, "checkpoints are F32, F16 or BF16");
    struct hm_param_spec *sp = NULL;
    int64_t n = hm_param_specs(cfg, &sp);
    if (n < 0)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory for the tensor table");
    uint64_t *state = malloc(sizeof *state * (size_t)(n > 0 ? n : 1));
    struct hm_st_writer *w = hm_st_writer_new();
    enum hm_status st = state && w ? HM_OK : hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    struct init_ctx c = {sp, state, std, dtype};
    uint64_t s = seed;
    for (int64_t i = 0; i < n && st == HM_OK; i++) {
        state[i] = s;
        int64_t numel = 1;
        for (int d = 0; d < sp[i].ndim; d++)
            numel *= sp[i].shape[d];
        if (sp[i].ndim >= 2)
            s += 2 * SPLITMIX_GAMMA * (uint64_t)numel; /* mod 2^64, as splitmix64 */
        st = hm_st_writer_add_fill(w, sp[i].name, dtype, sp[i].ndim, sp[i].shape, init_fill, &c,
                                   err);
    }
    if (st == HM_OK)
        st = hm_ckpt_write_writer(w, cfg, provenance, NULL, path, flags, err);
    hm_st_writer_free(w);
    free(state);
    free(sp);
    return st;
}
