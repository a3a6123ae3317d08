#include "config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *family_names[HM_FAMILY_COUNT] = {"neox", "llama"};
static const char *model_types[HM_FAMILY_COUNT] = {"gpt_neox", "llama"};
/* The family table: the skeleton kinds of each family (contract §1, §1b). */
static const struct {
    enum hm_norm_kind norm;
    enum hm_mlp_kind mlp;
    enum hm_qkv_layout qkv;
} family_kinds[HM_FAMILY_COUNT] = {
    [HM_FAMILY_NEOX] = {HM_NORM_LAYER, HM_MLP_GELU, HM_QKV_FUSED},
    [HM_FAMILY_LLAMA] = {HM_NORM_RMS, HM_MLP_SWIGLU, HM_QKV_GQA},
};
static const char *mixer_names[HM_MIXER_COUNT] = {"softmax", "hedgehog", "hedgemamba"};

const char *hm_family_name(enum hm_family f)
{
    return (unsigned)f < HM_FAMILY_COUNT ? family_names[f] : "unknown";
}

const char *hm_family_model_type(enum hm_family f)
{
    return (unsigned)f < HM_FAMILY_COUNT ? model_types[f] : "unknown";
}

const char *hm_mixer_name(enum hm_mixer m)
{
    return (unsigned)m < HM_MIXER_COUNT ? mixer_names[m] : "unknown";
}

const char *hm_arch_name(const struct hm_config *cfg)
{
    return cfg->mixer == HM_MIXER_SOFTMAX ? hm_family_model_type(cfg->family)
                                          : hm_mixer_name(cfg->mixer);
}

int hm_arch_parse(const char *s, int *family, enum hm_mixer *mixer)
{
    for (int f = 0; f < HM_FAMILY_COUNT; f++)
        if (strcmp(s, model_types[f]) == 0) {
            *family = f;
            *mixer = HM_MIXER_SOFTMAX;
            return 0;
        }
    for (int m = 1; m < HM_MIXER_COUNT; m++)
        if (strcmp(s, mixer_names[m]) == 0) {
            *mixer = (enum hm_mixer)m;
            return 0;
        }
    return -1;
}

void hm_components_str(unsigned c, char *buf, size_t size)
{
    snprintf(buf, size, "%s%s%s%s%s", (c & HM_COMP_SSM) ? "ssm" : "",
             (c & HM_COMP_SSM) && (c & (HM_COMP_CONV | HM_COMP_GATE)) ? "," : "",
             (c & HM_COMP_CONV) ? "conv" : "",
             (c & HM_COMP_CONV) && (c & HM_COMP_GATE) ? "," : "",
             (c & HM_COMP_GATE) ? "gate" : "");
}

int hm_components_parse(const char *s, unsigned *out)
{
    unsigned c = 0;
    if (strcmp(s, "none") == 0 || s[0] == '\0') {
        *out = 0;
        return 0;
    }
    const char *p = s;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 3 && strncmp(p, "ssm", 3) == 0)
            c |= HM_COMP_SSM;
        else if (n == 4 && strncmp(p, "conv", 4) == 0)
            c |= HM_COMP_CONV;
        else if (n == 4 && strncmp(p, "gate", 4) == 0)
            c |= HM_COMP_GATE;
        else
            return -1;
        if (!e)
            break;
        p = e + 1;
        if (!*p)
            return -1;
    }
    *out = c;
    return 0;
}

void hm_config_defaults(struct hm_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->mixer = HM_MIXER_SOFTMAX;
    cfg->vocab_size = 50304;
    cfg->max_position_embeddings = 2048;
    cfg->rotary_pct = 0.25;
    cfg->rotary_emb_base = 10000;
    cfg->layer_norm_eps = 1e-5;
    cfg->use_parallel_residual = 1;
    cfg->hidden_act = HM_ACT_GELU;
    cfg->conv_width = 4;
    cfg->components = HM_COMP_ALL;
}

static enum hm_status get_int(const cJSON *root, const char *key, int required,
                              int64_t *out, struct hm_error *err)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!j) {
        if (required)
            return hm_error_set(err, HM_ERR_INVALID, "config lacks '%s'", key);
        return HM_OK;
    }
    if (!cJSON_IsNumber(j) || j->valuedouble != floor(j->valuedouble) ||
        fabs(j->valuedouble) > 9.0e15)
        return hm_error_set(err, HM_ERR_INVALID, "config field '%s' is not an integer", key);
    *out = (int64_t)j->valuedouble;
    return HM_OK;
}

