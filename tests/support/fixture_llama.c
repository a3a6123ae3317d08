/* fixture_llama.c — see fixture_llama.h. */
#include "fixture_llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "testutil.h"

/* Sizes with the HF defaults filled in (0 = default). */
struct fl_dims {
    int64_t d, nh, nkv, p, I, V, L, F, K;
};

static void fl_dims_init(struct fl_dims *m, const struct hm_config *c)
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
}

/* x [n] rounded in place to what dtype dt stores (via F32, as the writer converts;
 * F64 keeps the double values). */
static void fl_round(double *x, int64_t n, enum hm_dtype dt)
{
    if (dt == HM_DTYPE_F64)
        return;
    float *f = malloc(sizeof(float) * (size_t)(n ? n : 1));
    void *b = malloc((size_t)(n ? n : 1) * 4);
    for (int64_t i = 0; i < n; i++)
        f[i] = (float)x[i];
    if (dt != HM_DTYPE_F32 && (hm_from_f32(f, n, dt, b, NULL) != HM_OK ||
                               hm_to_f32(b, dt, n, f, NULL) != HM_OK))
        abort();
    for (int64_t i = 0; i < n; i++)
        x[i] = f[i];
    free(f);
    free(b);
}

/* Put a tensor of numel(shape) values mean + std·N(0,1), rounded to dt. */
static void fl_put_randn(struct tu_ref_table *t, const char *name, enum hm_dtype dt, int ndim,
                         const int64_t *shape, double mean, double std, uint64_t *s)
{
    int64_t n = 1;
    for (int k = 0; k < ndim; k++)
        n *= shape[k];
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = mean + std * tu_rand_normal(s);
    fl_round(v, n, dt);
    tu_ref_table_put(t, name, dt, ndim, shape, v);
    free(v);
}

/* Put a linear layer PREFIX.weight [out, in] (+ PREFIX.bias [out] when bias). */
static void fl_put_linear(struct tu_ref_table *t, const char *prefix, int64_t out, int64_t in,
                          int bias, enum hm_dtype dt, double std, uint64_t *s)
{
    char name[200];
    const int64_t shw[2] = {out, in}, shb[1] = {out};
    snprintf(name, sizeof name, "%s.weight", prefix);
    fl_put_randn(t, name, dt, 2, shw, 0, std, s);
    if (bias) {
        snprintf(name, sizeof name, "%s.bias", prefix);
        fl_put_randn(t, name, dt, 1, shb, 0, 0.1, s);
    }
}

static void fl_put_layer(struct tu_ref_table *t, const struct hm_config *c,
                         const struct fl_dims *m, long long l, enum hm_dtype dt, double std,
                         uint64_t *s)
{
    char pre[160];
    const int64_t shd[1] = {m->d};
    snprintf(pre, sizeof pre, "model.layers.%lld.input_layernorm.weight", l);
    fl_put_randn(t, pre, dt, 1, shd, 1.0, 0.1, s);
    const struct { const char *mod; int64_t out, in; int bias; } lin[7] = {
        {"self_attn.q_proj", m->nh * m->p, m->d, c->attention_bias},
        {"self_attn.k_proj", m->nkv * m->p, m->d, c->attention_bias},
        {"self_attn.v_proj", m->nkv * m->p, m->d, c->attention_bias},
        {"self_attn.o_proj", m->d, m->nh * m->p, c->attention_bias},
        {"mlp.gate_proj", m->I, m->d, c->mlp_bias},
        {"mlp.up_proj", m->I, m->d, c->mlp_bias},
        {"mlp.down_proj", m->d, m->I, c->mlp_bias}};
    for (int k = 0; k < 7; k++) {
        snprintf(pre, sizeof pre, "model.layers.%lld.%s", l, lin[k].mod);
        fl_put_linear(t, pre, lin[k].out, lin[k].in, lin[k].bias, dt, std, s);
        if (k == 3) {
            snprintf(pre, sizeof pre, "model.layers.%lld.post_attention_layernorm.weight", l);
            fl_put_randn(t, pre, dt, 1, shd, 1.0, 0.1, s);
        }
    }
}

