/* plan_report.c — a training plan's memory as the tools print it
 * (plan_report.h). */
#include "plan_report.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

void hm_plan_bytes_text(double bytes, char *buf, size_t size)
{
    if (bytes >= 1e9)
        snprintf(buf, size, "%.2f GB", bytes / 1e9);
    else
        snprintf(buf, size, "%.1f MB", bytes / 1e6);
}

/* The first number after key in file f (a /proc or cgroup file), or -1. */
static double read_number(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[256];
    double v = -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, strlen(key)) != 0)
            continue;
        if (sscanf(line + strlen(key), "%lf", &v) != 1)
            v = -1;
        break;
    }
    fclose(f);
    return v;
}

double hm_plan_available(void)
{
    double avail = read_number("/proc/meminfo", "MemAvailable:");
    avail = avail > 0 ? avail * 1024 : 0;
    /* cgroup v2: a limit ("max" reads as no number) less what is in use */
    const double max = read_number("/sys/fs/cgroup/memory.max", "");
    const double cur = read_number("/sys/fs/cgroup/memory.current", "");
    if (max > 0 && cur >= 0 && (avail == 0 || max - cur < avail))
        avail = max - cur > 0 ? max - cur : 0;
    return avail;
}

static void plan_or_die(const struct hm_plan_in *in, struct hm_mem_plan *p)
{
    struct hm_error err;
    hm_error_clear(&err);
    if (hm_plan_train(in, p, &err) != HM_OK)
        hm_die_err("cannot plan", hm_ckpt_path(in->ck), &err);
}

/* 1 when plan p fits: host × local processes within host, the device
 * part within gpu (unknown limits hold anything). */
static int fits(const struct hm_mem_plan *p, double host, double gpu, int local)
{
    return (host <= 0 || p->host_total * local <= host) && (gpu <= 0 || p->dev_total <= gpu);
}

struct advice {
    char line[6][200];
    int n;
};

static void advise(struct advice *a, const char *fmt, double bytes, const char *what)
{
    char b[32];
    if (a->n >= 6)
        return;
    hm_plan_bytes_text(bytes, b, sizeof b);
    snprintf(a->line[a->n++], sizeof a->line[0], fmt, what, b);
}

/* What to change so that in fits: re-planned, not guessed. */
static void make_advice(const struct hm_plan_in *in, double host, double gpu, int local,
                        int device, struct advice *a)
{
    struct hm_plan_in x;
    struct hm_mem_plan p;
    char what[96];
    const double *tot = device ? &p.dev_total : &p.host_total;
    /* activations: the largest batch that divides this one (so that
     * --grad-accum keeps the tokens per step), then the longest window */
    for (x = *in; x.B > 1 && !in->stage1;) {
        do
            x.B--;
        while (in->B % x.B);
        x.accum = in->accum * (in->B / x.B);
        plan_or_die(&x, &p);
        if (fits(&p, host, gpu, local)) {
            snprintf(what, sizeof what, "--batch %lld --grad-accum %lld (the same tokens per "
                     "step)", (long long)x.B, (long long)x.accum);
            advise(a, "%s: %s", *tot, what);
            break;
        }
    }
    if (x.B == 1 || in->stage1) {
        for (x = *in, x.B = 1; x.T > 16;) {
            x.T /= 2;
            plan_or_die(&x, &p);
            if (fits(&p, host, gpu, local)) {
                snprintf(what, sizeof what, "--batch 1 --seq-len %lld", (long long)x.T);
                advise(a, "%s: %s", *tot, what);
                break;
            }
        }
    }
    if (!in->freeze_embeddings && !in->align && !in->stage1) {
        x = *in;
        x.freeze_embeddings = 1;
        plan_or_die(&x, &p);
        if (fits(&p, host, gpu, local))
            advise(a, "%s: %s", *tot, "--freeze embeddings (the moments of embed_in/embed_out go)");
    }
    if (!in->recompute && !in->align && !in->stage1) {
        x = *in;
        x.recompute = 1;
        plan_or_die(&x, &p);
        if (fits(&p, host, gpu, local))
            advise(a, "%s: %s", *tot, "--recompute (one layer's activations; ~1/3 more compute)");
    }
    if (in->adamw && !in->zero1 && in->procs > 1) {
        x = *in;
        x.zero1 = 1;
        plan_or_die(&x, &p);
        if (fits(&p, host, gpu, local))
            advise(a, "%s: %s per process", *tot, "--zero1");
    }
    if (in->adamw) {
        for (int P = in->procs < 2 ? 2 : 2 * in->procs; P <= 64; P *= 2) {
            x = *in;
            x.procs = P;
            x.zero1 = 1;
            plan_or_die(&x, &p);
            if (fits(&p, host, gpu, 1)) {
                snprintf(what, sizeof what, "mpirun -np %d ... --zero1, one process per machine "
                         "or GPU", P);
                advise(a, "%s: %s per process", *tot, what);
                break;
            }
        }
    }
    if (a->n == 0) { /* nothing above fits: say what the smallest run needs */
        x = *in;
        x.B = 1;
        x.T = in->T < 16 ? in->T : 16;
        x.freeze_embeddings = !in->align && !in->stage1;
        x.recompute = !in->align && !in->stage1;
        plan_or_die(&x, &p);
        snprintf(what, sizeof what, "no change fits; the smallest run (--batch 1 --seq-len "
                 "%lld%s) needs", (long long)x.T,
                 x.freeze_embeddings ? " --freeze embeddings --recompute" : "");
        advise(a, "%s %s: more memory, or more processes with --zero1", *tot, what);
    }
}

