/* recurrent.c — one token at a time through any model (recurrent.h): the
 * forward skeleton (forward.h) with T = 1 (B sequences in a batch step), positions counting up from 0,
 * and each layer's mixer state (mixer.h): the KV cache (softmax, grown by
 * its unit), or the conv window and S of a student (constant size). A
 * batch step runs B sequences' tokens as the B rows of one pass, so every
 * weight is read once for all of them. Every buffer an op touches is the
 * model's backend's memory (recurrent.h: placement); host code only
 * uploads the token ids and downloads the logits. */
#include "recurrent.h"

#include <stdlib.h>
#include <string.h>

#include "forward.h"

struct hm_model_state {
    const struct hm_backend *be;   /* borrowed: the model's backend, where every buffer lives */
    int64_t pos;
    struct hm_model_ws ws;         /* steps and prefill chunks (grown on first use) */
    float *lse, *conv;             /* owned (be): prefill den [n_h, chunk], conv scratch */
    int64_t chunk_cap;
    int64_t L, floats;             /* constant-size state floats of all layers together */
    float *store;                  /* owned (be): windows and states of every layer */
    struct hm_mixer_state *st;     /* [L] (host structs pointing into be's memory) */
    float *scratch;                /* owned (be): the per-token vectors of the units */
    struct hm_mixer_state **bst;   /* [bcap] a batch step's states (this state leads it) */
    int64_t *bpos;                 /* [bcap] their positions */
    int64_t bcap;
};

void hm_model_state_free(struct hm_model_state *s)
{
    if (!s)
        return;
    for (int64_t l = 0; s->st && l < s->L; l++) {
        hm_backend_free(s->be, (void **)&s->st[l].kc);
        hm_backend_free(s->be, (void **)&s->st[l].vc);
        hm_backend_free(s->be, (void **)&s->st[l].scores);
    }
    free(s->st);
    hm_model_ws_release(&s->ws);
    hm_backend_free(s->be, (void **)&s->lse);
    hm_backend_free(s->be, (void **)&s->conv);
    hm_backend_free(s->be, (void **)&s->store);
    hm_backend_free(s->be, (void **)&s->scratch);
    free(s->bst);
    free(s->bpos);
    free(s);
}

void hm_model_state_reset(struct hm_model_state *s)
{
    s->pos = 0;
    if (s->floats > 0)
        hm_backend_fill(s->be, s->store, s->floats, 0.0f);
}

int64_t hm_model_state_pos(const struct hm_model_state *s)
{
    return s->pos;
}

int64_t hm_model_state_floats(const struct hm_model_state *s, int64_t n_kv, int64_t p)
{
    int64_t n = s->floats; /* the KV caches of the softmax layers grow with pos */
    for (int64_t l = 0; s->st && l < s->L; l++)
        n += s->st[l].kc ? 2 * s->pos * n_kv * p : 0;
    return n;
}

