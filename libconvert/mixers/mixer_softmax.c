/* mixer_softmax.c — the teacher's mixer: causal softmax attention per head,
 * softmax(q k^T / sqrt(p) + mask) v (contract §1, §1b with GQA through the
 * per-head layout), and its decoding step against a KV cache of rotated
 * keys and values per key/value head. */
#include "mixer.h"
#include "model.h"

static size_t sm_ws(const struct hm_config *c, const struct hm_backend *be, int64_t T)
{
    return hm_backend_attention_ws_size(be, T, c->num_attention_heads, c->head_dim);
}

static size_t sm_bws(const struct hm_config *c, const struct hm_backend *be, int64_t T)
{
    return hm_backend_attention_backward_ws_size(be, T, c->num_attention_heads, c->head_dim);
}

/* Room for positions 0..pos in the KV cache (doubling from 64), in be's
 * memory: a larger cache is allocated and the `filled` rows written so far
 * are copied into it by an op (hm_backend_copy2d) before the old one is
 * freed — never a realloc, which would read backend memory from the host. */
static enum hm_status kv_reserve(const struct hm_backend *be, struct hm_mixer_state *st,
                                 const struct hm_config *c, int64_t pos, int64_t filled,
                                 struct hm_error *err)
{
    if (pos < st->kv_cap)
        return HM_OK;
    const int64_t row = c->num_key_value_heads * c->head_dim;
    int64_t cap = st->kv_cap ? st->kv_cap : 64;
    while (cap <= pos) {
        if (cap > ((int64_t)1 << 40) / row)
            return hm_error_set(err, HM_ERR_NOMEM, "KV cache too large");
        cap *= 2;
    }
    float *k = hm_backend_alloc(be, sizeof(float) * (size_t)(cap * row));
    float *v = k ? hm_backend_alloc(be, sizeof(float) * (size_t)(cap * row)) : NULL;
    if (!k || !v) {
        hm_backend_free(be, (void **)&k);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory for the KV cache");
    }
    if (filled > st->kv_cap)
        filled = st->kv_cap;
    if (filled > 0) {
        hm_backend_copy2d(be, k, row, st->kc, row, filled, row);
        hm_backend_copy2d(be, v, row, st->vc, row, filled, row);
    }
    hm_backend_free(be, (void **)&st->kc);
    hm_backend_free(be, (void **)&st->vc);
    st->kc = k;
    st->vc = v;
    st->kv_cap = cap;
    return HM_OK;
}

/* Scratch of the attention of T rows at positions P0.. (grown as needed; its
 * contents need not survive: the old one is freed, a larger allocated). */
static enum hm_status scores_reserve(const struct hm_backend *be, struct hm_mixer_state *st,
                                     const struct hm_config *c, int64_t P0, int64_t T,
                                     struct hm_error *err)
{
    const int64_t need =
        hm_backend_attention_cached_scratch_floats(T, P0 + T, c->num_attention_heads);
    if (need <= st->scores_cap)
        return HM_OK;
    hm_backend_free(be, (void **)&st->scores);
    st->scores_cap = 0;
    if (!(st->scores = hm_backend_alloc(be, sizeof(float) * (size_t)need)))
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory for attention scores");
    st->scores_cap = need;
    return HM_OK;
}

/* T rows of each of B sequences against its KV cache (one step: T = 1; a
 * prefill chunk: B = 1): their rotated keys and values join the cache, then
 * row t attends to positions 0..pos + t (causal). */
static enum hm_status sm_decode(const struct hm_mix *x, struct hm_error *err)
{
    const struct hm_config *c = &x->m->cfg;
    const int64_t nh = c->num_attention_heads, nkv = c->num_key_value_heads, p = c->head_dim;
    const int64_t Da = c->attn_dim, H3 = 3 * Da, grp = nh / nkv, T = x->T;
    for (int64_t b = 0; b < x->B; b++) {
        struct hm_mixer_state *st = hm_mix_state(x, b);
        const int64_t P0 = hm_mix_pos(x, b);
        const float *qkv = x->a->qkv + b * T * H3;
        float *att = x->a->att + b * T * Da;
        enum hm_status s = kv_reserve(x->be, st, c, P0 + T - 1, P0, err);
        if (s == HM_OK)
            s = scores_reserve(x->be, st, c, P0, T, err);
        if (s != HM_OK)
            return s;
        /* the new key/value rows: each group's first query head holds them */
        for (int64_t t = 0; t < T; t++) {
            const float *heads = qkv + t * H3;
            const int64_t pos = P0 + t;
            hm_backend_copy2d(x->be, st->kc + pos * nkv * p, p, heads + p, grp * 3 * p, nkv, p);
            hm_backend_copy2d(x->be, st->vc + pos * nkv * p, p, heads + 2 * p, grp * 3 * p, nkv,
                              p);
        }
        hm_backend_attention_cached(x->be, att, qkv, H3, 3 * p, st->kc, st->vc, P0, T, nh, nkv,
                                    p, st->scores);
    }
    return HM_OK;
}

static enum hm_status sm_forward(const struct hm_mix *x, struct hm_error *err)
{
    if (x->st)
        return sm_decode(x, err);
    const struct hm_config *c = &x->m->cfg;
    const int64_t T = x->T, nh = c->num_attention_heads, p = c->head_dim, Da = c->attn_dim;
    const struct hm_layer_acts *a = x->a;
    for (int64_t b = 0; b < x->B; b++)
        hm_backend_attention_forward(x->be, a->att + b * T * Da, a->lse ? a->lse + b * nh * T : NULL,
                                     a->qkv + b * T * 3 * Da, T, nh, p, x->ws, x->ws_size);
    return HM_OK;
}

static void sm_backward(const struct hm_mix *x, const struct hm_mix_grads *g)
{
    const struct hm_config *c = &x->m->cfg;
    const int64_t T = x->T, nh = c->num_attention_heads, p = c->head_dim, Da = c->attn_dim;
    const struct hm_layer_acts *a = x->a;
    for (int64_t b = 0; b < x->B; b++)
        hm_backend_attention_backward(x->be, g->dqkv + b * T * 3 * Da, g->datt + b * T * Da,
                                      a->qkv + b * T * 3 * Da, a->att + b * T * Da,
                                      a->lse + b * nh * T, T, nh, p, x->ws, x->ws_size);
}

static int64_t sm_state_floats(const struct hm_config *c)
{
    (void)c;
    return 0; /* the KV cache grows with the context */
}

/* the full T×T square of scores and weighted values (BENCH.md) */
static double sm_flops(const struct hm_config *c, int64_t T)
{
    return 4.0 * (double)T * (double)c->attn_dim;
}

const struct hm_mixer_unit hm_mixer_softmax = {
    .name = "softmax",
    .bufs = 0,
    .ws_size = sm_ws,
    .backward_ws_size = sm_bws,
    .forward = sm_forward,
    .backward = sm_backward,
    .state_floats = sm_state_floats,
    .flops_per_token = sm_flops,
};
