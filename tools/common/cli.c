#include "cli.h"

#include "model.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "atomic_file.h"
#include "checkpoint.h"
#include "dist.h"
#include "run.h"

static const char *g_prog = "hm";
static const char *g_usage = "";
static char **g_argv;
static char g_who[64];   /* " (process r of N)" on processes r > 0 */
static int g_secondary;  /* a process r > 0 of a run: hm_info stays quiet */

/* The tools that run as several processes (hm_cli_dist_open). */
static int runs_distributed(const char *prog)
{
    static const char *const tools[] = {"hm-finetune", "hm-linearize", "hm-eval"};
    for (size_t i = 0; i < sizeof tools / sizeof *tools; i++)
        if (strcmp(prog, tools[i]) == 0)
            return 1;
    return 0;
}

static void on_signal(int sig)
{
    hm_afile_cleanup_all();
    hm_output_release_all();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* A closed standard descriptor (`<&-`, `>&-`) would be taken by the next
 * open: an output's temp file would become "stdin". Each closed one gets
 * /dev/null opened the wrong way round (0 write-only, 1 and 2 read-only),
 * so that reading stdin or writing stdout fails with EBADF, truthfully. */
static void hold_std_fds(void)
{
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            int n = open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY);
            if (n >= 0 && n != fd) {
                dup2(n, fd);
                close(n);
            }
        }
}

void hm_cli_init(const char *prog, const char *usage, char **argv)
{
    hold_std_fds();
    g_argv = argv;
    g_prog = prog;
    g_usage = usage;
    opterr = 0;
    atexit(hm_output_release_all);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGHUP, on_signal);
    signal(SIGPIPE, on_signal);
    const int n = hm_dist_launched_size();
    if (n > 1 && !runs_distributed(prog)) {
        fprintf(stderr, "%s: error: started by an MPI launcher with %d processes; %s runs as "
                "one process (only hm-finetune, hm-linearize and hm-eval run as several)\n",
                prog, n, prog);
        exit(HM_EXIT_USAGE);
    }
}

const char *hm_cli_backend_name(const char *device, const char *backend)
{
    const char *name = backend ? backend : "fast";
    if (device && strcmp(device, "cuda") == 0) {
        if (backend && strcmp(backend, "cuda") != 0)
            hm_usage_error("--device cuda and --backend %s disagree", backend);
        name = "cuda";
    } else if (device && strcmp(device, "cpu") == 0) {
        if (backend && strcmp(backend, "cuda") == 0)
            hm_usage_error("--device cpu and --backend cuda disagree");
    } else if (device) {
        hm_usage_error("--device must be cpu or cuda, got '%s'", device);
    }
    return name;
}

const struct hm_backend *hm_cli_backend_try(const char *device, const char *backend,
                                            struct hm_error *err)
{
    const char *name = hm_cli_backend_name(device, backend);
    const struct hm_backend *be;
    enum hm_status st = hm_backend_acquire(name, &be, err);
    if (st == HM_ERR_INVALID)
        hm_usage_error("%s", err->msg);
    return st == HM_OK ? be : NULL;
}

const struct hm_backend *hm_cli_backend(const char *device, const char *backend)
{
    struct hm_error err;
    hm_error_clear(&err);
    const struct hm_backend *be = hm_cli_backend_try(device, backend, &err);
    if (!be)
        hm_die("cannot use backend '%s': %s", hm_cli_backend_name(device, backend), err.msg);
    return be;
}

int hm_cli_default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN) / hm_dist_local_size();
    return n > 0 && n < 4096 ? (int)n : 1;
}

void hm_cli_dist_open(struct hm_run_comm *comm)
{
    struct hm_error err;
    hm_error_clear(&err);
    enum hm_status st = hm_dist_open(comm, &err);
    if (st == HM_ERR_UNSUPPORTED) {
        hm_error("%s", err.msg);
        exit(HM_EXIT_USAGE);
    }
    if (st != HM_OK)
        hm_die("%s", err.msg);
    if (comm->size > 1 && comm->rank > 0) {
        snprintf(g_who, sizeof g_who, " (process %d of %d)", comm->rank, comm->size);
        g_secondary = 1;
    }
}

