/* sample.c — the sampler of sample.h: temperature, top-k, top-p,
 * renormalize, one splitmix64 draw. The steps are numbered as in sample.h;
 * the selections below only make them cheaper, never change their result:
 *  - top-k keeps the K best of ≺ with a heap (O(V log K)) instead of a sort;
 *  - top-p sorts only the candidates with w_i ≥ thr, thr = (1 − P)·W_k /
 *    (n − 1) / 2: {w ≥ thr} is a prefix of the ≺ order (w is monotone in
 *    the logit), so its running sums are the full walk's; a token of the
 *    nucleus has w ≥ (1 − P)·W_k / (n − 1) (otherwise everything from it on
 *    would weigh less than the 1 − P still missing), and if rounding ever
 *    let the short walk miss P·W_k, every kept token is sorted and walked. */
#include "sample.h"

#include "batches.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct cand {
    float l;    /* logit */
    int32_t id;
};

struct hm_sampler {
    int64_t V;
    struct hm_sample_params p;
    uint64_t rng;
    double *w;           /* [V] unnormalized probabilities */
    unsigned char *keep; /* [V] kept tokens */
    struct cand *c;      /* [V] candidates */
};

double hm_uniform53(uint64_t *state)
{
    return (double)(hm_splitmix64(state) >> 11) * 0x1.0p-53;
}

int32_t hm_sample_argmax(const float *x, int64_t n)
{
    int64_t best = 0;
    while (best < n - 1 && isnan(x[best]))
        best++;
    for (int64_t i = best + 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return (int32_t)best;
}

enum hm_status hm_sample_params_check(const struct hm_sample_params *p, struct hm_error *err)
{
    if (!(p->temperature == 0 || (p->temperature >= HM_SAMPLE_TEMPERATURE_MIN &&
                                  p->temperature <= HM_SAMPLE_TEMPERATURE_MAX)))
        return hm_error_set(err, HM_ERR_INVALID,
                            "temperature %g is out of range (0 = greedy, or %g .. %g)",
                            p->temperature, HM_SAMPLE_TEMPERATURE_MIN, HM_SAMPLE_TEMPERATURE_MAX);
    if (p->top_k < 0 || p->top_k > HM_SAMPLE_TOP_K_MAX)
        return hm_error_set(err, HM_ERR_INVALID, "top-k %lld is out of range (0 = off, or 1 .. %d)",
                            (long long)p->top_k, HM_SAMPLE_TOP_K_MAX);
    if (!(p->top_p > 0 && p->top_p <= 1))
        return hm_error_set(err, HM_ERR_INVALID, "top-p %g is outside (0, 1]", p->top_p);
    return HM_OK;
}

enum hm_status hm_sampler_new(int64_t V, const struct hm_sample_params *p, uint64_t seed,
                              struct hm_sampler **out, struct hm_error *err)
{
    *out = NULL;
    if (V < 1 || V > INT32_MAX)
        return hm_error_set(err, HM_ERR_INVALID, "vocabulary size %lld is out of range",
                            (long long)V);
    enum hm_status st = hm_sample_params_check(p, err);
    if (st != HM_OK)
        return st;
    struct hm_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    s->V = V;
    s->p = *p;
    s->rng = seed;
    s->w = malloc(sizeof(double) * (size_t)V);
    s->keep = malloc((size_t)V);
    s->c = malloc(sizeof(struct cand) * (size_t)V);
    if (!s->w || !s->keep || !s->c) {
        hm_sampler_free(s);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory for a sampler of %lld tokens",
                            (long long)V);
    }
    *out = s;
    return HM_OK;
}

void hm_sampler_free(struct hm_sampler *s)
{
    if (!s)
        return;
    free(s->w);
    free(s->keep);
    free(s->c);
    free(s);
}

uint64_t hm_sampler_rng_state(const struct hm_sampler *s)
{
    return s->rng;
}

/* a ≺ b: larger logit first, then the lower id. */
static int before(const struct cand *a, const struct cand *b)
{
    return a->l > b->l || (a->l == b->l && a->id < b->id);
}

static int cmp_cand(const void *x, const void *y)
{
    const struct cand *a = x, *b = y;
    return before(a, b) ? -1 : before(b, a) ? 1 : 0;
}

/* Max-heap on "worst first" (the root is the last of ≺ among h[0..n)). */
static void sift_down(struct cand *h, int64_t n, int64_t i)
{
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && before(&h[m], &h[l]))
            m = l;
        if (r < n && before(&h[m], &h[r]))
            m = r;
        if (m == i)
            return;
        struct cand t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

/* The first K of ≺ into c[0..K) (unordered). */
static void top_k(struct cand *c, const float *logits, int64_t V, int64_t K)
{
    for (int64_t i = 0; i < K; i++)
        c[i] = (struct cand){logits[i], (int32_t)i};
    for (int64_t i = K / 2 - 1; i >= 0; i--)
        sift_down(c, K, i);
    for (int64_t i = K; i < V; i++) {
        const struct cand x = {logits[i], (int32_t)i};
        if (before(&x, &c[0])) {
            c[0] = x;
            sift_down(c, K, 0);
        }
    }
}