static enum hm_status get_num(const cJSON *root, const char *key, double *out,
                              struct hm_error *err)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!j)
        return HM_OK;
    if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble))
        return hm_error_set(err, HM_ERR_INVALID, "config field '%s' is not a number", key);
    *out = j->valuedouble;
    return HM_OK;
}

static enum hm_status get_bool(const cJSON *root, const char *key, int *out,
                               struct hm_error *err)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!j)
        return HM_OK;
    if (!cJSON_IsBool(j))
        return hm_error_set(err, HM_ERR_INVALID, "config field '%s' is not a boolean", key);
    *out = cJSON_IsTrue(j);
    return HM_OK;
}

/* rope_scaling: null, absent, or {"rope_type" (or legacy "type"): "llama3",
 * factor, low_freq_factor, high_freq_factor, original_max_position_embeddings}. */
static enum hm_status parse_rope_scaling(const cJSON *root, struct hm_config *cfg,
                                         struct hm_error *err)
{
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    if (!rs || cJSON_IsNull(rs))
        return HM_OK;
    if (!cJSON_IsObject(rs))
        return hm_error_set(err, HM_ERR_INVALID, "config 'rope_scaling' is not an object");
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
    if (!ty)
        ty = cJSON_GetObjectItemCaseSensitive(rs, "type");
    const char *t = cJSON_IsString(ty) ? ty->valuestring : "?";
    if (strcmp(t, "default") == 0)
        return HM_OK;
    if (strcmp(t, "llama3") != 0)
        return hm_error_set(err, HM_ERR_UNSUPPORTED,
                            "rope_scaling type '%.40s' is not supported (only llama3)", t);
    cfg->rope_scaling.type = HM_ROPE_LLAMA3;
    const char *keys[3] = {"factor", "low_freq_factor", "high_freq_factor"};
    double *dst[3] = {&cfg->rope_scaling.factor, &cfg->rope_scaling.low_freq_factor,
                      &cfg->rope_scaling.high_freq_factor};
    for (int i = 0; i < 3; i++) {
        if (!cJSON_GetObjectItemCaseSensitive(rs, keys[i]))
            return hm_error_set(err, HM_ERR_INVALID, "rope_scaling lacks '%s'", keys[i]);
        enum hm_status st = get_num(rs, keys[i], dst[i], err);
        if (st != HM_OK)
            return st;
    }
    return get_int(rs, "original_max_position_embeddings", 1,
                   &cfg->rope_scaling.original_max_position_embeddings, err);
}

/* contract §11: "layer_mixers", one name per layer, each softmax or arch's
 * student mixer. */
static enum hm_status parse_layer_mixers(const cJSON *root, struct hm_config *cfg,
                                         struct hm_error *err)
{
    const cJSON *lm = cJSON_GetObjectItemCaseSensitive(root, "layer_mixers");
    if (!lm)
        return HM_OK;
    const int64_t L = cfg->num_hidden_layers;
    if (cfg->mixer == HM_MIXER_SOFTMAX)
        return hm_error_set(err, HM_ERR_INVALID,
                            "config 'layer_mixers' needs a student 'arch' (hedgehog or "
                            "hedgemamba), not %s", hm_arch_name(cfg));
    if (!cJSON_IsArray(lm) || cJSON_GetArraySize(lm) != L)
        return hm_error_set(err, HM_ERR_INVALID,
                            "config 'layer_mixers' is not an array of num_hidden_layers (%lld) "
                            "names", (long long)L);
    if (L > HM_KEPT_MAX)
        return hm_error_set(err, HM_ERR_UNSUPPORTED,
                            "config 'layer_mixers' of %lld layers: hybrids have at most %d",
                            (long long)L, HM_KEPT_MAX);
    int64_t l = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, lm) {
        const char *n = cJSON_IsString(it) ? it->valuestring : "";
        const int soft = strcmp(n, "softmax") == 0;
        if (!soft && strcmp(n, hm_mixer_name(cfg->mixer)) != 0)
            return hm_error_set(err, HM_ERR_INVALID,
                                "config 'layer_mixers'[%lld] is '%.40s', not softmax or the "
                                "arch's %s (one student kind per model)",
                                (long long)l, n, hm_mixer_name(cfg->mixer));
        hm_config_set_kept(cfg, l++, soft);
    }
    return HM_OK;
}

