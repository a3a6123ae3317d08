/* cli.h — the command-line grammar shared by every hm tool (contract §6).
 *
 * Messages: "hm-x: error: cannot read 'PATH': CAUSE" on stderr, lowercase,
 * no final full stop. Only requested data goes to stdout. Exit codes: 0 ok,
 * 1 failure, 2 usage (hm-verify: 0 equivalent, 1 not, 2 could not check).
 *
 * A tool's main():
 *     hm_cli_init("hm-x", usage_text, argv);
 *     while ((c = getopt_long(argc, argv, "ho:qv" ..., longopts, NULL)) != -1)
 *         switch (c) { HM_CLI_COMMON_CASES(&common); case ...: }
 *     ...
 *     return hm_cli_finish(HM_EXIT_OK);
 */
#ifndef HM_CLI_H
#define HM_CLI_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include "hm_error.h"

enum {
    HM_EXIT_OK = 0,
    HM_EXIT_FAIL = 1,
    HM_EXIT_USAGE = 2,
};

/* Option codes for long-only common options (above the char range). */
enum {
    HM_OPT_VERSION = 1000,
    HM_OPT_JSON,
    HM_OPT_PROGRESS,
    HM_OPT_NO_PROGRESS,
    HM_OPT_FIRST_TOOL = 1100, /* tools number their own long-only options from here */
};

struct hm_cli_common {
    int quiet;     /* -q, counts up */
    int verbose;   /* -v, counts up */
    int json;      /* --json */
    int progress;  /* 1 on, 0 off, -1 auto (stderr is a tty) */
};

#define HM_CLI_COMMON_LONGOPTS                                   \
    {"help", no_argument, NULL, 'h'},                            \
    {"version", no_argument, NULL, HM_OPT_VERSION},              \
    {"quiet", no_argument, NULL, 'q'},                           \
    {"verbose", no_argument, NULL, 'v'},                         \
    {"json", no_argument, NULL, HM_OPT_JSON},                    \
    {"progress", no_argument, NULL, HM_OPT_PROGRESS},            \
    {"no-progress", no_argument, NULL, HM_OPT_NO_PROGRESS}

/* The short options every tool takes; must start the optstring (the leading
 * colon makes getopt report a missing value as ':'). */
#define HM_CLI_COMMON_SHORTOPTS ":hqv"

/* Handles -h, --version, -q, -v, --json, --progress, unknown options ('?')
 * and missing arguments (':'). Returns 1 if c was handled. */
int hm_cli_common_opt(int c, struct hm_cli_common *common);

#define HM_CLI_COMMON_CASES(common)                                   \
    case 'h': case HM_OPT_VERSION: case 'q': case 'v': case HM_OPT_JSON: \
    case HM_OPT_PROGRESS: case HM_OPT_NO_PROGRESS: case '?': case ':': \
        hm_cli_common_opt(c, (common));                               \
        break

/* Sets the program name and usage text (borrowed, must outlive the tool),
 * installs signal handlers that remove temp outputs, and makes getopt quiet
 * (we print our own one-line errors). */
void hm_cli_init(const char *prog, const char *usage, char **argv);
const char *hm_prog(void);

/* Processes (contract §10). The tools that run as several processes
 * (hm-finetune, hm-linearize, hm-eval) call hm_cli_dist_open once their
 * options are parsed: under an MPI launcher with N > 1 it starts MPI and
 * fills *comm (size 1 otherwise); a build without MPI says so and exits 2.
 * From then on messages of process r > 0 carry "(process r of N)", hm_info
 * prints on process 0 only, and every exit ends MPI (hm_dist_close): an
 * error on one process ends them all. Every other tool refuses to start
 * under a launcher with N > 1 (exit 2) instead of running N copies that
 * each write the output. */
struct hm_run_comm;
void hm_cli_dist_open(struct hm_run_comm *comm);

/* The agreement at the start of a run of several processes (run.h
 * hm_run_agree) for a tool outside the training loop (hm-eval): the files
 * file[0 .. nf) (NULL: not given; hashed as hm_run_checkpoint_hash does)
 * named fkey[i], and the flags flag[0 .. nn) of values val[i]. Nothing
 * for one process; a difference exits 1 naming the process and the file
 * or flag. */
void hm_cli_agree(const struct hm_run_comm *comm, const char *const *fkey,
                  const char *const *file, int nf, const char *const *flag,
                  const int64_t *val, int nn);

/* One rule for stdout (contract §6): data on stdout (-o -, written: not a
 * dry run) leaves no room for --json's report: a usage error, exit 2. */
void hm_cli_check_json_stdout(const char *out, int json, int dry_run);

