/* device_select.c — which GPU a process uses (device_select.h). */
#include "device_select.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* The launchers' local-rank variables, the first one set wins. */
static const char *const g_rank_vars[] = {
    "OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
    "PMI_LOCAL_RANK",             "PMIX_LOCAL_RANK",           "SLURM_LOCALID",
    "LOCAL_RANK",
};

/* value as a non-negative int, or -1 */
static int parse_index(const char *value)
{
    char *end;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (errno || end == value || *end != '\0' || v < 0 || v > 1 << 20)
        return -1;
    return (int)v;
}

int hm_device_select(hm_env_lookup env, int n_devices, char *why, size_t why_len)
{
    char scratch[8];
    if (!why) {
        why = scratch;
        why_len = sizeof scratch;
    }
    if (n_devices < 1) {
        snprintf(why, why_len, "no visible device");
        return -1;
    }
    const char *v = env("HM_CUDA_DEVICE");
    if (v && *v) {
        int d = parse_index(v);
        if (d < 0 || d >= n_devices) {
            snprintf(why, why_len, "HM_CUDA_DEVICE='%s' is not a device index below %d", v,
                     n_devices);
            return -1;
        }
        snprintf(why, why_len, "HM_CUDA_DEVICE=%d of %d visible devices", d, n_devices);
        return d;
    }
    for (size_t i = 0; i < sizeof g_rank_vars / sizeof *g_rank_vars; i++) {
        v = env(g_rank_vars[i]);
        if (!v || !*v)
            continue;
        int r = parse_index(v);
        if (r < 0) {
            snprintf(why, why_len, "%s='%s' is not a local rank", g_rank_vars[i], v);
            return -1;
        }
        snprintf(why, why_len, "local rank %d (%s) of %d visible devices", r, g_rank_vars[i],
                 n_devices);
        return r % n_devices;
    }
    snprintf(why, why_len, "no launcher's local rank: device 0 of %d visible devices",
             n_devices);
    return 0;
}
