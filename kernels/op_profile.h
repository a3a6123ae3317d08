/* op_profile.h — per-op wall time of the backend's ops (bench_train
 * --profile, hm-finetune's per-op table).
 *
 * Every dispatching wrapper in kernels/dispatch.c times its call while
 * profiling is on: calls, seconds and (for the matrix products) the FLOPs
 * each op kind did, summed per op name. Off, a wrapper pays one branch.
 * Not thread-safe by design: ops are called from one thread (backend.h). */
#ifndef HM_OP_PROFILE_H
#define HM_OP_PROFILE_H

#include <stdint.h>
#include <stdio.h>

extern int hm_op_profile_on;

struct hm_op_timer {
    const char *name;  /* NULL when profiling is off */
    double t0;
};

/* Clears the table and turns profiling on / off. */
void hm_op_profile_start(void);
void hm_op_profile_stop(void);

/* name: a string literal (the op member's name), compared by content. */
void hm_op_timer_begin(struct hm_op_timer *t, const char *name);
/* flops: the FLOPs this call did (BENCH.md's count), 0 for "not counted". */
void hm_op_timer_end(struct hm_op_timer *t, double flops);

struct hm_op_stat {
    const char *name;
    int64_t calls;
    double seconds, flops;
};

/* The table so far, sorted by seconds, largest first. Borrowed: valid until
 * the next start. *n: its rows. */
const struct hm_op_stat *hm_op_profile_table(int *n);

/* Prints the table as Markdown: per op, ms per step, share of `total_s`
 * (the measured steps' wall time), calls per step, GFLOP/s where counted;
 * a last row "outside ops" for total_s minus the ops' sum. */
void hm_op_profile_print(FILE *f, double total_s, int steps);

#endif