struct tu_ref_table *tu_llama_weights(const struct hm_config *c, const struct tu_llama_opts *o)
{
    struct fl_dims m;
    fl_dims_init(&m, c);
    uint64_t s = o->seed ? o->seed : 1;
    const double std = o->std > 0 ? o->std : 0.2;
    const enum hm_dtype dt = o->dtype;
    struct tu_ref_table *t = tu_ref_table_new();
    const int64_t shvd[2] = {m.V, m.d}, shd[1] = {m.d}, shi[1] = {m.p / 2};
    fl_put_randn(t, "model.embed_tokens.weight", dt, 2, shvd, 0, std, &s);
    double *inv = malloc(sizeof(double) * (size_t)(m.p / 2 + 1));
    tu_ref_llama_inv_freq(c, inv);
    for (int64_t l = 0; l < m.L; l++) {
        fl_put_layer(t, c, &m, (long long)l, dt, std, &s);
        if (o->legacy_inv_freq) {
            char name[160];
            snprintf(name, sizeof name, "model.layers.%lld.self_attn.rotary_emb.inv_freq",
                     (long long)l);
            tu_ref_table_put(t, name, HM_DTYPE_F32, 1, shi, inv);
        }
    }
    free(inv);
    fl_put_randn(t, "model.norm.weight", dt, 1, shd, 1.0, 0.1, &s);
    if (!c->tie_word_embeddings)
        fl_put_randn(t, "lm_head.weight", dt, 2, shvd, 0, std, &s);
    return t;
}

/* ---- students ------------------------------------------------------------ */

/* Put a tensor with every value v, rounded to dt. */
static void fl_put_const(struct tu_ref_table *t, const char *name, enum hm_dtype dt, int ndim,
                         const int64_t *shape, double v)
{
    int64_t n = 1;
    for (int k = 0; k < ndim; k++)
        n *= shape[k];
    double *x = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        x[i] = v;
    fl_round(x, n, dt);
    tu_ref_table_put(t, name, dt, ndim, shape, x);
    free(x);
}

/* feature_map_{q,k}: W [n_h, p, F] = eye(p, F) per head (+ noise), b [n_h, F] */
static void fl_put_fmaps(struct tu_ref_table *t, const struct fl_dims *m, long long l,
                         const struct tu_llama_student_opts *o, enum hm_dtype dt, uint64_t *s)
{
    const int64_t shw[3] = {m->nh, m->p, m->F}, shb[2] = {m->nh, m->F};
    const int64_t nw = m->nh * m->p * m->F, nb = m->nh * m->F;
    double *w = malloc(sizeof(double) * (size_t)nw), *b = malloc(sizeof(double) * (size_t)nb);
    const char *which[2] = {"q", "k"};
    char name[200];
    for (int k = 0; k < 2; k++) {
        for (int64_t i = 0; i < nw; i++) {
            const int64_t row = (i / m->F) % m->p, col = i % m->F;
            w[i] = (row == col ? 1.0 : 0.0) + o->fmap_std * tu_rand_normal(s);
        }
        for (int64_t i = 0; i < nb; i++)
            b[i] = o->fmap_std * tu_rand_normal(s);
        fl_round(w, nw, dt);
        fl_round(b, nb, dt);
        snprintf(name, sizeof name, "model.layers.%lld.self_attn.feature_map_%s.weight", l,
                 which[k]);
        tu_ref_table_put(t, name, dt, 3, shw, w);
        snprintf(name, sizeof name, "model.layers.%lld.self_attn.feature_map_%s.bias", l,
                 which[k]);
        tu_ref_table_put(t, name, dt, 2, shb, b);
    }
    free(w);
    free(b);
}