void hm_cli_check_json_stdout(const char *out, int json, int dry_run)
{
    if (json && !dry_run && out && strcmp(out, "-") == 0)
        hm_usage_error("--json and -o - both want stdout (the data goes there; the report "
                       "would corrupt it)");
}

void hm_cli_check_stdin(const char *const *path, const char *const *what, int n,
                        const struct hm_run_comm *comm)
{
    int first = -1;
    for (int i = 0; i < n; i++) {
        if (!path[i] || strcmp(path[i], "-") != 0)
            continue;
        if (first >= 0)
            hm_usage_error("%s and %s are both '-' (stdin): at most one input can be read "
                           "from stdin", what[first], what[i]);
        first = i;
    }
    if (first >= 0 && comm && comm->size > 1)
        hm_usage_error("%s is '-' (stdin), but under an MPI launcher stdin reaches process 0 "
                       "only: give a file (the same path on every process)", what[first]);
}

void hm_cli_agree(const struct hm_run_comm *comm, const char *const *fkey,
                  const char *const *file, int nf, const char *const *flag,
                  const int64_t *val, int nn)
{
    if (!comm || comm->size < 2)
        return;
    struct hm_agreement *a = calloc(1, sizeof *a);
    struct hm_error err;
    hm_error_clear(&err);
    if (!a)
        hm_die("out of memory");
    hm_agree_flag(a, "the tool", "%s", g_prog);
    for (int i = 0; i < nf; i++)
        hm_agree_file(a, fkey[i], file[i], file[i] ? hm_run_checkpoint_hash(file[i]) : 0);
    for (int i = 0; i < nn; i++)
        hm_agree_flag(a, flag[i], "%lld", (long long)val[i]);
    enum hm_status st = hm_run_agree(comm, a, &err);
    free(a);
    if (st != HM_OK)
        hm_die("%s", err.msg);
}

const char *hm_prog(void) { return g_prog; }

/* One message line "prog[ (process r of N)]: [sev: ]text\n", in ONE write(2)
 * to stderr: under a launcher the lines of several processes share one
 * stream and must not interleave mid-line. A line longer than the buffer
 * is cut (marked "..."). */
static void write_line(const char *sev, const char *fmt, va_list ap)
{
    char buf[4096];
    int n = snprintf(buf, sizeof buf, "%s%s: %s%s", g_prog, sev ? g_who : "", sev ? sev : "",
                     sev ? ": " : "");
    if (n < 0)
        return;
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    size_t len = (size_t)n + (m > 0 ? (size_t)m : 0);
    if (len > sizeof buf - 2) {
        len = sizeof buf - 2;
        memcpy(buf + len - 3, "...", 3);
    }
    buf[len++] = '\n';
    fflush(stderr); /* anything the tool wrote to stderr before comes first */
    for (size_t at = 0; at < len;) {
        ssize_t w = write(STDERR_FILENO, buf + at, len - at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        at += (size_t)w;
    }
}

static void vmsg(const char *sev, const char *fmt, va_list ap)
{
    write_line(sev, fmt, ap);
}

void hm_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg("error", fmt, ap);
    va_end(ap);
}

void hm_warning(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg("warning", fmt, ap);
    va_end(ap);
}

void hm_info(const struct hm_cli_common *c, const char *fmt, ...)
{
    if ((c && c->quiet) || g_secondary)
        return;
    va_list ap;
    va_start(ap, fmt);
    write_line(NULL, fmt, ap);
    va_end(ap);
}

void hm_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg("error", fmt, ap);
    va_end(ap);
    hm_afile_cleanup_all();
    hm_dist_close(HM_EXIT_FAIL);
    exit(HM_EXIT_FAIL);
}

void hm_die_err(const char *what, const char *path, const struct hm_error *err)
{
    hm_die("%s '%s': %s", what, path, err && err->msg[0] ? err->msg : "unknown error");
}

void hm_cli_hold_output(const char *path)
{
    struct hm_error err;
    hm_error_clear(&err);
    if (path && hm_output_hold(path, &err) != HM_OK)
        hm_die_err("cannot write", path, &err);
}