enum hm_status hm_model_state_new(const struct hm_model *m, struct hm_model_state **out,
                                  struct hm_error *err)
{
    *out = NULL;
    if (!m->be)
        return hm_error_set(err, HM_ERR_INVALID,
                            "the model's weights are in host memory: place it on a backend "
                            "(hm_model_place) before decoding");
    enum hm_status st = hm_model_check_placed(m, m->be, err);
    if (st != HM_OK)
        return st;
    const struct hm_backend *be = m->be;
    const struct hm_config *c = &m->cfg;
    const int64_t L = c->num_hidden_layers, nh = c->num_attention_heads, Da = c->attn_dim;
    struct hm_model_state *s = calloc(1, sizeof *s);
    if (!s)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    s->be = be;
    s->L = L;
    hm_model_ws_init(&s->ws);
    for (int64_t l = 0; l < L; l++)
        s->floats += hm_layer_unit(c, l)->state_floats(c);
    s->store = hm_backend_alloc(be, sizeof(float) * ((size_t)s->floats + 1));
    s->st = calloc((size_t)L + 1, sizeof *s->st);
    s->scratch = hm_backend_alloc(be, sizeof(float) * (size_t)(2 * nh + Da));
    if (!s->store || !s->st || !s->scratch) {
        hm_model_state_free(s);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    }
    /* empty states; the scratch: [n_h] ones, [n_h] zeros, [Da] the token's v */
    hm_backend_fill(be, s->store, s->floats + 1, 0.0f);
    hm_backend_fill(be, s->scratch, 2 * nh + Da, 0.0f);
    hm_backend_fill(be, s->scratch, nh, 1.0f);
    float *one = s->scratch, *zero = one + nh, *vv = zero + nh;
    /* each layer's constant state in turn: conv window (hedgemamba), then S */
    float *at = s->store;
    for (int64_t l = 0; l < L; l++) {
        const struct hm_mixer_unit *u = hm_layer_unit(c, l);
        struct hm_mixer_state *ms = &s->st[l];
        ms->win = at;
        ms->S = at + (u->bufs & HM_MIX_SSM ? (c->conv_width - 1) * c->qkv_dim : 0);
        at += u->state_floats(c);
        ms->v = vv;
        ms->one = one;
        ms->zero = zero;
    }
    if ((st = hm_backend_sync(be, err)) != HM_OK) {
        hm_model_state_free(s);
        return st;
    }
    *out = s;
    return HM_OK;
}

enum hm_status hm_model_state_copy(struct hm_model_state *dst, const struct hm_model_state *src,
                                   const struct hm_config *c, struct hm_error *err)
{
    if (dst->L != src->L || dst->floats != src->floats)
        return hm_error_set(err, HM_ERR_INVALID, "the states are of different models");
    if (dst->be != src->be)
        return hm_error_set(err, HM_ERR_INVALID,
                            "the states live on different backends ('%s', '%s')",
                            hm_backend_name(dst->be), hm_backend_name(src->be));
    const struct hm_backend *be = dst->be;
    const int64_t row = c->num_key_value_heads * c->head_dim;
    for (int64_t l = 0; l < src->L; l++) {
        const struct hm_mixer_state *a = &src->st[l];
        struct hm_mixer_state *b = &dst->st[l];
        if (!a->kc || src->pos == 0)
            continue;
        if (b->kv_cap < a->kv_cap) { /* dst's rows are all overwritten: no copy of them */
            hm_backend_free(be, (void **)&b->kc);
            hm_backend_free(be, (void **)&b->vc);
            b->kv_cap = 0;
            b->kc = hm_backend_alloc(be, sizeof(float) * (size_t)(a->kv_cap * row));
            b->vc = hm_backend_alloc(be, sizeof(float) * (size_t)(a->kv_cap * row));
            if (!b->kc || !b->vc) {
                hm_backend_free(be, (void **)&b->kc);
                hm_backend_free(be, (void **)&b->vc);
                return hm_error_set(err, HM_ERR_NOMEM, "out of memory for the KV cache");
            }
            b->kv_cap = a->kv_cap;
        }
        hm_backend_copy2d(be, b->kc, row, a->kc, row, src->pos, row);
        hm_backend_copy2d(be, b->vc, row, a->vc, row, src->pos, row);
    }
    if (src->floats > 0)
        hm_backend_copy2d(be, dst->store, 0, src->store, 0, 1, src->floats);
    dst->pos = src->pos;
    return hm_backend_sync(be, err);
}

/* The model is on be and so is every state of s [B]. */
static enum hm_status check_backend(const struct hm_model *m, const struct hm_backend *be,
                                    struct hm_model_state *const *s, int64_t B,
                                    struct hm_error *err)
{
    enum hm_status st = hm_model_check_placed(m, be, err);
    if (st != HM_OK)
        return st;
    for (int64_t b = 0; b < B; b++)
        if (s[b]->be != be)
            return hm_error_set(err, HM_ERR_INVALID,
                                "the decoding state%s lives on backend '%s', not '%s'",
                                B > 1 ? " of a sequence" : "", hm_backend_name(s[b]->be),
                                hm_backend_name(be));
    return HM_OK;
}

