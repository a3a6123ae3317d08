/* verify_report.h — what hm-verify compares and how it reports it
 * (tools/hm-verify.c): the worst disagreement of two computations and the
 * verdict, as text or one JSON object. */
#ifndef HM_VERIFY_REPORT_H
#define HM_VERIFY_REPORT_H

#include <stdint.h>

/* The worst disagreement seen, and where. Zero-initialised before the
 * first update. */
struct hm_verify_worst {
    double max_abs, max_ref, rel;
    int64_t seq, pos, col;
};

/* Folds in a [T, n] (host) against its reference b [T, n] of sequence seq:
 * rel = max |a - b| / max |b| over everything folded in so far; a NaN
 * counts as an infinite error. */
void hm_verify_worst_update(struct hm_verify_worst *w, const float *a, const float *b, int64_t T,
                            int64_t n, int64_t seq);

/* A mapping whose A came from teacher statistics (hm-map-ssm --decay-from). */
struct hm_verify_decay {
    int teacher;         /* the config records decay_init teacher */
    int64_t layer, head; /* the first A that is not finite and <= 0, or -1 */
    char msg[256];
};

#define HM_VERIFY_DECAY_NOTE "A from teacher statistics; mapping checked with A = 0"

/* How a report is written: the check's name, its tolerance, the format. */
struct hm_verify_how {
    const char *mode;
    double tol;
    int json, verbose;
};

/* Prints the verdict on the logits (lg) and on L layers' mixer outputs
 * (layers [L], may be NULL with L = 0); what names the compared values; dc
 * (may be NULL) a decay from teacher statistics, whose bad A is reported
 * first. Returns the exit status: 0 equivalent, 1 not. */
int hm_verify_report(const struct hm_verify_how *o, const struct hm_verify_worst *lg,
                     const struct hm_verify_worst *layers, int64_t L, const char *what,
                     const struct hm_verify_decay *dc);

#endif