/* One rule for stdin (contract §6): of the inputs path[0 .. n) (NULL: not
 * given; what[i] names each in messages), at most one is '-' (a stream is
 * read once), and none under a launcher with N > 1 processes (stdin
 * reaches process 0 only). Usage errors, exit 2. */
void hm_cli_check_stdin(const char *const *path, const char *const *what, int n,
                        const struct hm_run_comm *comm);

/* The backend of --device cpu|cuda and --backend NAME (either NULL when
 * not given): cuda → the CUDA backend; cpu → --backend or "fast". An
 * unknown name, or a --device and a --backend that disagree, is a usage
 * error (exit 2); a backend that cannot open (no GPU, no driver, a build
 * without CUDA) exits 1 saying why. Borrowed (the shared instance). */
struct hm_backend;
const struct hm_backend *hm_cli_backend(const char *device, const char *backend);
/* The backend name those flags ask for (usage errors as above). */
const char *hm_cli_backend_name(const char *device, const char *backend);
/* hm_cli_backend, but NULL with *err set when the backend cannot open. */
const struct hm_backend *hm_cli_backend_try(const char *device, const char *backend,
                                            struct hm_error *err);

/* CPU threads when --threads is not given: the cores, shared among the
 * processes of a run on this machine (OMPI_COMM_WORLD_LOCAL_SIZE,
 * MPI_LOCALNRANKS), at least 1. */
int hm_cli_default_threads(void);

/* Print "prog: error: ..." to stderr. */
void hm_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
struct hm_model;
/* Warns (stderr) when a loaded model holds NaN/Inf weights, naming the file,
 * the tensor and the element. */
void hm_warn_nonfinite(const char *path, const struct hm_model *m);
/* The chain a writer extends from its input ck read from path
 * (hm_ckpt_provenance; borrowed): with a foreign hm.provenance, NULL and a
 * warning that the output starts a fresh chain. */
struct hm_ckpt;
const char *hm_cli_prev_provenance(const struct hm_ckpt *ck, const char *path);
/* Warnings about an opened checkpoint a tool goes on with: a config.json
 * that disagrees with hm.config (hm_ckpt_config_note). */
void hm_cli_ckpt_notes(const struct hm_ckpt *ck, const char *path);

void hm_warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Informational message to stderr unless quiet. */
void hm_info(const struct hm_cli_common *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Print an error and exit 1. */
_Noreturn void hm_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "prog: error: <what> 'PATH': <err->msg>", exit 1. */
_Noreturn void hm_die_err(const char *what, const char *path, const struct hm_error *err);
/* One error line plus the short usage on stderr, exit 2. */
_Noreturn void hm_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Holds the output path for the rest of the run (hm_output_hold: a lock
 * beside it, released at exit), so that a second run writing the same
 * output fails at once, with or without -f. Call it before any work, after
 * the checks that the path is not an input. NULL and "-" hold nothing.
 * Exits 1 ("cannot write 'PATH': another run (pid N) is writing it"). */
void hm_cli_hold_output(const char *path);

/* Strict number parsing for option values; on a bad value, hm_usage_error
 * naming the option. No silent clamping. */
int64_t hm_parse_i64(const char *s, const char *opt, int64_t min, int64_t max);
double hm_parse_f64(const char *s, const char *opt, double min, double max);
/* A size in bytes >= 1: digits, then nothing or B; kB/KB, MB, GB, TB (powers
 * of 10, as HuggingFace's "5GB"); KiB, MiB, GiB, TiB and K, M, G, T (powers of
 * 2, the one-letter forms as dd(1) and sort -S). */
uint64_t hm_parse_bytes(const char *s, const char *opt);

/* Flush and check stdout (git run_builtin); returns code, or 1 if stdout
 * could not be written. Use as `return hm_cli_finish(code);`. */
int hm_cli_finish(int code);

/* Flush stdout now (streamed output); if it cannot be written, say why
 * ("cannot write '-': No space left on device") and exit with the write
 * failure code. */
void hm_cli_flush_stdout(void);

/* The exit code hm_cli_finish gives when stdout cannot be written (default
 * 1; hm-verify sets 2: cmp(1) "could not check"). */
void hm_cli_set_write_failure_code(int code);

/* Progress on stderr, at most ~1 update/s, only when enabled. */
struct hm_progress {
    int enabled;
    double t_start, t_last;
    char label[64];
};
void hm_progress_start(struct hm_progress *p, const struct hm_cli_common *c,
                       const char *label);
/* fmt describes the state so far, e.g. "12.3 MB, 4.1 MB/s". */
void hm_progress_update(struct hm_progress *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void hm_progress_done(struct hm_progress *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Monotonic seconds. */
double hm_now(void);

#endif