/* ws->out holds at least n floats (be's memory). */
static enum hm_status out_reserve(struct hm_model_ws *ws, const struct hm_backend *be, int64_t n,
                                  struct hm_error *err)
{
    if (n <= ws->out_cap)
        return HM_OK;
    hm_backend_free(be, (void **)&ws->out);
    ws->out_cap = 0;
    if (!(ws->out = hm_backend_alloc(be, sizeof(float) * (size_t)n)))
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory for %lld logits", (long long)n);
    ws->out_cap = n;
    return HM_OK;
}

enum hm_status hm_model_step_batch(const struct hm_model *m, const struct hm_backend *be,
                                   struct hm_model_state *const *s, int64_t B,
                                   const int32_t *tokens, float *logits, struct hm_error *err)
{
    const struct hm_config *c = &m->cfg;
    const int64_t V = c->vocab_size;
    if (B < 1)
        return hm_error_set(err, HM_ERR_INVALID, "a step needs at least one sequence");
    for (int64_t b = 0; b < B; b++) {
        if (tokens[b] < 0 || tokens[b] >= c->vocab_size)
            return hm_error_set(err, HM_ERR_INVALID,
                                "token id %d (sequence %lld) is outside the vocabulary (%lld)",
                                tokens[b], (long long)b, (long long)c->vocab_size);
        for (int64_t j = 0; j < b; j++)
            if (s[j] == s[b])
                return hm_error_set(err, HM_ERR_INVALID,
                                    "sequences %lld and %lld share one state", (long long)j,
                                    (long long)b);
    }
    enum hm_status st = check_backend(m, be, s, B, err);
    if (st != HM_OK)
        return st;
    struct hm_model_state *lead = s[0];
    if ((st = hm_model_ws_reserve(&lead->ws, m, be, B, err)) != HM_OK)
        return st;
    if (logits && (st = out_reserve(&lead->ws, be, B * V, err)) != HM_OK)
        return st;
    if (B > lead->bcap) {
        struct hm_mixer_state **bst = realloc(lead->bst, sizeof *bst * (size_t)B);
        if (bst)
            lead->bst = bst;
        int64_t *bpos = realloc(lead->bpos, sizeof *bpos * (size_t)B);
        if (bpos)
            lead->bpos = bpos;
        if (!bst || !bpos)
            return hm_error_set(err, HM_ERR_NOMEM, "out of memory for a batch of %lld",
                                (long long)B);
        lead->bcap = B;
    }
    for (int64_t b = 0; b < B; b++) {
        lead->bst[b] = s[b]->st;
        lead->bpos[b] = s[b]->pos;
    }
    struct hm_model_ws *w = &lead->ws;
    hm_backend_upload(be, w->ids, tokens, sizeof(int32_t) * (size_t)B);
    const struct hm_fwd f = {.B = B, .T = 1, .pos0 = lead->pos, .la = &w->acts, .shared = 1,
                             .h_out = w->h, .o = w->o, .m = w->m, .act = w->mh, .ws = w->att_ws,
                             .ws_size = w->att_ws_size, .st = lead->bst, .pos = lead->bpos};
    if ((st = hm_model_layers_forward(m, be, w->ids, &f, err)) != HM_OK)
        return st;
    for (int64_t b = 0; b < B; b++)
        s[b]->pos++;
    if (!logits)
        return hm_backend_sync(be, err);
    hm_model_norm_forward(m, be, w->hf, NULL, NULL, w->h, m->lnf_w, m->lnf_b, B);
    hm_model_head(m, w->out, w->hf, B);
    /* one read of every sequence's row */
    hm_backend_download(be, logits, w->out, sizeof(float) * (size_t)(B * V));
    return hm_backend_sync(be, err);
}

enum hm_status hm_model_step(const struct hm_model *m, const struct hm_backend *be,
                             struct hm_model_state *s, int32_t token, float *logits,
                             struct hm_error *err)
{
    return hm_model_step_batch(m, be, &s, 1, &token, logits, err);
}