int hm_config_set_kept(struct hm_config *cfg, int64_t l, int kept)
{
    if (l < 0 || l >= HM_KEPT_MAX)
        return -1;
    const uint64_t bit = (uint64_t)1 << (l & 63);
    cfg->kept[l >> 6] = kept ? cfg->kept[l >> 6] | bit : cfg->kept[l >> 6] & ~bit;
    return 0;
}

int64_t hm_config_kept_count(const struct hm_config *cfg)
{
    int64_t n = 0;
    for (int i = 0; i < HM_KEPT_WORDS; i++)
        n += __builtin_popcountll(cfg->kept[i]);
    return n;
}

void hm_config_kept_str(const struct hm_config *cfg, char *buf, size_t size)
{
    size_t at = 0;
    if (size)
        buf[0] = '\0';
    for (int64_t l = 0; l < cfg->num_hidden_layers && l < HM_KEPT_MAX; l++) {
        if (hm_layer_mixer(cfg, l) != HM_MIXER_SOFTMAX || cfg->mixer == HM_MIXER_SOFTMAX)
            continue;
        int n = snprintf(buf + at, at < size ? size - at : 0, "%s%lld", at ? "," : "",
                         (long long)l);
        if (n < 0 || (at += (size_t)n) >= size)
            return;
    }
}

int hm_config_kept_parse(struct hm_config *cfg, const char *s, int64_t L)
{
    const char *p = s;
    if (!*p)
        return -1;
    while (*p) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 0 || v >= L || (*end && *end != ','))
            return -1;
        if (hm_config_set_kept(cfg, v, 1) != 0)
            return -1;
        p = *end ? end + 1 : end;
        if (*end == ',' && !*p)
            return -1;
    }
    return 0;
}

