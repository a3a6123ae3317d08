#include "fixture.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "testutil.h"

struct fx_tensor {
    char name[160];
    int ndim;
    int64_t shape[4];
    enum hm_dtype dtype;
    void *data;
    int shard;
};

static void fx_add(struct fx_tensor *t, int *n, const char *name, int ndim,
                   const int64_t *shape, enum hm_dtype dt, const float *vals, int shard)
{
    struct fx_tensor *x = &t[(*n)++];
    snprintf(x->name, sizeof x->name, "%s", name);
    x->ndim = ndim;
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        x->shape[d] = shape[d];
        numel *= shape[d];
    }
    x->dtype = dt;
    x->shard = shard;
    x->data = malloc((size_t)numel * hm_dtype_size(dt) + 1);
    if (dt == HM_DTYPE_U8)
        memcpy(x->data, vals, (size_t)numel); /* vals reinterpreted as bytes */
    else if (hm_from_f32(vals, numel, dt, x->data, NULL) != HM_OK)
        abort();
}

static float *randn(int64_t n, double mean, double std, uint64_t *s)
{
    float *v = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)(mean + std * tu_rand_normal(s));
    return v;
}

int64_t tu_neox_param_count(const struct hm_config *c)
{
    int64_t d = c->hidden_size, V = c->vocab_size, I = c->intermediate_size;
    int64_t per_layer = 2 * d + 2 * d          /* two LayerNorms */
                        + 3 * d * d + 3 * d    /* qkv */
                        + d * d + d            /* dense */
                        + I * d + I            /* h_to_4h */
                        + d * I + d;           /* 4h_to_h */
    return 2 * V * d + c->num_hidden_layers * per_layer + 2 * d;
}