/* The teacher's parts of a memory line: its fp32 tensors, and its narrow
 * ones when it keeps any. */
static void teacher_text(const struct hm_mem_plan *p, const char *f32, const char *narrow,
                         const char *dtype)
{
    if (p->teacher_dtype == HM_DTYPE_F32)
        printf(" + teacher %s fp32", f32);
    else
        printf(" + teacher %s fp32 + %s %s", f32, narrow, dtype);
}

int hm_plan_report(const struct hm_plan_in *in, const struct hm_plan_env *env, cJSON *json)
{
    struct hm_mem_plan p;
    plan_or_die(in, &p);
    const int local = env->local_procs > 1 ? env->local_procs : 1;
    const double host = env->memory > 0 ? env->memory : hm_plan_available();
    const double gpu = in->device ? env->gpu_memory : 0;
    const int ok = fits(&p, host, gpu, local);
    struct advice a = {.n = 0};
    if (!ok)
        make_advice(in, host, gpu, local, in->device && gpu > 0 && p.dev_total > gpu, &a);
    const char *narrow = hm_dtype_name(p.teacher_dtype);
    if (json) {
        cJSON *m = cJSON_AddObjectToObject(json, "memory_bytes");
        for (int i = 0; i < HM_PLAN_N_PARTS; i++)
            cJSON_AddNumberToObject(m, hm_plan_part_name((enum hm_plan_part)i), p.host[i]);
        cJSON_AddNumberToObject(m, "total", p.host_total);
        if (in->device) {
            cJSON *d = cJSON_AddObjectToObject(json, "device_memory_bytes");
            for (int i = 0; i < HM_PLAN_N_PARTS; i++)
                cJSON_AddNumberToObject(d, hm_plan_part_name((enum hm_plan_part)i), p.dev[i]);
            cJSON_AddNumberToObject(d, "total", p.dev_total);
            if (gpu > 0)
                cJSON_AddNumberToObject(json, "gpu_memory_bytes", gpu);
        }
        cJSON_AddNumberToObject(json, "processes_here", local);
        if (host > 0)
            cJSON_AddNumberToObject(json, "available_bytes", host);
        cJSON_AddBoolToObject(json, "fits", ok);
        cJSON *adv = cJSON_AddArrayToObject(json, "advice");
        for (int i = 0; i < a.n; i++)
            cJSON_AddItemToArray(adv, cJSON_CreateString(a.line[i]));
        if (env->note && *env->note)
            cJSON_AddStringToObject(json, "note", env->note);
        return ok;
    }
    const char *ind = env->indent ? env->indent : "";
    char b[HM_PLAN_N_PARTS + 2][32];
    for (int i = 0; i < HM_PLAN_N_PARTS; i++)
        hm_plan_bytes_text(p.host[i], b[i], sizeof b[i]);
    hm_plan_bytes_text(p.host_total, b[HM_PLAN_N_PARTS], sizeof b[0]);
    const char *wname = in->stage1 ? "feature maps" : "weights fp32";
    printf("%smemory:     %s peak per process = %s %s + %s gradients + %s moments + "
           "%s activations + %s workspaces", ind, b[HM_PLAN_N_PARTS], b[HM_PLAN_WEIGHTS], wname,
           b[HM_PLAN_GRADS], b[HM_PLAN_MOMENTS], b[HM_PLAN_ACTIVATIONS], b[HM_PLAN_WORKSPACES]);
    if (in->teacher || in->stage1)
        teacher_text(&p, b[HM_PLAN_TEACHER_F32], b[HM_PLAN_TEACHER_NARROW], narrow);
    printf(" + %s buffers%s\n", b[HM_PLAN_BUFFERS], in->device ? " (host memory)" : "");
    if (in->device) {
        for (int i = 0; i < HM_PLAN_N_PARTS; i++)
            hm_plan_bytes_text(p.dev[i], b[i], sizeof b[i]);
        hm_plan_bytes_text(p.dev_total, b[HM_PLAN_N_PARTS], sizeof b[0]);
        printf("%sdevice:     %s of GPU memory = %s %s + %s gradients + %s moments + "
               "%s activations + %s workspaces", ind, b[HM_PLAN_N_PARTS], b[HM_PLAN_WEIGHTS], wname,
               b[HM_PLAN_GRADS], b[HM_PLAN_MOMENTS], b[HM_PLAN_ACTIVATIONS],
               b[HM_PLAN_WORKSPACES]);
        if (in->teacher || in->stage1)
            teacher_text(&p, b[HM_PLAN_TEACHER_F32], b[HM_PLAN_TEACHER_NARROW], narrow);
        printf(" + %s buffers\n", b[HM_PLAN_BUFFERS]);
    }
    hm_plan_bytes_text(host, b[0], sizeof b[0]);
    hm_plan_bytes_text(p.host_total * local, b[1], sizeof b[1]);
    if (host > 0)
        printf("%savailable:  %s of host memory%s; %s needed%s\n", ind, b[0],
               env->memory > 0 ? " (--memory)" : " here", b[1],
               local > 1 ? " by this machine's processes" : "");
    if (gpu > 0) {
        hm_plan_bytes_text(gpu, b[0], sizeof b[0]);
        printf("%sgpu:        %s (--gpu-memory)\n", ind, b[0]);
    }
    if (env->note && *env->note)
        printf("%snote:       %s\n", ind, env->note);
    printf("%sverdict:    %s\n", ind, ok ? (host > 0 || gpu > 0 ? "fits" : "no limit known")
                                  : "does NOT fit");
    for (int i = 0; i < a.n; i++)
        printf("%sadvice:     %s\n", ind, a.line[i]);
    return ok;
}