/* The short usage: the text up to the first blank line. */
static void print_short_usage(FILE *fp)
{
    const char *end = strstr(g_usage, "\n\n");
    int n = end ? (int)(end - g_usage) : (int)strlen(g_usage);
    fprintf(fp, "%.*s\n", n, g_usage);
    fprintf(fp, "Try '%s --help' for more information.\n", g_prog);
}

void hm_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg("error", fmt, ap);
    va_end(ap);
    print_short_usage(stderr);
    hm_dist_close(HM_EXIT_USAGE);
    exit(HM_EXIT_USAGE);
}

int hm_cli_common_opt(int c, struct hm_cli_common *common)
{
    switch (c) {
    case 'h':
        fputs(g_usage, stdout);
        exit(hm_cli_finish(HM_EXIT_OK));
    case HM_OPT_VERSION:
        printf("%s (hm) %s\n", g_prog, HM_VERSION);
        exit(hm_cli_finish(HM_EXIT_OK));
    case 'q': common->quiet++; return 1;
    case 'v': common->verbose++; return 1;
    case HM_OPT_JSON: common->json = 1; return 1;
    case HM_OPT_PROGRESS: common->progress = 1; return 1;
    case HM_OPT_NO_PROGRESS: common->progress = 0; return 1;
    case ':':
        if (optopt && optopt < 256)
            hm_usage_error("option '-%c' needs a value", optopt);
        hm_usage_error("option '%s' needs a value", g_argv ? g_argv[optind - 1] : "?");
    case '?':
    default:
        if (optopt && optopt < 256)
            hm_usage_error("unknown option '-%c'", optopt);
        hm_usage_error("unknown option '%s'", g_argv ? g_argv[optind - 1] : "?");
    }
    return 0;
}

uint64_t hm_parse_bytes(const char *s, const char *opt)
{
    static const struct {
        const char *suffix;
        uint64_t mul;
    } units[] = {{"", 1},          {"B", 1},          {"kB", 1000},       {"KB", 1000},
                 {"MB", 1000000},  {"GB", 1000000000}, {"TB", 1000000000000},
                 {"KiB", 1 << 10}, {"MiB", 1 << 20},   {"GiB", 1 << 30},   {"TiB", 1ull << 40},
                 /* one letter, as dd(1) and sort -S: 2^10.. */
                 {"K", 1 << 10},   {"M", 1 << 20},     {"G", 1 << 30},     {"T", 1ull << 40}};
    char *end = NULL;
    errno = 0;
    unsigned long long v = s[0] >= '0' && s[0] <= '9' ? strtoull(s, &end, 10) : 0;
    uint64_t out = 0;
    int ok = end && end != s && errno == 0;
    for (size_t i = 0; ok && i < sizeof units / sizeof *units; i++)
        if (strcmp(end, units[i].suffix) == 0) {
            if (__builtin_mul_overflow((uint64_t)v, units[i].mul, &out))
                break;
            if (out == 0)
                hm_usage_error("option '%s' must be at least 1 byte, got '%s'", opt, s);
            return out;
        }
    hm_usage_error("option '%s' needs a size in bytes (a number, or one with B, KB, MB, GB, "
                   "TB = 10^3.., K, M, G, T or KiB, MiB, GiB, TiB = 2^10..), got '%s'", opt, s);
}

int64_t hm_parse_i64(const char *s, const char *opt, int64_t min, int64_t max)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    /* accept 1e6-style and k/M/G suffixes for counts */
    if (end && (*end == 'e' || *end == 'E' || *end == '.')) {
        double d = strtod(s, &end);
        if (*end == '\0' && d == floor(d) && d >= -9.2e18 && d <= 9.2e18)
            v = (long long)d;
        else
            end = (char *)s;
    } else if (end && end != s && end[1] == '\0' &&
               (*end == 'k' || *end == 'K' || *end == 'M' || *end == 'G')) {
        long long mul = *end == 'G' ? 1000000000LL : *end == 'M' ? 1000000LL : 1000LL;
        if (__builtin_mul_overflow(v, mul, &v))
            errno = ERANGE;
        end++;
    }
    if (end == s || *end != '\0' || errno == ERANGE)
        hm_usage_error("option '%s' needs an integer, got '%s'", opt, s);
    if (v < min || v > max)
        hm_usage_error("option '%s' must be in [%lld, %lld], got '%s'", opt,
                       (long long)min, (long long)max, s);
    return v;
}

