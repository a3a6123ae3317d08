/* eval_mc.c — hm-eval --mc (eval_mc.h). */
#include "eval_mc.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fileio.h"

struct mc_run {
    const struct hm_model *m;
    const struct hm_backend *be;
    struct hm_model_ws *ws;
};

/* flags: HM_TOKENIZER_BOS for tokenizers whose documents start with BOS
 * (llama2.c), as their token files do. */
static void encode(struct hm_tokenizer *tok, const char *s, size_t n, unsigned flags,
                   struct hm_ids *ids, const char *path, int line)
{
    struct hm_error err;
    if (hm_tokenizer_encode_ex(tok, s, n, flags, ids, &err) != HM_OK)
        hm_die("cannot read '%s': line %d: %s", path, line, err.msg);
}

/* A choice's ids. Tokenizers with a dummy prefix (llama2.c) encode the
 * context and choice as one text, the choice being the ids after the
 * context's (as lm-evaluation-harness does); others encode it alone. */
static void encode_choice(struct hm_tokenizer *tok, const char *cx, const char *ch,
                          const struct hm_ids *ctx_ids, struct hm_ids *ids, const char *path,
                          int line)
{
    if (hm_tokenizer_bos_id(tok) < 0) {
        encode(tok, ch, strlen(ch), 0, ids, path, line);
        return;
    }
    size_t a = strlen(cx), b = strlen(ch);
    char *joint = malloc(a + b + 1);
    struct hm_ids whole = {0};
    if (!joint)
        hm_die("out of memory");
    memcpy(joint, cx, a);
    memcpy(joint + a, ch, b + 1);
    encode(tok, joint, a + b, HM_TOKENIZER_BOS, &whole, path, line);
    if (whole.n > ctx_ids->n)
        hm_ids_append(ids, whole.v + ctx_ids->n, whole.n - ctx_ids->n, NULL);
    hm_ids_release(&whole);
    free(joint);
}

/* Summed log-likelihood of choice given context. */
static double score_choice(const struct mc_run *c, const struct hm_ids *ctx_ids,
                           const struct hm_ids *ch, const char *path, int line)
{
    int64_t n = ctx_ids->n + ch->n, maxp = c->m->cfg.max_position_embeddings;
    int32_t *seq = malloc(sizeof(int32_t) * (size_t)n);
    float *nll = malloc(sizeof(float) * (size_t)n);
    if (!seq || !nll)
        hm_die("out of memory");
    memcpy(seq, ctx_ids->v, sizeof(int32_t) * (size_t)ctx_ids->n);
    memcpy(seq + ctx_ids->n, ch->v, sizeof(int32_t) * (size_t)ch->n);
    int64_t start = 0; /* left truncation to the model's positions (T = n - 1 inputs) */
    if (maxp > 0 && n - 1 > maxp)
        start = n - 1 - maxp;
    if (start >= ctx_ids->n)
        hm_die("cannot read '%s': line %d: a choice is longer than the model's %lld "
               "positions", path, line, (long long)maxp);
    int64_t T = n - 1 - start;
    struct hm_error err;
    if (hm_model_nll(c->m, c->be, seq + start, seq + start + 1, T, nll, c->ws, &err) != HM_OK)
        hm_die("cannot evaluate '%s': line %d: %s", path, line, err.msg);
    double ll = 0;
    for (int64_t i = 0; i < ch->n; i++) /* choice token i is the target at ctx + i − 1 */
        ll -= (double)nll[ctx_ids->n + i - 1 - start];
    free(seq);
    free(nll);
    return ll;
}

void hm_eval_mc_run(const struct hm_model *m, const struct hm_backend *be,
                    struct hm_model_ws *ws, struct hm_tokenizer *tok, const char *path,
                    struct hm_eval_mc *res)
{
    const struct mc_run rc = {m, be, ws}, *c = &rc;
    struct hm_error err;
    int32_t eot = hm_tokenizer_eot_id(tok);
    char *text = NULL;
    size_t len = 0;
    if (hm_read_file(path, (size_t)1 << 31, &text, &len, &err) != HM_OK)
        hm_die_err("cannot read", path, &err);
    int line = 0;
    for (char *p = text, *nl; p && *p; p = nl ? nl + 1 : NULL) {
        nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        line++;
        if (strspn(p, " \t\r") == strlen(p))
            continue;
        cJSON *j = cJSON_Parse(p);
        cJSON *cx = cJSON_GetObjectItemCaseSensitive(j, "context");
        cJSON *chs = cJSON_GetObjectItemCaseSensitive(j, "choices");
        cJSON *lb = cJSON_GetObjectItemCaseSensitive(j, "label");
        int nch = cJSON_IsArray(chs) ? cJSON_GetArraySize(chs) : 0;
        if (!j || !cJSON_IsString(cx) || nch < 1 || !cJSON_IsNumber(lb) ||
            lb->valuedouble != floor(lb->valuedouble) || lb->valuedouble < 0 ||
            lb->valuedouble >= nch)
            hm_die("cannot read '%s': line %d: expected {\"context\": string, \"choices\": "
                   "[string, ...], \"label\": index of a choice}", path, line);
        struct hm_ids ctx_ids = {0};
        const unsigned flags = hm_tokenizer_bos_id(tok) >= 0 ? HM_TOKENIZER_BOS : 0;
        encode(tok, cx->valuestring, strlen(cx->valuestring), flags, &ctx_ids, path, line);
        if (ctx_ids.n == 0) {
            if (eot < 0)
                hm_die("cannot read '%s': line %d: empty context and the tokenizer has no "
                       "end-of-text token", path, line);
            hm_ids_append(&ctx_ids, &eot, 1, NULL);
        }
        int best = -1, best_n = -1;
        double bs = -INFINITY, bsn = -INFINITY;
        for (int k = 0; k < nch; k++) {
            cJSON *ch = cJSON_GetArrayItem(chs, k);
            if (!cJSON_IsString(ch) || !ch->valuestring[0])
                hm_die("cannot read '%s': line %d: choice %d is not a non-empty string",
                       path, line, k);
            struct hm_ids ids = {0};
            encode_choice(tok, cx->valuestring, ch->valuestring, &ctx_ids, &ids, path, line);
            if (ids.n == 0)
                hm_die("cannot read '%s': line %d: choice %d has no tokens", path, line, k);
            double s = score_choice(c, &ctx_ids, &ids, path, line);
            double sn = s / (double)strlen(ch->valuestring);
            if (s > bs)
                bs = s, best = k;
            if (sn > bsn)
                bsn = sn, best_n = k;
            hm_ids_release(&ids);
        }
        int label = (int)lb->valuedouble;
        res->questions++;
        res->correct += best == label;
        res->correct_norm += best_n == label;
        hm_ids_release(&ctx_ids);
        cJSON_Delete(j);
    }
    if (res->questions == 0)
        hm_die("cannot read '%s': no questions", path);
    free(text);
    hm_tokenizer_free(tok);
}