void tu_make_pythia(const char *dir, const struct hm_config *cfg,
                    const struct tu_pythia_opts *o)
{
    uint64_t s = o->seed ? o->seed : 1;
    double std = o->std > 0 ? o->std : 0.02;
    int64_t d = cfg->hidden_size, V = cfg->vocab_size, I = cfg->intermediate_size;
    int64_t L = cfg->num_hidden_layers;
    int nsh = o->nshards > 1 ? o->nshards : 1;
    int cap = (int)(16 * L + 16), n = 0;
    struct fx_tensor *t = calloc((size_t)cap, sizeof *t);
    char name[160];
    enum hm_dtype dt = o->dtype;
    float *v;

    int64_t sh_vd[2] = {V, d};
    v = randn(V * d, 0, std, &s);
    fx_add(t, &n, "gpt_neox.embed_in.weight", 2, sh_vd, dt, v, 0);
    free(v);
    for (int64_t l = 0; l < L; l++) {
        int shard = (int)(l * nsh / (L + 1));
        const char *ln[2] = {"input_layernorm", "post_attention_layernorm"};
        int64_t sh_d[1] = {d};
        for (int k = 0; k < 2; k++) {
            snprintf(name, sizeof name, "gpt_neox.layers.%lld.%s.weight", (long long)l, ln[k]);
            v = randn(d, 1.0, 0.1, &s);
            fx_add(t, &n, name, 1, sh_d, dt, v, shard);
            free(v);
            snprintf(name, sizeof name, "gpt_neox.layers.%lld.%s.bias", (long long)l, ln[k]);
            v = randn(d, 0.0, 0.1, &s);
            fx_add(t, &n, name, 1, sh_d, dt, v, shard);
            free(v);
        }
        struct { const char *mod; int64_t out, in; } lin[4] = {
            {"attention.query_key_value", 3 * d, d}, {"attention.dense", d, d},
            {"mlp.dense_h_to_4h", I, d}, {"mlp.dense_4h_to_h", d, I}};
        for (int k = 0; k < 4; k++) {
            int64_t shw[2] = {lin[k].out, lin[k].in}, shb[1] = {lin[k].out};
            snprintf(name, sizeof name, "gpt_neox.layers.%lld.%s.weight", (long long)l, lin[k].mod);
            v = randn(lin[k].out * lin[k].in, 0, std, &s);
            fx_add(t, &n, name, 2, shw, dt, v, shard);
            free(v);
            snprintf(name, sizeof name, "gpt_neox.layers.%lld.%s.bias", (long long)l, lin[k].mod);
            v = randn(lin[k].out, 0, 0.02, &s);
            fx_add(t, &n, name, 1, shb, dt, v, shard);
            free(v);
        }
        if (o->legacy_buffers) {
            int64_t P = o->buffer_positions > 0 ? o->buffer_positions : 16;
            int64_t shm[4] = {1, 1, P, P};
            unsigned char *mask = malloc((size_t)(P * P));
            for (int64_t i = 0; i < P; i++)
                for (int64_t j = 0; j < P; j++)
                    mask[i * P + j] = j <= i;
            snprintf(name, sizeof name, "gpt_neox.layers.%lld.attention.bias", (long long)l);
            fx_add(t, &n, name, 4, shm, HM_DTYPE_U8, (const float *)mask, shard);
            free(mask);
            float minf = -INFINITY;
            snprintf(name, sizeof name, "gpt_neox.layers.%lld.attention.masked_bias", (long long)l);
            fx_add(t, &n, name, 0, NULL, dt == HM_DTYPE_BF16 ? HM_DTYPE_BF16 : HM_DTYPE_F16,
                   &minf, shard);
            int64_t r2 = cfg->rotary_dims / 2 > 0 ? cfg->rotary_dims / 2 : 1;
            float *inv = malloc(sizeof(float) * (size_t)r2);
            for (int64_t j = 0; j < r2; j++)
                inv[j] = (float)(1.0 / pow(cfg->rotary_emb_base, 2.0 * (double)j / (double)(2 * r2)));
            int64_t shi[1] = {r2};
            snprintf(name, sizeof name, "gpt_neox.layers.%lld.attention.rotary_emb.inv_freq",
                     (long long)l);
            fx_add(t, &n, name, 1, shi, HM_DTYPE_F32, inv, shard);
            free(inv);
        }
    }
    int64_t sh_d1[1] = {d};
    v = randn(d, 1.0, 0.1, &s);
    fx_add(t, &n, "gpt_neox.final_layer_norm.weight", 1, sh_d1, dt, v, nsh - 1);
    free(v);
    v = randn(d, 0.0, 0.1, &s);
    fx_add(t, &n, "gpt_neox.final_layer_norm.bias", 1, sh_d1, dt, v, nsh - 1);
    free(v);
    v = randn(V * d, 0, std, &s);
    fx_add(t, &n, "embed_out.weight", 2, sh_vd, dt, v, nsh - 1);
    free(v);

    /* config.json with the real HF field names */
    char *cfgp = tu_path(dir, "config.json");
    FILE *fp = fopen(cfgp, "w");
    fprintf(fp,
            "{\n  \"architectures\": [\"GPTNeoXForCausalLM\"],\n  \"bos_token_id\": 0,\n"
            "  \"eos_token_id\": 0,\n  \"hidden_act\": \"%s\",\n  \"hidden_size\": %lld,\n"
            "  \"initializer_range\": 0.02,\n  \"intermediate_size\": %lld,\n"
            "  \"layer_norm_eps\": %.17g,\n  \"max_position_embeddings\": %lld,\n"
            "  \"model_type\": \"gpt_neox\",\n  \"num_attention_heads\": %lld,\n"
            "  \"num_hidden_layers\": %lld,\n  \"rotary_emb_base\": %.17g,\n"
            "  \"rotary_pct\": %.17g,\n  \"tie_word_embeddings\": false,\n"
            "  \"torch_dtype\": \"%s\",\n  \"transformers_version\": \"4.24.0\",\n"
            "  \"use_cache\": true,\n  \"use_parallel_residual\": %s,\n  \"vocab_size\": %lld\n}\n",
            cfg->hidden_act == HM_ACT_GELU ? "gelu" : "gelu_new", (long long)d, (long long)I,
            cfg->layer_norm_eps, (long long)cfg->max_position_embeddings,
            (long long)cfg->num_attention_heads, (long long)L, cfg->rotary_emb_base,
            cfg->rotary_pct,
            dt == HM_DTYPE_F16 ? "float16" : dt == HM_DTYPE_BF16 ? "bfloat16" : "float32",
            cfg->use_parallel_residual ? "true" : "false", (long long)V);
    fclose(fp);
    free(cfgp);

    FILE *idx = NULL;
    if (nsh > 1) {
        char *ip = tu_path(dir, "model.safetensors.index.json");
        idx = fopen(ip, "w");
        free(ip);
        fprintf(idx, "{\n  \"metadata\": {\"total_size\": 0},\n  \"weight_map\": {\n");
    }
    int first = 1;
    for (int sh = 0; sh < nsh; sh++) {
        struct hm_st_writer *w = hm_st_writer_new();
        char fname[64];
        if (nsh > 1)
            snprintf(fname, sizeof fname, "model-%05d-of-%05d.safetensors", sh + 1, nsh);
        else
            snprintf(fname, sizeof fname, "model.safetensors");
        for (int i = 0; i < n; i++) {
            if (t[i].shard != sh)
                continue;
            if (hm_st_writer_add(w, t[i].name, t[i].dtype, t[i].ndim, t[i].shape, t[i].data,
                                 NULL) != HM_OK)
                abort();
            if (idx) {
                fprintf(idx, "%s    \"%s\": \"%s\"", first ? "" : ",\n", t[i].name, fname);
                first = 0;
            }
        }
        hm_st_writer_set_metadata(w, "format", "pt", NULL);
        char *p = tu_path(dir, fname);
        struct hm_error err;
        if (hm_st_writer_write_path(w, p, 1, &err) != HM_OK) {
            fprintf(stderr, "fixture: %s: %s\n", p, err.msg);
            abort();
        }
        free(p);
        hm_st_writer_free(w);
    }
    if (idx) {
        fprintf(idx, "\n  }\n}\n");
        fclose(idx);
    }
    for (int i = 0; i < n; i++)
        free(t[i].data);
    free(t);
}