enum hm_status hm_config_parse(const char *json, size_t len, struct hm_config *cfg,
                               struct hm_error *err)
{
    hm_config_defaults(cfg);
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root)
        return hm_error_set(err, HM_ERR_FORMAT, "config is not valid JSON");
    enum hm_status st = HM_OK;
    if (!cJSON_IsObject(root)) {
        st = hm_error_set(err, HM_ERR_FORMAT, "config is not a JSON object");
        goto out;
    }
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(root, "arch");
    const cJSON *mtype = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    const cJSON *fam = cJSON_GetObjectItemCaseSensitive(root, "family");
    int family = -1;
    if (fam) {
        for (int f = 0; f < HM_FAMILY_COUNT && cJSON_IsString(fam); f++)
            if (strcmp(fam->valuestring, family_names[f]) == 0)
                family = f;
        if (family < 0) {
            st = hm_error_set(err, HM_ERR_UNSUPPORTED, "config 'family' is not one of neox, llama");
            goto out;
        }
    }
    if (arch) {
        int af = -1;
        if (!cJSON_IsString(arch) || hm_arch_parse(arch->valuestring, &af, &cfg->mixer) != 0) {
            st = hm_error_set(err, HM_ERR_UNSUPPORTED,
                              "config 'arch' is not one of gpt_neox, llama, hedgehog, hedgemamba");
            goto out;
        }
        if (af >= 0 && family >= 0 && af != family) {
            st = hm_error_set(err, HM_ERR_INVALID, "config 'arch' %s contradicts 'family' %s",
                              arch->valuestring, family_names[family]);
            goto out;
        }
        if (af >= 0)
            family = af;
    } else if (mtype) {
        int f = -1;
        for (int i = 0; i < HM_FAMILY_COUNT && cJSON_IsString(mtype); i++)
            if (strcmp(mtype->valuestring, model_types[i]) == 0)
                f = i;
        if (f < 0) {
            st = hm_error_set(err, HM_ERR_UNSUPPORTED,
                              "model_type '%.40s' is not supported (gpt_neox or llama)",
                              cJSON_IsString(mtype) ? mtype->valuestring : "?");
            goto out;
        }
        family = f;
    } else {
        st = hm_error_set(err, HM_ERR_INVALID, "config has neither 'arch' nor 'model_type'");
        goto out;
    }
    cfg->family = family < 0 ? HM_FAMILY_NEOX : (enum hm_family)family;
    if (cfg->family == HM_FAMILY_LLAMA) {
        /* HF LlamaConfig defaults (contract §1b) */
        cfg->rotary_pct = 1.0;
        cfg->layer_norm_eps = 1e-6;
        cfg->use_parallel_residual = 0;
        cfg->hidden_act = HM_ACT_SILU;
        if ((st = get_num(root, "rms_norm_eps", &cfg->layer_norm_eps, err)) ||
            (st = get_int(root, "num_key_value_heads", 0, &cfg->num_key_value_heads, err)) ||
            (st = get_bool(root, "attention_bias", &cfg->attention_bias, err)) ||
            (st = get_bool(root, "mlp_bias", &cfg->mlp_bias, err)) ||
            (st = get_bool(root, "tie_word_embeddings", &cfg->tie_word_embeddings, err)) ||
            (st = parse_rope_scaling(root, cfg, err)))
            goto out;
        const cJSON *hd = cJSON_GetObjectItemCaseSensitive(root, "head_dim");
        if (hd && !cJSON_IsNull(hd) && (st = get_int(root, "head_dim", 0, &cfg->head_dim, err)))
            goto out;
        const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");
        if (act && !(cJSON_IsString(act) && strcmp(act->valuestring, "silu") == 0)) {
            st = hm_error_set(err, HM_ERR_UNSUPPORTED,
                              "hidden_act '%.40s' is not supported for llama (only silu)",
                              cJSON_IsString(act) ? act->valuestring : "?");
            goto out;
        }
    }
    if ((st = get_int(root, "vocab_size", 1, &cfg->vocab_size, err)) ||
        (st = get_int(root, "hidden_size", 1, &cfg->hidden_size, err)) ||
        (st = get_int(root, "num_hidden_layers", 1, &cfg->num_hidden_layers, err)) ||
        (st = get_int(root, "num_attention_heads", 1, &cfg->num_attention_heads, err)) ||
        (st = get_int(root, "intermediate_size", 1, &cfg->intermediate_size, err)) ||
        (st = get_int(root, "max_position_embeddings", 0, &cfg->max_position_embeddings, err)) ||
        (st = get_int(root, "feature_dim", 0, &cfg->feature_dim, err)) ||
        (st = get_int(root, "conv_width", 0, &cfg->conv_width, err)) ||
        (st = get_num(root, "rotary_emb_base", &cfg->rotary_emb_base, err)))
        goto out;
    if (cfg->family == HM_FAMILY_NEOX &&
        ((st = get_num(root, "rotary_pct", &cfg->rotary_pct, err)) ||
         (st = get_num(root, "layer_norm_eps", &cfg->layer_norm_eps, err)) ||
         (st = get_bool(root, "use_parallel_residual", &cfg->use_parallel_residual, err))))
        goto out;
    /* newer HF configs nest the base under rope_parameters / rope_theta */
    if (!cJSON_GetObjectItemCaseSensitive(root, "rotary_emb_base") &&
        (st = get_num(root, "rope_theta", &cfg->rotary_emb_base, err)))
        goto out;
    int tied = 0;
    if (cfg->family == HM_FAMILY_NEOX && (st = get_bool(root, "tie_word_embeddings", &tied, err)))
        goto out;
    if (tied) {
        st = hm_error_set(err, HM_ERR_UNSUPPORTED,
                          "tie_word_embeddings is true (GPT-NeoX uses an untied embed_out)");
        goto out;
    }
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");
    if (act && cfg->family == HM_FAMILY_NEOX) {
        const char *a = cJSON_IsString(act) ? act->valuestring : "";
        if (strcmp(a, "gelu") == 0)
            cfg->hidden_act = HM_ACT_GELU;
        else if (strcmp(a, "gelu_new") == 0 || strcmp(a, "gelu_fast") == 0 ||
                 strcmp(a, "gelu_pytorch_tanh") == 0)
            cfg->hidden_act = HM_ACT_GELU_TANH;
        else {
            st = hm_error_set(err, HM_ERR_UNSUPPORTED, "hidden_act '%.40s' is not supported", a);
            goto out;
        }
    }
    const cJSON *comp = cJSON_GetObjectItemCaseSensitive(root, "components");
    if (comp) {
        unsigned c = 0;
        const cJSON *it;
        if (!cJSON_IsArray(comp)) {
            st = hm_error_set(err, HM_ERR_INVALID, "config 'components' is not an array");
            goto out;
        }
        cJSON_ArrayForEach(it, comp) {
            unsigned one;
            if (!cJSON_IsString(it) || hm_components_parse(it->valuestring, &one) != 0 ||
                !one) {
                st = hm_error_set(err, HM_ERR_INVALID,
                                  "config 'components' holds something other than "
                                  "\"ssm\", \"conv\", \"gate\"");
                goto out;
            }
            c |= one;
        }
        cfg->components = c;
    }
    const cJSON *di = cJSON_GetObjectItemCaseSensitive(root, "decay_init");
    if (di) {
        if (cJSON_IsString(di) && strcmp(di->valuestring, "teacher") == 0)
            cfg->decay_init = HM_DECAY_TEACHER;
        else if (!(cJSON_IsString(di) && strcmp(di->valuestring, "identity") == 0)) {
            st = hm_error_set(err, HM_ERR_INVALID,
                              "config 'decay_init' is not \"identity\" or \"teacher\"");
            goto out;
        }
    }
    if ((st = parse_layer_mixers(root, cfg, err)) != HM_OK)
        goto out;
    st = hm_config_finish(cfg, err);