/* Sum of w over the kept tokens in ascending id order. */
static double kept_sum(const struct hm_sampler *s)
{
    double W = 0;
    for (int64_t i = 0; i < s->V; i++)
        if (s->keep[i])
            W += s->w[i];
    return W;
}

/* Step 0: NaN and +inf are refused. */
static enum hm_status check_logits(const float *logits, int64_t V, struct hm_error *err)
{
    for (int64_t i = 0; i < V; i++)
        if (isnan(logits[i]) || logits[i] == INFINITY)
            return hm_error_set(err, HM_ERR_NUMERIC, "logit %lld is %s", (long long)i,
                                isnan(logits[i]) ? "NaN" : "+inf");
    return HM_OK;
}

/* Steps 0, 2–6: s->w and s->keep; *W the kept mass. */
static enum hm_status sample_truncate(struct hm_sampler *s, const float *logits, double *W,
                               struct hm_error *err)
{
    const int64_t V = s->V;
    const double T = s->p.temperature;
    enum hm_status st = check_logits(logits, V, err);
    if (st != HM_OK)
        return st;
    const int32_t top = hm_sample_argmax(logits, V);
    if (logits[top] == -INFINITY)
        return hm_error_set(err, HM_ERR_NUMERIC, "every logit is -inf");
    const double m = (double)logits[top] / T;
    for (int64_t i = 0; i < V; i++)
        s->w[i] = exp((double)logits[i] / T - m);
    /* 4. top-k */
    int64_t n = V;
    const int64_t K = s->p.top_k;
    if (K > 0 && K < V) {
        top_k(s->c, logits, V, K);
        memset(s->keep, 0, (size_t)V);
        for (int64_t j = 0; j < K; j++)
            s->keep[s->c[j].id] = 1;
        n = K;
    } else {
        memset(s->keep, 1, (size_t)V);
    }
    /* 5. top-p */
    const double P = s->p.top_p;
    if (P < 1 && n > 1) {
        const double Wk = kept_sum(s), goal = P * Wk;
        const double thr = (1 - P) * Wk / (double)(n - 1) * 0.5;
        int64_t nc = 0, end = -1;
        for (int pass = 0; pass < 2 && end < 0; pass++) {
            nc = 0;
            for (int64_t i = 0; i < V; i++)
                if (s->keep[i] && (pass == 1 || s->w[i] >= thr))
                    s->c[nc++] = (struct cand){logits[i], (int32_t)i};
            qsort(s->c, (size_t)nc, sizeof *s->c, cmp_cand);
            double c = 0;
            for (int64_t j = 0; j < nc && end < 0; j++)
                if ((c += s->w[s->c[j].id]) >= goal)
                    end = j;
            if (pass == 1 && end < 0)
                end = nc - 1; /* rounding: the whole kept set */
        }
        memset(s->keep, 0, (size_t)V);
        for (int64_t j = 0; j <= end; j++)
            s->keep[s->c[j].id] = 1;
    }
    /* 6. renormalize */
    *W = kept_sum(s);
    return HM_OK;
}

enum hm_status hm_sampler_probs(struct hm_sampler *s, const float *logits, double *probs,
                                struct hm_error *err)
{
    const int64_t V = s->V;
    if (s->p.temperature == 0) {
        enum hm_status st = check_logits(logits, V, err);
        if (st != HM_OK)
            return st;
        memset(probs, 0, sizeof(double) * (size_t)V);
        probs[hm_sample_argmax(logits, V)] = 1;
        return HM_OK;
    }
    double W;
    enum hm_status st = sample_truncate(s, logits, &W, err);
    if (st != HM_OK)
        return st;
    for (int64_t i = 0; i < V; i++)
        probs[i] = s->keep[i] ? s->w[i] / W : 0;
    return HM_OK;
}

enum hm_status hm_sampler_sample(struct hm_sampler *s, const float *logits, int32_t *token,
                                 struct hm_error *err)
{
    const int64_t V = s->V;
    if (s->p.temperature == 0) {
        enum hm_status st = check_logits(logits, V, err);
        if (st != HM_OK)
            return st;
        *token = hm_sample_argmax(logits, V);
        return HM_OK;
    }
    double W;
    enum hm_status st = sample_truncate(s, logits, &W, err);
    if (st != HM_OK)
        return st;
    /* 7. one draw, walked in ascending id order */
    const double t = hm_uniform53(&s->rng) * W;
    double c = 0;
    int32_t last = -1;
    for (int64_t i = 0; i < V; i++) {
        if (!s->keep[i])
            continue;
        last = (int32_t)i;
        if ((c += s->w[i]) > t) {
            *token = (int32_t)i;
            return HM_OK;
        }
    }
    *token = last;
    return HM_OK;
}
