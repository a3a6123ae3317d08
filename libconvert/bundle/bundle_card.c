/* bundle_card.c — the README.md model card of a bundle (bundle.h): what the
 * model is, how it was made (the provenance chain), what it measured. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bundle.h"
#include "provenance.h"

static const char *const known_keys[] = {"tool", "version", "args", "inputs", "start", "end",
                                         "tokens", "final_loss"};

static void commas(FILE *f, double v)
{
    char raw[64];
    snprintf(raw, sizeof raw, "%.0f", v);
    size_t n = strlen(raw), neg = raw[0] == '-';
    for (size_t i = 0; i < n; i++) {
        if (i > neg && (n - i) % 3 == 0)
            fputc(',', f);
        fputc(raw[i], f);
    }
}

/* A shell word: bare when safe, else single-quoted; control bytes become '?'
 * so that no argument can end the code block. */
static void shell_word(FILE *f, const char *s)
{
    int bare = s[0] != '\0';
    for (const char *p = s; *p && bare; p++)
        bare = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./=:,+-@%",
                      *p) != NULL;
    if (bare) {
        fputs(s, f);
        return;
    }
    fputc('\'', f);
    for (const char *p = s; *p; p++) {
        if (*p == '\'')
            fputs("'\\''", f);
        else
            fputc((unsigned char)*p < 0x20 || *p == 0x7f ? '?' : *p, f);
    }
    fputc('\'', f);
}

/* Text for a table cell: '|' and control bytes replaced. */
static void cell(FILE *f, const char *s)
{
    for (const char *p = s; *p; p++)
        fputc(*p == '|' ? '/' : (unsigned char)*p < 0x20 ? ' ' : *p, f);
}

static const char *str_of(const cJSON *e, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void describe(FILE *f, const struct hm_config *c)
{
    const char *fam = c->family == HM_FAMILY_LLAMA ? "Llama" : "GPT-NeoX (Pythia)";
    switch (c->mixer) {
    case HM_MIXER_SOFTMAX:
        fprintf(f, "A %s Transformer with softmax attention: a teacher for distillation.\n", fam);
        break;
    case HM_MIXER_HEDGEHOG:
        fprintf(f, "A Hedgehog linear-attention student: the %s skeleton with every softmax "
                   "attention replaced by causal linear attention over learned feature maps "
                   "(stage 1 of *Attention to Mamba*).\n", fam);
        break;
    default:
        fprintf(f, "A HedgeMamba student: the %s skeleton with a Mamba-style selective SSM "
                   "mixer that starts as an exact copy of Hedgehog linear attention "
                   "(stage 2 of *Attention to Mamba*). Its decoding state does not grow with "
                   "the context.\n", fam);
    }
}

static void model_table(FILE *f, const struct hm_config *c, int64_t n_params, const char *dtypes,
                        const char *tok)
{
    const int llama = c->family == HM_FAMILY_LLAMA;
    fprintf(f, "## Model\n\n| | |\n|---|---|\n");
    fprintf(f, "| arch | `%s` |\n| family | `%s` (%s) |\n", hm_arch_name(c),
            hm_family_name(c->family),
            llama ? "RMSNorm, SwiGLU MLP, separate q/k/v projections, sequential residual"
                  : "LayerNorm, GELU MLP, fused interleaved qkv");
    fprintf(f, "| parameters | ");
    commas(f, (double)n_params);
    fprintf(f, " |\n| layers | %lld |\n| hidden size | %lld |\n", (long long)c->num_hidden_layers,
            (long long)c->hidden_size);
    fprintf(f, "| attention heads | %lld (head dim %lld) |\n", (long long)c->num_attention_heads,
            (long long)c->head_dim);
    if (llama)
        fprintf(f, "| key/value heads | %lld |\n", (long long)c->num_key_value_heads);
    fprintf(f, "| MLP width | %lld |\n| vocabulary | %lld |\n| max positions | %lld |\n",
            (long long)c->intermediate_size, (long long)c->vocab_size,
            (long long)c->max_position_embeddings);
    fprintf(f, "| rotary | %lld dims, base %g%s |\n| norm eps | %g |\n", (long long)c->rotary_dims,
            c->rotary_emb_base, c->rope_scaling.type == HM_ROPE_LLAMA3 ? ", llama3 scaling" : "",
            c->layer_norm_eps);
    if (c->mixer != HM_MIXER_SOFTMAX)
        fprintf(f, "| feature dim | %lld (feature maps give 2F = %lld features per head) |\n",
                (long long)c->feature_dim, (long long)(2 * c->feature_dim));
    if (c->mixer == HM_MIXER_HEDGEMAMBA) {
        char comps[32];
        hm_components_str(c->components, comps, sizeof comps);
        fprintf(f, "| conv width | %lld |\n| active components | %s |\n",
                (long long)c->conv_width, comps[0] ? comps : "none");
    }
    fprintf(f, "| weights | %s |\n| tokenizer | %s |\n\n", dtypes, tok);
}

static int is_tool_path(const char *arg, const char *tool)
{
    const char *slash = strrchr(arg, '/');
    return strcmp(slash ? slash + 1 : arg, tool) == 0;
}

static void commands(FILE *f, const cJSON *chain)
{
    fprintf(f, "```sh\n");
    const cJSON *e;
    cJSON_ArrayForEach(e, chain) {
        const char *tool = str_of(e, "tool");
        fputs(tool ? tool : "?", f);
        const cJSON *a;
        int first = 1;
        cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(e, "args")) {
            /* args[0] is argv[0]: the tool again, as it was invoked */
            int skip = first && cJSON_IsString(a) && tool && is_tool_path(a->valuestring, tool);
            first = 0;
            if (!cJSON_IsString(a) || skip)
                continue;
            fputc(' ', f);
            shell_word(f, a->valuestring);
        }
        fputc('\n', f);
    }
    fprintf(f, "```\n\n");
}

