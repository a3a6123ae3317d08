/* plan_report.h — a training plan's memory, as the tools print it: the peak
 * per process with its parts, the memory it is held against, the verdict,
 * and what to change when it does not fit (libconvert/train/plan.h makes
 * the numbers). */
#ifndef HM_PLAN_REPORT_H
#define HM_PLAN_REPORT_H

#include "plan.h"

struct cJSON;

struct hm_plan_env {
    double memory;        /* host bytes to plan for; 0: this machine's available */
    double gpu_memory;    /* device bytes to plan for (a device plan); 0: unknown */
    int local_procs;      /* processes of the run on this machine (≥ 1) */
    const char *note;     /* what the plan could not know here, or NULL */
    const char *indent;   /* text before each line of the text report, or NULL */
};

/* Host memory this process could still use: MemAvailable (/proc/meminfo),
 * or less under a cgroup limit (memory.max − memory.current); 0 unknown. */
double hm_plan_available(void);

/* Reports the plan of in: as text on stdout, or, with json, as members
 * "memory_bytes" (the parts and "total"), "device_memory_bytes",
 * "available_bytes", "fits", "advice" of json. Returns 1 when it fits
 * (or nothing is known to hold it against), 0 when it does not. Exits 1
 * on a plan that cannot be made. */
int hm_plan_report(const struct hm_plan_in *in, const struct hm_plan_env *env,
                   struct cJSON *json);

/* Bytes as "1.23 GB" (powers of 10, as the plans print them) into buf. */
void hm_plan_bytes_text(double bytes, char *buf, size_t size);

#endif
