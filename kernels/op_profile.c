/* op_profile.c — the per-op time table (op_profile.h). */
#include "op_profile.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HM_OP_PROFILE_MAX 96

int hm_op_profile_on;
static struct hm_op_stat g_rows[HM_OP_PROFILE_MAX];
static int g_n;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void hm_op_profile_start(void)
{
    memset(g_rows, 0, sizeof g_rows);
    g_n = 0;
    hm_op_profile_on = 1;
}

void hm_op_profile_stop(void) { hm_op_profile_on = 0; }

void hm_op_timer_begin(struct hm_op_timer *t, const char *name)
{
    t->name = hm_op_profile_on ? name : NULL;
    t->t0 = t->name ? now_s() : 0;
}

void hm_op_timer_end(struct hm_op_timer *t, double flops)
{
    if (!t->name || !hm_op_profile_on)
        return;
    double dt = now_s() - t->t0;
    int i = 0;
    while (i < g_n && g_rows[i].name != t->name && strcmp(g_rows[i].name, t->name) != 0)
        i++;
    if (i == g_n) {
        if (g_n == HM_OP_PROFILE_MAX)
            return;
        g_rows[g_n++].name = t->name;
    }
    g_rows[i].calls++;
    g_rows[i].seconds += dt;
    g_rows[i].flops += flops;
}

static int by_seconds(const void *a, const void *b)
{
    double x = ((const struct hm_op_stat *)a)->seconds, y = ((const struct hm_op_stat *)b)->seconds;
    return (x < y) - (x > y);
}

const struct hm_op_stat *hm_op_profile_table(int *n)
{
    qsort(g_rows, (size_t)g_n, sizeof g_rows[0], by_seconds);
    *n = g_n;
    return g_rows;
}

void hm_op_profile_print(FILE *f, double total_s, int steps)
{
    int n;
    const struct hm_op_stat *r = hm_op_profile_table(&n);
    double sum = 0;
    fprintf(f, "| op | ms / step | share | calls / step | GFLOP/s |\n|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        sum += r[i].seconds;
        fprintf(f, "| %s | %.2f | %.1f %% | %.0f |", r[i].name, 1e3 * r[i].seconds / steps,
                100.0 * r[i].seconds / total_s, (double)r[i].calls / steps);
        if (r[i].flops > 0)
            fprintf(f, " %.1f |\n", r[i].flops / r[i].seconds / 1e9);
        else
            fprintf(f, " |\n");
    }
    fprintf(f, "| outside ops | %.2f | %.1f %% | | |\n", 1e3 * (total_s - sum) / steps,
            100.0 * (total_s - sum) / total_s);
}