/* conv1d.weight [C, K]: last tap 1 (identity), or random taps N(0, 1/K) */
static void fl_put_conv(struct tu_ref_table *t, const struct fl_dims *m, long long l,
                        int rnd, enum hm_dtype dt, uint64_t *s)
{
    const int64_t C = (m->nh + 2 * m->nkv) * m->p, K = m->K;
    const int64_t shw[2] = {C, K}, shb[1] = {C};
    double *w = malloc(sizeof(double) * (size_t)(C * K));
    for (int64_t i = 0; i < C * K; i++)
        w[i] = rnd ? tu_rand_normal(s) / sqrt((double)K) + (i % K == K - 1 ? 0.5 : 0.0)
                   : (i % K == K - 1 ? 1.0 : 0.0);
    fl_round(w, C * K, dt);
    char name[200];
    snprintf(name, sizeof name, "model.layers.%lld.self_attn.conv1d.weight", l);
    tu_ref_table_put(t, name, dt, 2, shw, w);
    free(w);
    snprintf(name, sizeof name, "model.layers.%lld.self_attn.conv1d.bias", l);
    if (rnd)
        fl_put_randn(t, name, dt, 1, shb, 0, 0.1, s);
    else
        fl_put_const(t, name, dt, 1, shb, 0);
}

/* dt_proj, A, D, gate_proj: contract §3 identity values, or random ones */
static void fl_put_ssm(struct tu_ref_table *t, const struct fl_dims *m, long long l, int rnd,
                       enum hm_dtype dt, uint64_t *s)
{
    const int64_t shdt[2] = {m->nh, m->d}, shh[1] = {m->nh};
    const int64_t shg[2] = {m->nh * m->p, m->d}, shgb[1] = {m->nh * m->p};
    char name[200];
#define FL_NAME(suffix) \
    snprintf(name, sizeof name, "model.layers.%lld.self_attn." suffix, l)
    FL_NAME("dt_proj.weight");
    fl_put_randn(t, name, dt, 2, shdt, 0, rnd ? 0.2 : 0, s);
    FL_NAME("dt_proj.bias");
    fl_put_randn(t, name, dt, 1, shh, 0.5413248546129181, rnd ? 0.3 : 0, s);
    FL_NAME("A");
    if (rnd) {
        double *a = malloc(sizeof(double) * (size_t)m->nh);
        for (int64_t h = 0; h < m->nh; h++)
            a[h] = -0.05 - 0.5 * tu_rand_uniform(s); /* A < 0: a real decay */
        fl_round(a, m->nh, dt);
        tu_ref_table_put(t, name, dt, 1, shh, a);
        free(a);
    } else {
        fl_put_const(t, name, dt, 1, shh, 0);
    }
    FL_NAME("D");
    fl_put_randn(t, name, dt, 1, shh, 0, rnd ? 0.3 : 0, s);
    FL_NAME("gate_proj.weight");
    fl_put_randn(t, name, dt, 2, shg, 0, rnd ? 0.2 : 0, s);
    FL_NAME("gate_proj.bias");
    fl_put_randn(t, name, dt, 1, shgb, 1.2784645427610738, rnd ? 0.3 : 0, s);
#undef FL_NAME
}

void tu_llama_add_student(struct tu_ref_table *t, const struct hm_config *c,
                          const struct tu_llama_student_opts *o)
{
    struct fl_dims m;
    fl_dims_init(&m, c);
    uint64_t s = o->seed ? o->seed : 1;
    const enum hm_dtype dt = o->dtype;
    for (int64_t l = 0; l < m.L && c->mixer != HM_MIXER_SOFTMAX; l++) {
        fl_put_fmaps(t, &m, (long long)l, o, dt, &s);
        if (c->mixer != HM_MIXER_HEDGEMAMBA)
            continue;
        fl_put_conv(t, &m, (long long)l, o->ssm_random, dt, &s);
        fl_put_ssm(t, &m, (long long)l, o->ssm_random, dt, &s);
    }
}

int64_t tu_llama_param_count(const struct hm_config *c)
{
    struct fl_dims m;
    fl_dims_init(&m, c);
    const int64_t qd = m.nh * m.p, kd = m.nkv * m.p;
    int64_t per_layer = 2 * m.d                               /* two RMSNorms */
                        + (qd + 2 * kd) * m.d + qd * m.d      /* q, k, v, o */
                        + 3 * m.I * m.d;                      /* gate, up, down */
    if (c->attention_bias)
        per_layer += qd + 2 * kd + m.d;
    if (c->mlp_bias)
        per_layer += 2 * m.I + m.d;
    return (c->tie_word_embeddings ? 1 : 2) * m.V * m.d + m.L * per_layer + m.d;
}

