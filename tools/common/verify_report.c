/* verify_report.c — hm-verify's comparisons and their report (verify_report.h). */
#include "verify_report.h"

#include <math.h>
#include <stdio.h>

void hm_verify_worst_update(struct hm_verify_worst *w, const float *a, const float *b, int64_t T,
                            int64_t n, int64_t seq)
{
    double mref = w->max_ref;
    for (int64_t i = 0; i < T * n; i++)
        mref = fabs(b[i]) > mref ? fabs(b[i]) : mref;
    w->max_ref = mref;
    for (int64_t i = 0; i < T * n; i++) {
        double dlt = fabs((double)a[i] - (double)b[i]);
        if (dlt > w->max_abs || isnan(dlt)) {
            w->max_abs = isnan(dlt) ? INFINITY : dlt;
            w->seq = seq;
            w->pos = i / n;
            w->col = i % n;
        }
    }
    w->rel = w->max_ref > 0 ? w->max_abs / w->max_ref : w->max_abs;
}

int hm_verify_report(const struct hm_verify_how *o, const struct hm_verify_worst *lg,
                     const struct hm_verify_worst *layers, int64_t L, const char *what,
                     const struct hm_verify_decay *dc)
{
    const char *note = dc && dc->teacher
                           ? ", \"decay_init\": \"teacher\", \"note\": \"" HM_VERIFY_DECAY_NOTE "\""
                           : "";
    if (dc && dc->teacher && dc->layer >= 0) {
        if (o->json)
            printf("{\"version\": 1, \"check\": \"%s\", \"equivalent\": false, \"tolerance\": %g, "
                   "\"where\": {\"what\": \"A\", \"layer\": %lld, \"index\": %lld}%s}\n", o->mode,
                   o->tol, (long long)dc->layer, (long long)dc->head, note);
        else
            printf("NOT equivalent: %s\n", dc->msg);
        return 1;
    }
    if (dc && dc->teacher && !o->json)
        printf("%s\n", HM_VERIFY_DECAY_NOTE);
    int ok = lg->rel <= o->tol;
    for (int64_t l = 0; l < L; l++)
        ok = ok && layers[l].rel <= o->tol;
    /* the first failing place: layers in order, then the logits */
    int64_t bad = -1;
    for (int64_t l = 0; l < L && bad < 0; l++)
        if (layers[l].rel > o->tol)
            bad = l;
    const struct hm_verify_worst *w = bad >= 0 ? &layers[bad] : lg;
    if (o->json) {
        printf("{\"version\": 1, \"check\": \"%s\", \"equivalent\": %s, \"tolerance\": %g, "
               "\"max_abs\": %.9g, \"max_rel\": %.9g, \"where\": {\"what\": \"%s\", "
               "\"layer\": %lld, \"sequence\": %lld, \"position\": %lld, \"index\": %lld}, "
               "\"logits\": {\"max_abs\": %.9g, \"max_rel\": %.9g}%s, \"layers\": [",
               o->mode, ok ? "true" : "false", o->tol, w->max_abs, w->rel,
               bad >= 0 ? "mixer" : what, (long long)bad, (long long)w->seq, (long long)w->pos,
               (long long)w->col, lg->max_abs, lg->rel, note);
        for (int64_t l = 0; l < L; l++)
            printf("%s{\"layer\": %lld, \"max_abs\": %.9g, \"max_rel\": %.9g}", l ? ", " : "",
                   (long long)l, layers[l].max_abs, layers[l].rel);
        printf("]}\n");
    } else {
        for (int64_t l = 0; l < L && o->verbose; l++)
            printf("layer %lld mixer output: max abs %.3g, rel %.3g\n", (long long)l,
                   layers[l].max_abs, layers[l].rel);
        printf("%s: max abs %.3g, rel %.3g (tolerance %g)\n", what, lg->max_abs, lg->rel, o->tol);
        if (ok)
            printf("equivalent\n");
        else if (bad >= 0)
            printf("NOT equivalent: layer %lld mixer output, sequence %lld, position %lld, "
                   "channel %lld: rel error %.3g\n", (long long)bad, (long long)w->seq,
                   (long long)w->pos, (long long)w->col, w->rel);
        else
            printf("NOT equivalent: %s, sequence %lld, position %lld, index %lld: rel error "
                   "%.3g\n", what, (long long)w->seq, (long long)w->pos, (long long)w->col,
                   w->rel);
    }
    return ok ? 0 : 1;
}
