/* gen_text.c — see gen_text.h. */
#include "gen_text.h"

#include <stdlib.h>
#include <string.h>

struct hm_gen_text {
    const struct hm_tokenizer *tok;
    const char *const *stops;
    int n_stops;
    struct hm_ids ids;     /* prompt + new */
    char *base;            /* decode of the prompt */
    size_t base_len;
    char *full;            /* the last decode of prompt + new */
    size_t off, len;       /* the new text in full (cut before a stop string) */
    size_t released;       /* bytes of the new text handed out */
    int stop;              /* the stop string that ended it, or -1 */
};

void hm_gen_text_free(struct hm_gen_text *g)
{
    if (!g)
        return;
    hm_ids_release(&g->ids);
    free(g->base);
    free(g->full);
    free(g);
}

enum hm_status hm_gen_text_new(const struct hm_tokenizer *tok, const int32_t *prompt, int64_t n,
                               const char *const *stops, int n_stops, struct hm_gen_text **out,
                               struct hm_error *err)
{
    *out = NULL;
    struct hm_gen_text *g = calloc(1, sizeof *g);
    if (!g)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    g->tok = tok;
    g->stops = stops;
    g->n_stops = n_stops;
    g->stop = -1;
    enum hm_status st = hm_ids_append(&g->ids, prompt, n, err);
    if (st == HM_OK)
        st = hm_tokenizer_decode(tok, prompt, n, &g->base, &g->base_len, err);
    if (st != HM_OK) {
        hm_gen_text_free(g);
        return st;
    }
    *out = g;
    return HM_OK;
}

/* Bytes at the end of t: [n] that may still change or start a stop string. */
static size_t hold_back(const struct hm_gen_text *g, const char *t, size_t n)
{
    size_t hold = 0;
    /* an unfinished UTF-8 character: a lead byte needing more than follow */
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        unsigned c = (unsigned char)t[n - k];
        if ((c & 0xC0) == 0x80)
            continue;
        size_t need = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
        if (need > k)
            hold = k;
        break;
    }
    /* HuggingFace decoding replaces an unfinished character by U+FFFD */
    if (hm_tokenizer_kind(g->tok) == HM_TOKENIZER_KIND_HF_BPE && hold < 3 && n >= 3 &&
        memcmp(t + n - 3, "\xEF\xBF\xBD", 3) == 0)
        hold = 3;
    /* then the longest tail of the settled text that starts a stop string
     * (what the held bytes become may complete it) */
    const size_t m = n - hold;
    size_t k_max = 0;
    for (int i = 0; i < g->n_stops; i++) {
        const size_t ls = strlen(g->stops[i]);
        for (size_t k = ls - 1 < m ? ls - 1 : m; k > k_max; k--)
            if (memcmp(t + m - k, g->stops[i], k) == 0) {
                k_max = k;
                break;
            }
    }
    return hold + k_max;
}

/* Decodes prompt + new ids into g->full; finds the new text and a stop. */
static enum hm_status decode(struct hm_gen_text *g, struct hm_error *err)
{
    size_t n;
    free(g->full);
    g->full = NULL;
    enum hm_status st = hm_tokenizer_decode(g->tok, g->ids.v, g->ids.n, &g->full, &n, err);
    if (st != HM_OK)
        return st;
    size_t c = 0;
    while (c < g->base_len && c < n && g->full[c] == g->base[c])
        c++;
    g->off = c;
    g->len = n - c;
    const char *t = g->full + c;
    for (int i = 0; i < g->n_stops; i++) {
        const char *hit = memmem(t, g->len, g->stops[i], strlen(g->stops[i]));
        if (hit && (size_t)(hit - t) < g->len)
            g->len = (size_t)(hit - t), g->stop = i;
    }
    return HM_OK;
}

/* Hands out new text [released, end). */
static void release(struct hm_gen_text *g, size_t end, const char **out, size_t *len)
{
    *out = g->full ? g->full + g->off + g->released : "";
    *len = end > g->released ? end - g->released : 0;
    if (end > g->released)
        g->released = end;
}

enum hm_status hm_gen_text_push(struct hm_gen_text *g, int32_t id, const char **out, size_t *len,
                                int *stop, struct hm_error *err)
{
    *out = "";
    *len = 0;
    *stop = g->stop;
    enum hm_status st = hm_ids_append(&g->ids, &id, 1, err);
    if (st == HM_OK)
        st = decode(g, err);
    if (st != HM_OK)
        return st;
    size_t end = g->len;
    if (g->stop < 0)
        end -= hold_back(g, g->full + g->off, g->len);
    release(g, end, out, len);
    *stop = g->stop;
    return HM_OK;
}

void hm_gen_text_finish(struct hm_gen_text *g, const char **out, size_t *len)
{
    release(g, g->len, out, len);
}

const char *hm_gen_text_view(const struct hm_gen_text *g, size_t *len)
{
    *len = g->full ? g->len : 0;
    return g->full ? g->full + g->off : "";
}