/* ---- writing -------------------------------------------------------------- */

static const char *fl_bool(int b) { return b ? "true" : "false"; }

static void fl_write_config(const char *dir, const struct hm_config *c, const struct fl_dims *m,
                            const struct tu_llama_opts *o)
{
    char *path = tu_path(dir, "config.json");
    FILE *fp = fopen(path, "w");
    if (!fp)
        abort();
    const int min = o->minimal_config;
    const enum hm_dtype dt = o->dtype;
    fprintf(fp, "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n"
                "  \"bos_token_id\": 1,\n  \"eos_token_id\": 2,\n  \"hidden_act\": \"silu\",\n"
                "  \"hidden_size\": %lld,\n  \"intermediate_size\": %lld,\n"
                "  \"num_hidden_layers\": %lld,\n  \"num_attention_heads\": %lld,\n"
                "  \"max_position_embeddings\": %lld,\n  \"initializer_range\": 0.02,\n",
            (long long)m->d, (long long)m->I, (long long)m->L, (long long)m->nh,
            (long long)c->max_position_embeddings);
    if (!min || m->nkv != m->nh)
        fprintf(fp, "  \"num_key_value_heads\": %lld,\n", (long long)m->nkv);
    if (c->head_dim > 0 && (!min || m->p != m->d / m->nh))
        fprintf(fp, "  \"head_dim\": %lld,\n", (long long)m->p);
    if (!min || c->layer_norm_eps != 1e-6)
        fprintf(fp, "  \"rms_norm_eps\": %.17g,\n", c->layer_norm_eps);
    if (!min || c->rotary_emb_base != 10000.0)
        fprintf(fp, "  \"rope_theta\": %.17g,\n", c->rotary_emb_base);
    if (!min || c->attention_bias)
        fprintf(fp, "  \"attention_bias\": %s,\n", fl_bool(c->attention_bias));
    if (!min || c->mlp_bias)
        fprintf(fp, "  \"mlp_bias\": %s,\n", fl_bool(c->mlp_bias));
    if (!min || c->tie_word_embeddings)
        fprintf(fp, "  \"tie_word_embeddings\": %s,\n", fl_bool(c->tie_word_embeddings));
    if (c->rope_scaling.type == HM_ROPE_LLAMA3)
        fprintf(fp, "  \"rope_scaling\": {\"factor\": %.17g, \"high_freq_factor\": %.17g, "
                    "\"low_freq_factor\": %.17g, \"original_max_position_embeddings\": %lld, "
                    "\"rope_type\": \"llama3\"},\n",
                c->rope_scaling.factor, c->rope_scaling.high_freq_factor,
                c->rope_scaling.low_freq_factor,
                (long long)c->rope_scaling.original_max_position_embeddings);
    else if (!min)
        fprintf(fp, "  \"rope_scaling\": null,\n");
    fprintf(fp, "  \"torch_dtype\": \"%s\",\n  \"transformers_version\": \"4.45.0\",\n"
                "  \"use_cache\": true,\n  \"vocab_size\": %lld\n}\n",
            dt == HM_DTYPE_F16 ? "float16" : dt == HM_DTYPE_BF16 ? "bfloat16" : "float32",
            (long long)m->V);
    if (fclose(fp) != 0)
        abort();
    free(path);
}

/* Shard of a tensor: layers spread over the shards, embeddings first, the rest last. */
static int fl_shard(const char *name, int64_t L, int nsh)
{
    long long l;
    if (sscanf(name, "model.layers.%lld.", &l) == 1)
        return (int)(l * nsh / (L + 1));
    return strncmp(name, "model.embed_tokens.", 19) == 0 ? 0 : nsh - 1;
}