out:
    cJSON_Delete(root);
    return st;
}

enum hm_status hm_config_finish(struct hm_config *cfg, struct hm_error *err)
{
    const int64_t big = (int64_t)1 << 40;
    if (cfg->vocab_size < 1 || cfg->vocab_size > ((int64_t)1 << 31))
        return hm_error_set(err, HM_ERR_INVALID, "vocab_size %lld is out of range",
                            (long long)cfg->vocab_size);
    if (cfg->hidden_size < 1 || cfg->hidden_size > (1 << 20) || cfg->num_attention_heads < 1 ||
        cfg->num_hidden_layers < 1 || cfg->num_hidden_layers > 10000 ||
        cfg->intermediate_size < 1 || cfg->intermediate_size > big)
        return hm_error_set(err, HM_ERR_INVALID,
                            "hidden_size, num_hidden_layers, num_attention_heads or "
                            "intermediate_size is out of range");
    if (cfg->family == HM_FAMILY_NEOX || cfg->head_dim == 0) {
        if (cfg->hidden_size % cfg->num_attention_heads != 0)
            return hm_error_set(err, HM_ERR_INVALID,
                                "hidden_size %lld is not a multiple of num_attention_heads %lld",
                                (long long)cfg->hidden_size, (long long)cfg->num_attention_heads);
        cfg->head_dim = cfg->hidden_size / cfg->num_attention_heads;
    }
    if (cfg->head_dim < 1 || cfg->head_dim > (1 << 16) || cfg->num_attention_heads > (1 << 16))
        return hm_error_set(err, HM_ERR_INVALID, "head_dim %lld is out of range",
                            (long long)cfg->head_dim);
    if (cfg->family == HM_FAMILY_NEOX) {
        cfg->num_key_value_heads = cfg->num_attention_heads;
        cfg->attention_bias = cfg->mlp_bias = 1;
        cfg->tie_word_embeddings = 0;
        cfg->rope_scaling.type = HM_ROPE_NONE;
        if (cfg->hidden_act == HM_ACT_SILU)
            return hm_error_set(err, HM_ERR_UNSUPPORTED, "hidden_act silu is llama-only");
    } else {
        cfg->rotary_pct = 1.0;
        cfg->use_parallel_residual = 0;
        cfg->hidden_act = HM_ACT_SILU;
        if (cfg->head_dim % 2)
            return hm_error_set(err, HM_ERR_INVALID, "head_dim %lld is odd (rotary pairs)",
                                (long long)cfg->head_dim);
    }
    if (cfg->num_key_value_heads == 0)
        cfg->num_key_value_heads = cfg->num_attention_heads;
    if (cfg->num_key_value_heads < 1 || cfg->num_attention_heads % cfg->num_key_value_heads)
        return hm_error_set(err, HM_ERR_INVALID,
                            "num_attention_heads %lld is not a multiple of num_key_value_heads %lld",
                            (long long)cfg->num_attention_heads,
                            (long long)cfg->num_key_value_heads);
    if ((unsigned)cfg->family >= HM_FAMILY_COUNT)
        return hm_error_set(err, HM_ERR_INVALID, "unknown family");
    cfg->norm_kind = family_kinds[cfg->family].norm;
    cfg->mlp_kind = family_kinds[cfg->family].mlp;
    cfg->qkv_layout = family_kinds[cfg->family].qkv;
    cfg->attn_dim = cfg->num_attention_heads * cfg->head_dim;
    cfg->qkv_dim = (cfg->num_attention_heads + 2 * cfg->num_key_value_heads) * cfg->head_dim;
    if (cfg->attn_dim > (1 << 22))
        return hm_error_set(err, HM_ERR_INVALID, "num_attention_heads × head_dim is too large");
    if (cfg->rope_scaling.type == HM_ROPE_LLAMA3) {
        const double lo = cfg->rope_scaling.low_freq_factor, hi = cfg->rope_scaling.high_freq_factor;
        if (!(cfg->rope_scaling.factor > 0) || !(lo > 0) || !(hi > lo) ||
            cfg->rope_scaling.original_max_position_embeddings < 1)
            return hm_error_set(err, HM_ERR_INVALID,
                                "rope_scaling llama3 needs factor > 0, 0 < low_freq_factor < "
                                "high_freq_factor and original_max_position_embeddings >= 1");
    }
    if (!(cfg->rotary_pct >= 0 && cfg->rotary_pct <= 1))
        return hm_error_set(err, HM_ERR_INVALID, "rotary_pct %g is not in [0, 1]",
                            cfg->rotary_pct);
    cfg->rotary_dims = (int64_t)((double)cfg->head_dim * cfg->rotary_pct);
    if (cfg->rotary_dims % 2)
        return hm_error_set(err, HM_ERR_INVALID, "rotary dims %lld is odd",
                            (long long)cfg->rotary_dims);
    if (!(cfg->rotary_emb_base > 0) || !(cfg->layer_norm_eps > 0))
        return hm_error_set(err, HM_ERR_INVALID,
                            "rotary_emb_base and layer_norm_eps must be positive");
    if (cfg->max_position_embeddings < 1 || cfg->max_position_embeddings > ((int64_t)1 << 40))
        return hm_error_set(err, HM_ERR_INVALID,
                            "max_position_embeddings %lld is out of range (1 .. 2^40)",
                            (long long)cfg->max_position_embeddings);
    if (cfg->mixer != HM_MIXER_SOFTMAX) {
        if (cfg->feature_dim == 0)
            cfg->feature_dim = cfg->head_dim;
        if (cfg->feature_dim < 1 || cfg->feature_dim > (1 << 16))
            return hm_error_set(err, HM_ERR_INVALID, "feature_dim %lld is out of range",
                                (long long)cfg->feature_dim);
    }
    if (cfg->mixer == HM_MIXER_HEDGEMAMBA && (cfg->conv_width < 1 || cfg->conv_width > 64))
        return hm_error_set(err, HM_ERR_INVALID, "conv_width %lld is out of range [1, 64]",
                            (long long)cfg->conv_width);
    if (cfg->components & ~(unsigned)HM_COMP_ALL)
        return hm_error_set(err, HM_ERR_INVALID, "unknown component bits");
    if (cfg->decay_init != HM_DECAY_IDENTITY && cfg->decay_init != HM_DECAY_TEACHER)
        return hm_error_set(err, HM_ERR_INVALID, "unknown decay_init");
    if (cfg->mixer != HM_MIXER_HEDGEMAMBA)
        cfg->decay_init = HM_DECAY_IDENTITY; /* only a HedgeMamba has an A */
    if (hm_config_kept_count(cfg) > 0 && cfg->mixer == HM_MIXER_SOFTMAX)
        return hm_error_set(err, HM_ERR_INVALID, "a softmax teacher has no kept layers");
    for (int i = 0; i < HM_KEPT_WORDS; i++) /* no bits past the last layer */
        for (int b = 0; b < 64; b++)
            if ((int64_t)i * 64 + b >= cfg->num_hidden_layers && (cfg->kept[i] >> b & 1))
                return hm_error_set(err, HM_ERR_INVALID, "kept layer %d is past the last layer",
                                    i * 64 + b);
    return HM_OK;
}