/* Buffers of prefill chunks of up to T tokens (be's memory). */
static enum hm_status prefill_reserve(const struct hm_model *m, const struct hm_backend *be,
                                      struct hm_model_state *s, int64_t T, struct hm_error *err)
{
    const struct hm_config *c = &m->cfg;
    enum hm_status st = hm_model_ws_reserve(&s->ws, m, be, T, err);
    if (st != HM_OK || T <= s->chunk_cap)
        return st;
    const int64_t K = hm_mixers_bufs(c) & HM_MIX_SSM ? c->conv_width : 1;
    hm_backend_free(be, (void **)&s->lse);
    hm_backend_free(be, (void **)&s->conv);
    s->lse = hm_backend_alloc(be, sizeof(float) * (size_t)(c->num_attention_heads * T));
    s->conv = hm_backend_alloc(be, sizeof(float) * (size_t)(2 * (K - 1 + T) * c->qkv_dim));
    if (!s->lse || !s->conv) {
        s->chunk_cap = 0;
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory for prefill buffers");
    }
    for (int64_t l = 0; l < s->L; l++) {
        s->st[l].conv_in = s->conv;
        s->st[l].conv_out = s->conv + (K - 1 + T) * c->qkv_dim;
    }
    s->chunk_cap = T;
    return HM_OK;
}

enum hm_status hm_model_prefill(const struct hm_model *m, const struct hm_backend *be,
                                struct hm_model_state *s, const int32_t *tokens, int64_t n,
                                int64_t chunk, float *logits, float *last, struct hm_error *err)
{
    const struct hm_config *c = &m->cfg;
    const int64_t d = c->hidden_size, V = c->vocab_size;
    if (chunk <= 0)
        chunk = HM_PREFILL_CHUNK;
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return hm_error_set(err, HM_ERR_INVALID,
                                "token id %d at position %lld is outside the vocabulary (%lld)",
                                tokens[i], (long long)i, (long long)V);
    enum hm_status st = check_backend(m, be, &s, 1, err);
    if (st != HM_OK)
        return st;
    for (int64_t t0 = 0; t0 < n; t0 += chunk) {
        const int64_t T = n - t0 < chunk ? n - t0 : chunk;
        if ((st = prefill_reserve(m, be, s, T, err)) != HM_OK)
            return st;
        struct hm_model_ws *w = &s->ws;
        w->acts.lse = s->lse;
        hm_backend_upload(be, w->ids, tokens + t0, sizeof(int32_t) * (size_t)T);
        struct hm_mixer_state *const sts[1] = {s->st};
        const struct hm_fwd f = {.B = 1, .T = T, .pos0 = s->pos, .la = &w->acts, .shared = 1,
                                 .h_out = w->h, .o = w->o, .m = w->m, .act = w->mh,
                                 .ws = w->att_ws, .ws_size = w->att_ws_size, .st = sts};
        if ((st = hm_model_layers_forward(m, be, w->ids, &f, err)) != HM_OK)
            return st;
        s->pos += T;
        /* only the logits asked for: every row, or the prompt's last */
        const int64_t r0 = logits ? 0 : T - 1;
        if (!logits && (!last || t0 + T < n))
            continue;
        hm_model_norm_forward(m, be, w->hf, NULL, NULL, w->h + r0 * d, m->lnf_w, m->lnf_b,
                              T - r0);
        /* ws->logits holds HM_MODEL_NLL_ROWS rows: computed there, then read */
        for (int64_t r = 0; logits && r < T; r += HM_MODEL_NLL_ROWS) {
            const int64_t k = T - r < HM_MODEL_NLL_ROWS ? T - r : HM_MODEL_NLL_ROWS;
            hm_model_head(m, w->logits, w->hf + r * d, k);
            hm_backend_download(be, logits + (t0 + r) * V, w->logits,
                                sizeof(float) * (size_t)(k * V));
        }
        if (last && t0 + T == n) {
            hm_model_head(m, w->logits, w->hf + (T - 1 - r0) * d, 1);
            hm_backend_download(be, last, w->logits, sizeof(float) * (size_t)V);
        }
    }
    return hm_backend_sync(be, err);
}