static void steps(FILE *f, const cJSON *chain)
{
    fprintf(f, "| step | tool | version | inputs (xxh3) | finished |\n|---|---|---|---|---|\n");
    int i = 1;
    const cJSON *e;
    cJSON_ArrayForEach(e, chain) {
        const char *tool = str_of(e, "tool"), *ver = str_of(e, "version"), *end = str_of(e, "end");
        fprintf(f, "| %d | ", i++);
        cell(f, tool ? tool : "?");
        fprintf(f, " | ");
        cell(f, ver ? ver : "?");
        fprintf(f, " | ");
        const cJSON *in;
        int k = 0;
        cJSON_ArrayForEach(in, cJSON_GetObjectItemCaseSensitive(e, "inputs")) {
            const char *p = str_of(in, "path"), *x = str_of(in, "xxh3");
            fprintf(f, "%s`", k++ ? ", " : "");
            cell(f, p ? p : "?");
            fprintf(f, "` (%s)", x ? x : "?");
        }
        if (!k)
            fprintf(f, "none");
        fprintf(f, " | %s |\n", end ? end : "not recorded");
    }
    fprintf(f, "\n");
}

static int is_known(const char *k)
{
    for (size_t i = 0; i < sizeof known_keys / sizeof *known_keys; i++)
        if (strcmp(k, known_keys[i]) == 0)
            return 1;
    return 0;
}

/* What an hm-linearize entry's final loss measures: its --objective as the
 * recorded args give it (getopt_long's spellings: "--objective X",
 * "--objective=X", an unambiguous prefix of at least "--ob"); cos without one. */
static const char *stage1_loss_label(const cJSON *e)
{
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
    const char *obj = "cos";
    int n = cJSON_IsArray(args) ? cJSON_GetArraySize(args) : 0;
    for (int i = 0; i < n; i++) {
        const cJSON *a = cJSON_GetArrayItem(args, i);
        if (!cJSON_IsString(a) || strncmp(a->valuestring, "--ob", 4) != 0)
            continue;
        const char *name = a->valuestring + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        if (len > strlen("objective") || strncmp(name, "objective", len) != 0)
            continue;
        const cJSON *v = eq ? NULL : cJSON_GetArrayItem(args, i + 1);
        obj = eq ? eq + 1 : cJSON_IsString(v) ? v->valuestring : obj;
    }
    if (strcmp(obj, "mse") == 0)
        return "mean squared error of the attention outputs over layers";
    if (strcmp(obj, "attn-ce") == 0)
        return "attention-weight cross-entropy over layers";
    return "mean 1 - cos over layers";
}