/* Exact JSON numbers: cJSON's own printing keeps 15 digits whenever they
 * read back within a relative epsilon, so 0.30000000000000004 came back as
 * 0.3 and integers above 10^15 were rounded. The shortest %.Ng that reads
 * back bit-identical is used instead. */
static void add_exact(cJSON *r, const char *key, double v)
{
    char buf[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    cJSON_AddRawToObject(r, key, buf);
}

char *hm_config_to_json(const struct hm_config *cfg)
{
    cJSON *r = cJSON_CreateObject();
    if (!r)
        return NULL;
    const int llama = cfg->family == HM_FAMILY_LLAMA;
    cJSON_AddStringToObject(r, "arch", hm_arch_name(cfg));
    cJSON_AddStringToObject(r, "family", hm_family_name(cfg->family));
    cJSON_AddStringToObject(r, "model_type", hm_family_model_type(cfg->family));
    add_exact(r, "vocab_size", (double)cfg->vocab_size);
    add_exact(r, "hidden_size", (double)cfg->hidden_size);
    add_exact(r, "num_hidden_layers", (double)cfg->num_hidden_layers);
    add_exact(r, "num_attention_heads", (double)cfg->num_attention_heads);
    add_exact(r, "intermediate_size", (double)cfg->intermediate_size);
    add_exact(r, "max_position_embeddings", (double)cfg->max_position_embeddings);
    if (llama) {
        add_exact(r, "num_key_value_heads", (double)cfg->num_key_value_heads);
        add_exact(r, "head_dim", (double)cfg->head_dim);
        add_exact(r, "rope_theta", cfg->rotary_emb_base);
        add_exact(r, "rms_norm_eps", cfg->layer_norm_eps);
        cJSON_AddStringToObject(r, "hidden_act", "silu");
        cJSON_AddBoolToObject(r, "attention_bias", cfg->attention_bias);
        cJSON_AddBoolToObject(r, "mlp_bias", cfg->mlp_bias);
        cJSON_AddBoolToObject(r, "tie_word_embeddings", cfg->tie_word_embeddings);
        if (cfg->rope_scaling.type == HM_ROPE_LLAMA3) {
            cJSON *rs = cJSON_AddObjectToObject(r, "rope_scaling");
            cJSON_AddStringToObject(rs, "rope_type", "llama3");
            add_exact(rs, "factor", cfg->rope_scaling.factor);
            add_exact(rs, "low_freq_factor", cfg->rope_scaling.low_freq_factor);
            add_exact(rs, "high_freq_factor", cfg->rope_scaling.high_freq_factor);
            add_exact(rs, "original_max_position_embeddings",
                      (double)cfg->rope_scaling.original_max_position_embeddings);
        } else {
            cJSON_AddNullToObject(r, "rope_scaling");
        }
    } else {
        add_exact(r, "rotary_pct", cfg->rotary_pct);
        add_exact(r, "rotary_emb_base", cfg->rotary_emb_base);
        add_exact(r, "layer_norm_eps", cfg->layer_norm_eps);
        cJSON_AddBoolToObject(r, "use_parallel_residual", cfg->use_parallel_residual);
        cJSON_AddStringToObject(r, "hidden_act",
                                cfg->hidden_act == HM_ACT_GELU ? "gelu" : "gelu_new");
        cJSON_AddBoolToObject(r, "tie_word_embeddings", 0);
    }
    if (cfg->mixer != HM_MIXER_SOFTMAX)
        add_exact(r, "feature_dim", (double)cfg->feature_dim);
    if (cfg->mixer == HM_MIXER_HEDGEMAMBA) {
        add_exact(r, "conv_width", (double)cfg->conv_width);
        cJSON *c = cJSON_AddArrayToObject(r, "components");
        if (cfg->components & HM_COMP_SSM)
            cJSON_AddItemToArray(c, cJSON_CreateString("ssm"));
        if (cfg->components & HM_COMP_CONV)
            cJSON_AddItemToArray(c, cJSON_CreateString("conv"));
        if (cfg->components & HM_COMP_GATE)
            cJSON_AddItemToArray(c, cJSON_CreateString("gate"));
        /* written only when not the identity: files of the exact mapping
         * keep their bytes */
        if (cfg->decay_init == HM_DECAY_TEACHER)
            cJSON_AddStringToObject(r, "decay_init", "teacher");
    }
    if (hm_config_kept_count(cfg) > 0) { /* pure students keep their bytes */
        cJSON *lm = cJSON_AddArrayToObject(r, "layer_mixers");
        for (int64_t l = 0; l < cfg->num_hidden_layers; l++)
            cJSON_AddItemToArray(lm, cJSON_CreateString(hm_mixer_name(hm_layer_mixer(cfg, l))));
    }
    char *s = cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    return s;
}
