/* quality.c — a student's outputs against its teacher's (quality.h). */
#include "quality.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_forward.h"
#include "recurrent.h"
#include "sample.h"

/* KL(softmax zt ‖ softmax zs) of one position, zt, zs: [V], in double
 * (terms where the teacher's probability is 0 add nothing). */
static double kl_row(const float *zt, const float *zs, int64_t V)
{
    double mt = -INFINITY, ms = -INFINITY, st = 0, ss = 0, kl = 0;
    for (int64_t i = 0; i < V; i++) {
        mt = zt[i] > mt ? zt[i] : mt;
        ms = zs[i] > ms ? zs[i] : ms;
    }
    for (int64_t i = 0; i < V; i++) {
        st += exp((double)zt[i] - mt);
        ss += exp((double)zs[i] - ms);
    }
    const double lt = mt + log(st), ls = ms + log(ss);
    for (int64_t i = 0; i < V; i++) {
        const double pt = exp((double)zt[i] - lt);
        if (pt > 0)
            kl += pt * (((double)zt[i] - lt) - ((double)zs[i] - ls));
    }
    return kl;
}

/* n tokens of m after prompt [p] into out [n]: sampled with smp, or greedy
 * (smp NULL). logits: [V] scratch. */
static enum hm_status decode(const struct hm_model *m, const struct hm_backend *be,
                             struct hm_model_state *st, const int32_t *prompt, int64_t p,
                             int64_t n, struct hm_sampler *smp, float *logits, int32_t *out,
                             struct hm_error *err)
{
    hm_model_state_reset(st);
    enum hm_status s = hm_model_prefill(m, be, st, prompt, p, 0, NULL, logits, err);
    for (int64_t k = 0; s == HM_OK && k < n; k++) {
        if (smp)
            s = hm_sampler_sample(smp, logits, &out[k], err);
        else
            out[k] = hm_sample_argmax(logits, m->cfg.vocab_size);
        if (s == HM_OK && k + 1 < n)
            s = hm_model_step(m, be, st, out[k], logits, err);
    }
    return s;
}

/* The teacher's NLL sum of seq[p .. p+n) given what precedes each token;
 * seq: [p + n], nll: [p + n − 1] scratch. */
static enum hm_status score(const struct hm_model *t, const struct hm_backend *be,
                            const int32_t *seq, int64_t p, int64_t n, float *nll,
                            struct hm_model_ws *ws, double *sum, struct hm_error *err)
{
    const int64_t T = p + n - 1;
    enum hm_status s = hm_model_nll(t, be, seq, seq + 1, T, nll, ws, err);
    for (int64_t k = p - 1; s == HM_OK && k < T; k++)
        *sum += (double)nll[k];
    return s;
}

/* kl and agreement over windows 0..W−1. zs, zt: [L, V] scratch. */
static enum hm_status forced(const struct hm_model *s, const struct hm_model *t,
                             const struct hm_backend *be, const int32_t *tokens,
                             const struct hm_quality_opts *o, float *zs, float *zt,
                             struct hm_model_ws *ws, struct hm_quality *q, struct hm_error *err)
{
    const int64_t L = o->seq_len, V = s->cfg.vocab_size;
    double kl = 0;
    int64_t same = 0;
    enum hm_status st = HM_OK;
    for (int64_t w = 0; st == HM_OK && w < o->windows; w++) {
        st = hm_model_forward(s, be, tokens + w * L, L, zs, ws, err);
        if (st == HM_OK)
            st = hm_model_forward(t, be, tokens + w * L, L, zt, ws, err);
        for (int64_t i = 0; st == HM_OK && i < L; i++) {
            kl += kl_row(zt + i * V, zs + i * V, V);
            same += hm_sample_argmax(zs + i * V, V) == hm_sample_argmax(zt + i * V, V);
        }
        if (st != HM_OK)
            hm_error_prefix(err, "window %lld: ", (long long)w);
    }
    q->kl = kl / (double)(o->windows * L);
    q->agreement = (double)same / (double)(o->windows * L);
    return st;
}

/* The prompt figures: per prompt each model samples (seed s + i) and
 * decodes greedily; the teacher scores both samples. */