static void evaluations(FILE *f, const cJSON *chain)
{
    fprintf(f, "## Evaluations\n\n");
    int rows = 0, i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, chain) {
        i++;
        const cJSON *tok = cJSON_GetObjectItemCaseSensitive(e, "tokens");
        const cJSON *loss = cJSON_GetObjectItemCaseSensitive(e, "final_loss");
        int other = 0;
        const cJSON *x;
        cJSON_ArrayForEach(x, e) other += !is_known(x->string) && cJSON_IsNumber(x);
        if (!cJSON_IsNumber(tok) && !cJSON_IsNumber(loss) && !other)
            continue;
        if (!rows++)
            fprintf(f, "Measured by the tools that made it, as recorded in the provenance:\n\n"
                       "| step | tool | tokens seen | final loss | other |\n|---|---|---|---|---|\n");
        const char *tool = str_of(e, "tool");
        fprintf(f, "| %d | ", i);
        cell(f, tool ? tool : "?");
        fprintf(f, " | ");
        if (cJSON_IsNumber(tok))
            commas(f, tok->valuedouble);
        else
            fprintf(f, "-");
        if (cJSON_IsNumber(loss) && tool && strcmp(tool, "hm-linearize") == 0)
            fprintf(f, " | %.6g (%s) | ", loss->valuedouble, stage1_loss_label(e));
        else if (cJSON_IsNumber(loss))
            fprintf(f, " | %.6g (train PPL %.4g) | ", loss->valuedouble, exp(loss->valuedouble));
        else
            fprintf(f, " | - | ");
        int k = 0;
        cJSON_ArrayForEach(x, e) {
            if (is_known(x->string) || !cJSON_IsNumber(x))
                continue;
            fprintf(f, "%s", k++ ? ", " : "");
            cell(f, x->string);
            fprintf(f, " %.6g", x->valuedouble);
        }
        fprintf(f, "%s |\n", k ? "" : "-");
    }
    if (!rows)
        fprintf(f, "None recorded: the provenance holds no losses or evaluation results.\n");
    fprintf(f, "\nA final loss is the run's last training loss: per-token cross-entropy in nats "
               "(hm-finetune), the layer-wise stage-1 loss of contract §2 (hm-linearize; its "
               "--objective, 1 - cos by default). Measure "
               "held-out perplexity with `hm-eval BUNDLE --data VAL.tok --seq-len L`.\n\n");
}

char *hm_bundle_card(const struct hm_config *cfg, int64_t n_params, const char *dtypes,
                     const char *tokenizer_desc, const char *provenance,
                     const struct hm_bundle_card_file *files, int n_files)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    /* a chain that is not valid (hm_provenance_parse) is shown as none;
     * hm_bundle_pack refuses one before it gets here */
    cJSON *chain;
    struct hm_error err;
    if (hm_provenance_parse(provenance, &chain, &err) != HM_OK && !(chain = cJSON_CreateArray())) {
        fclose(f);
        free(buf);
        return NULL;
    }
    fprintf(f, "# %s model (%s family)\n\n", hm_arch_name(cfg), hm_family_name(cfg->family));
    describe(f, cfg);
    fprintf(f, "\nPacked by hm-pack as an hm bundle: `MANIFEST.json` lists every file and every "
               "tensor with its XXH3-64; `hm-verify bundle` checks them all. Every hm tool reads "
               "the bundle as a checkpoint (`hm-eval`, `hm-inspect`, `hm-finetune`, ...).\n\n");
    model_table(f, cfg, n_params, dtypes, tokenizer_desc);
    fprintf(f, "## How it was made\n\n");
    if (cJSON_GetArraySize(chain) == 0) {
        fprintf(f, "No provenance was recorded.\n\n");
    } else {
        fprintf(f, "The provenance chain (`hm.provenance` in `model.safetensors`, "
                   "`provenance` in `MANIFEST.json`), one tool run per line:\n\n");
        commands(f, chain);
        steps(f, chain);
    }
    evaluations(f, chain);
    fprintf(f, "## Files\n\n| file | bytes |\n|---|---|\n");
    for (int i = 0; i < n_files; i++) {
        fprintf(f, "| `");
        cell(f, files[i].name);
        fprintf(f, "` | ");
        commas(f, (double)files[i].bytes);
        fprintf(f, " |\n");
    }
    fprintf(f, "| `README.md` | this card |\n| `MANIFEST.json` | checksums of all the above |\n");
    cJSON_Delete(chain);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}
