/* gen_prompt.c — see gen_prompt.h. */
#include "gen_prompt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void hm_gen_parse_ids(const char *s, struct hm_ids *out)
{
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX)
            hm_usage_error("--prompt-ids '%s': expected comma-separated ids >= 0", s);
        int32_t id = (int32_t)v;
        if (hm_ids_append(out, &id, 1, NULL) != HM_OK)
            hm_die("out of memory");
        p = end;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\0')
            return;
        if (*p++ != ',')
            hm_usage_error("--prompt-ids '%s': expected comma-separated ids >= 0", s);
    }
}

struct hm_tokenizer *hm_gen_load_tokenizer(const struct hm_ckpt *ck, const char *model,
                                           const char *tokenizer, int bytes)
{
    struct hm_tokenizer *tok = NULL;
    struct hm_error err;
    size_t len = 0;
    const void *bundled = hm_ckpt_bundle_tokenizer(ck, &len);
    if (bytes) {
        if (hm_tokenizer_bytes(&tok, &err) != HM_OK)
            hm_die_err("cannot make", "bytes", &err);
    } else if (tokenizer) {
        if (hm_tokenizer_load(tokenizer, &tok, &err) != HM_OK)
            hm_die_err("cannot read", tokenizer, &err);
    } else if (bundled) {
        if (hm_tokenizer_load_memory(bundled, len, &tok, &err) != HM_OK)
            hm_die("cannot read '%s': its tokenizer: %s", model, err.msg);
    }
    return tok;
}

int hm_gen_end_ids(const struct hm_tokenizer *tok, const struct hm_config *c, const int32_t *eot,
                   int n_eot, int ignore, int32_t *out)
{
    int n = 0;
    if (ignore)
        return 0;
    if (n_eot) {
        memcpy(out, eot, sizeof(int32_t) * (size_t)n_eot);
        return n_eot;
    }
    if (tok) {
        int32_t cand[3] = {hm_tokenizer_eot_id(tok), hm_tokenizer_eos_id(tok),
                           hm_tokenizer_kind(tok) == HM_TOKENIZER_KIND_LLAMA2C
                               ? hm_tokenizer_bos_id(tok) : -1};
        for (int i = 0; i < 3; i++)
            if (cand[i] >= 0)
                out[n++] = cand[i];
    } else if (c->family == HM_FAMILY_LLAMA) {
        out[n++] = 1;
        out[n++] = 2;
    } else {
        out[n++] = c->vocab_size == 257 ? 256 : 0;
    }
    return n;
}

void hm_gen_make_prompt(struct hm_ids *ids, const char *prompt, const char *prompt_ids,
                        struct hm_tokenizer *tok, const char *tok_source,
                        const char *model, int64_t V)
{
    struct hm_error err;
    if (prompt_ids) {
        hm_gen_parse_ids(prompt_ids, ids);
    } else {
        const char *p = prompt ? prompt : "";
        unsigned fl = hm_tokenizer_bos_id(tok) >= 0 ? HM_TOKENIZER_BOS : 0;
        if (hm_tokenizer_encode_ex(tok, p, strlen(p), fl, ids, &err) != HM_OK)
            hm_die("cannot tokenize the prompt with '%s': %s", tok_source, err.msg);
        int32_t eot = hm_tokenizer_eot_id(tok);
        if (ids->n == 0 && eot >= 0)
            hm_ids_append(ids, &eot, 1, NULL);
        if (ids->n == 0)
            hm_die("cannot generate: the prompt is empty and '%s' has no BOS or end-of-text "
                   "id", tok_source);
    }
    for (int64_t i = 0; i < ids->n; i++)
        if (ids->v[i] >= V)
            hm_die("cannot generate from '%s': prompt token %d at position %lld is outside the "
                   "model's vocabulary (%lld)", model, ids->v[i], (long long)i, (long long)V);
}