static enum hm_status generated(const struct hm_model *s, const struct hm_model *t,
                                const struct hm_backend *be, const int32_t *tokens,
                                const struct hm_quality_opts *o, float *logits, float *nll,
                                int32_t *seq, int32_t *greedy, struct hm_model_ws *ws,
                                struct hm_quality *q, struct hm_error *err)
{
    const int64_t L = o->seq_len, p = o->prompt_len, n = o->new_tokens, V = s->cfg.vocab_size;
    const struct hm_model *mm[2] = {s, t};
    struct hm_model_state *ms[2] = {NULL, NULL};
    double sums[2] = {0, 0}, prefix = 0;
    enum hm_status st = hm_model_state_new(s, &ms[0], err);
    if (st == HM_OK)
        st = hm_model_state_new(t, &ms[1], err);
    const struct hm_sample_params sp = {.temperature = 1, .top_k = 0, .top_p = 1};
    for (int64_t i = 0; st == HM_OK && i < o->prompts; i++) {
        const int32_t *prompt = tokens + i * L;
        memcpy(seq, prompt, sizeof(int32_t) * (size_t)p);
        for (int k = 0; st == HM_OK && k < 2; k++) {
            struct hm_sampler *smp = NULL;
            st = hm_sampler_new(V, &sp, o->seed + (uint64_t)i, &smp, err);
            if (st == HM_OK)
                st = decode(mm[k], be, ms[k], prompt, p, n, smp, logits, seq + p, err);
            hm_sampler_free(smp);
            if (st == HM_OK)
                st = score(t, be, seq, p, n, nll, ws, &sums[k], err);
            if (st == HM_OK)
                st = decode(mm[k], be, ms[k], prompt, p, n, NULL, logits, greedy + k * n, err);
        }
        int64_t c = 0;
        while (st == HM_OK && c < n && greedy[c] == greedy[n + c])
            c++;
        prefix += (double)c;
        if (st != HM_OK)
            hm_error_prefix(err, "prompt %lld: ", (long long)i);
    }
    hm_model_state_free(ms[0]);
    hm_model_state_free(ms[1]);
    q->student_nll = sums[0] / (double)(o->prompts * n);
    q->teacher_nll = sums[1] / (double)(o->prompts * n);
    q->common_prefix = prefix / (double)o->prompts;
    return st;
}

enum hm_status hm_quality_measure(const struct hm_model *s, const struct hm_model *t,
                                  const struct hm_backend *be, const int32_t *tokens,
                                  int64_t n_tokens, const struct hm_quality_opts *o,
                                  struct hm_quality *out, struct hm_error *err)
{
    const int64_t L = o->seq_len, V = s->cfg.vocab_size, p = o->prompt_len, n = o->new_tokens;
    const int64_t tmax = t->cfg.max_position_embeddings;
    const int64_t W = o->windows > o->prompts ? o->windows : o->prompts;
    *out = (struct hm_quality){.student_nll = NAN, .teacher_nll = NAN, .common_prefix = NAN};
    if (t->cfg.vocab_size != V)
        return hm_error_set(err, HM_ERR_INVALID, "the teacher's vocabulary (%lld) differs from "
                            "the student's (%lld)", (long long)t->cfg.vocab_size, (long long)V);
    if (L < 1 || o->windows < 1 || o->prompts < 0 || (o->prompts && (p < 1 || p > L || n < 1)))
        return hm_error_set(err, HM_ERR_INVALID, "bad quality options: %lld windows of %lld, "
                            "%lld prompts of %lld (at most the window), %lld new tokens",
                            (long long)o->windows, (long long)L, (long long)o->prompts,
                            (long long)p, (long long)n);
    if (n_tokens < W * L + 1)
        return hm_error_set(err, HM_ERR_INVALID, "%lld tokens hold fewer than the %lld windows "
                            "of %lld the figures need", (long long)n_tokens, (long long)W,
                            (long long)L);
    if (o->prompts && t->cfg.mixer == HM_MIXER_SOFTMAX && tmax > 0 && p + n > tmax)
        return hm_error_set(err, HM_ERR_INVALID, "a prompt of %lld and %lld new tokens pass "
                            "the teacher's position limit, max_position_embeddings %lld",
                            (long long)p, (long long)n, (long long)tmax);
    for (int64_t i = 0; i < W * L + 1; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return hm_error_set(err, HM_ERR_INVALID, "token %lld (id %d) is outside the "
                                "vocabulary of %lld", (long long)i, tokens[i], (long long)V);
    const int64_t T = p + n;
    float *zs = malloc(sizeof(float) * (size_t)(L * V)), *zt = malloc(sizeof(float) * (size_t)(L * V));
    float *nll = malloc(sizeof(float) * (size_t)(T > 1 ? T : 1));
    int32_t *seq = malloc(sizeof(int32_t) * (size_t)T), *greedy = malloc(sizeof(int32_t) * (size_t)(2 * n + 1));
    struct hm_model_ws ws;
    hm_model_ws_init(&ws);
    enum hm_status st = zs && zt && nll && seq && greedy
                            ? HM_OK
                            : hm_error_set(err, HM_ERR_NOMEM, "out of memory for 2 x [%lld, %lld] "
                                           "logits", (long long)L, (long long)V);
    if (st == HM_OK)
        st = forced(s, t, be, tokens, o, zs, zt, &ws, out, err);
    if (st == HM_OK && o->prompts)
        st = generated(s, t, be, tokens, o, zs, nll, seq, greedy, &ws, out, err);
    hm_model_ws_release(&ws);
    free(zs), free(zt), free(nll), free(seq), free(greedy);
    return st;
}