double hm_parse_f64(const char *s, const char *opt, double min, double max)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || errno == ERANGE || !isfinite(v))
        hm_usage_error("option '%s' needs a number, got '%s'", opt, s);
    if (v < min || v > max)
        hm_usage_error("option '%s' must be in [%g, %g], got '%s'", opt, min, max, s);
    return v;
}

static int g_write_failure_code = HM_EXIT_FAIL;

void hm_cli_set_write_failure_code(int code) { g_write_failure_code = code; }

/* errno of the first failed flush of stdout, or 0. A later fflush that
 * writes nothing succeeds, leaving ferror set and errno stale: the cause is
 * kept from the call that failed. */
static int g_stdout_errno;

/* 1 if stdout cannot be written (flushing it now, or an earlier failure). */
static int stdout_failed(void)
{
    errno = 0;
    if (fflush(stdout) != 0) {
        if (!g_stdout_errno)
            g_stdout_errno = errno ? errno : EIO;
        return 1;
    }
    return ferror(stdout) != 0;
}

static void report_stdout_failure(void)
{
    if (g_stdout_errno)
        fprintf(stderr, "%s: error: cannot write '-': %s\n", g_prog, strerror(g_stdout_errno));
    else
        fprintf(stderr, "%s: error: cannot write '-': a write to stdout failed\n", g_prog);
}

void hm_cli_flush_stdout(void)
{
    if (stdout_failed()) {
        report_stdout_failure();
        hm_afile_cleanup_all();
        exit(g_write_failure_code);
    }
}

int hm_cli_finish(int code)
{
    if (stdout_failed()) {
        report_stdout_failure();
        code = g_write_failure_code;
    }
    hm_dist_close(code);
    return code;
}

double hm_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void hm_progress_start(struct hm_progress *p, const struct hm_cli_common *c,
                       const char *label)
{
    memset(p, 0, sizeof *p);
    if (c->quiet || g_secondary)
        p->enabled = 0;
    else if (c->progress >= 0)
        p->enabled = c->progress;
    else
        p->enabled = isatty(STDERR_FILENO);
    p->t_start = p->t_last = hm_now();
    snprintf(p->label, sizeof p->label, "%s", label);
}

void hm_progress_update(struct hm_progress *p, const char *fmt, ...)
{
    if (!p->enabled)
        return;
    double t = hm_now();
    if (t - p->t_last < 1.0)
        return;
    p->t_last = t;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "\r%s: %s: ", g_prog, p->label);
    vfprintf(stderr, fmt, ap);
    fputs("\033[K", stderr);
    va_end(ap);
}

void hm_progress_done(struct hm_progress *p, const char *fmt, ...)
{
    if (!p->enabled)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "\r%s: %s: ", g_prog, p->label);
    vfprintf(stderr, fmt, ap);
    fputs(", done.\033[K\n", stderr);
    va_end(ap);
}

void hm_cli_ckpt_notes(const struct hm_ckpt *ck, const char *path)
{
    if (hm_ckpt_config_note(ck))
        hm_warning("'%s': %s", path, hm_ckpt_config_note(ck));
}

const char *hm_cli_prev_provenance(const struct hm_ckpt *ck, const char *path)
{
    const char *why = hm_ckpt_provenance_foreign(ck);
    if (why)
        hm_warning("'%s': its hm.provenance was not written by hm (%s): the output starts a "
                   "fresh chain", path, why);
    return hm_ckpt_provenance(ck);
}

void hm_warn_nonfinite(const char *path, const struct hm_model *m)
{
    int64_t at = -1;
    const char *bad = hm_model_first_nonfinite(m, &at);
    if (bad)
        hm_warning("'%s': tensor '%s' holds non-finite values (first at element %lld); "
                   "results will not be finite", path, bad, (long long)at);
}