/* The stored bytes of entry i (owned: free). */
static void *fl_bytes(const struct tu_ref_table *t, int64_t i, enum hm_dtype *dt, int *ndim,
                      const int64_t **shape, const char **name)
{
    const double *x;
    const int64_t n = tu_ref_table_at(t, i, name, dt, ndim, shape, &x);
    if (*dt == HM_DTYPE_F64) {
        double *d = malloc(sizeof(double) * (size_t)(n ? n : 1));
        memcpy(d, x, sizeof(double) * (size_t)n);
        return d;
    }
    float *f = malloc(sizeof(float) * (size_t)(n ? n : 1));
    void *b = malloc((size_t)(n ? n : 1) * hm_dtype_size(*dt));
    for (int64_t k = 0; k < n; k++)
        f[k] = (float)x[k];
    if (hm_from_f32(f, n, *dt, b, NULL) != HM_OK)
        abort();
    free(f);
    return b;
}

/* Write shard sh (fname) holding the tensors fl_shard assigns to it; index entries
 * go to idx (may be NULL); *first tracks the JSON comma. */
static void fl_write_shard(const char *dir, const struct tu_ref_table *t, int64_t L, int sh,
                           int nsh, const char *fname, FILE *idx, int *first)
{
    struct hm_st_writer *w = hm_st_writer_new();
    const int64_t n = tu_ref_table_count(t);
    void **bufs = calloc((size_t)(n ? n : 1), sizeof(void *));
    for (int64_t i = 0; i < n; i++) {
        const char *name;
        enum hm_dtype dt;
        int ndim;
        const int64_t *shape;
        tu_ref_table_at(t, i, &name, NULL, NULL, NULL, NULL);
        if (fl_shard(name, L, nsh) != sh)
            continue;
        bufs[i] = fl_bytes(t, i, &dt, &ndim, &shape, &name);
        if (hm_st_writer_add(w, name, dt, ndim, shape, bufs[i], NULL) != HM_OK)
            abort();
        if (idx) {
            fprintf(idx, "%s    \"%s\": \"%s\"", *first ? "" : ",\n", name, fname);
            *first = 0;
        }
    }
    hm_st_writer_set_metadata(w, "format", "pt", NULL);
    char *p = tu_path(dir, fname);
    struct hm_error err;
    if (hm_st_writer_write_path(w, p, 1, &err) != HM_OK) {
        fprintf(stderr, "fixture_llama: %s: %s\n", p, err.msg);
        abort();
    }
    free(p);
    hm_st_writer_free(w);
    for (int64_t i = 0; i < n; i++)
        free(bufs[i]);
    free(bufs);
}

void tu_write_llama_folder(const char *dir, const struct hm_config *c,
                           const struct tu_ref_table *t, const struct tu_llama_opts *o)
{
    struct fl_dims m;
    fl_dims_init(&m, c);
    const int nsh = o->nshards > 1 ? o->nshards : 1;
    fl_write_config(dir, c, &m, o);
    FILE *idx = NULL;
    if (nsh > 1) {
        size_t total = 0;
        for (int64_t i = 0; i < tu_ref_table_count(t); i++) {
            enum hm_dtype dt;
            total += (size_t)tu_ref_table_at(t, i, NULL, &dt, NULL, NULL, NULL) *
                     hm_dtype_size(dt);
        }
        char *ip = tu_path(dir, "model.safetensors.index.json");
        if (!(idx = fopen(ip, "w")))
            abort();
        free(ip);
        fprintf(idx, "{\n  \"metadata\": {\"total_size\": %zu},\n  \"weight_map\": {\n", total);
    }
    int first = 1;
    for (int sh = 0; sh < nsh; sh++) {
        char fname[64];
        if (nsh > 1)
            snprintf(fname, sizeof fname, "model-%05d-of-%05d.safetensors", sh + 1, nsh);
        else
            snprintf(fname, sizeof fname, "model.safetensors");
        fl_write_shard(dir, t, m.L, sh, nsh, fname, idx, &first);
    }
    if (idx) {
        fprintf(idx, "\n  }\n}\n");
        if (fclose(idx) != 0)
            abort();
    }
}

struct tu_ref_table *tu_make_llama(const char *dir, const struct hm_config *c,
                                   const struct tu_llama_opts *o)
{
    struct tu_ref_table *t = tu_llama_weights(c, o);
    tu_write_llama_folder(dir, c, t, o);
    return t;
}
