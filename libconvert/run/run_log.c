/* run_log.c — a run's JSON-lines log (one line per step, run.h): the line
 * and the trim a resumed run does first. Only the primary writes it. */
#include "run_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "fileio.h"

/* A JSON number, or null for NaN/Inf (which JSON cannot hold). */
static void json_num(FILE *fp, const char *fmt, double v)
{
    if (isfinite(v))
        fprintf(fp, fmt, v);
    else
        fputs("null", fp);
}

/* One JSON line (run_internal.h); a failed write stops the run. */
enum hm_status run_log_line(FILE *fp, const char *path, const struct hm_run_model *m,
                            const struct hm_run_report *r, const double *aux,
                            struct hm_error *err)
{
    if (!fp)
        return HM_OK;
    fprintf(fp, "{\"step\": %lld, \"tokens\": %lld, \"loss\": ", (long long)r->step,
            (long long)r->tokens);
    json_num(fp, "%.9g", r->loss);
    fputs(", \"lr\": ", fp);
    json_num(fp, "%.9g", r->lr);
    fputs(", \"grad_norm\": ", fp);
    json_num(fp, "%.9g", r->grad_norm);
    fputs(", \"tokens_per_s\": ", fp);
    json_num(fp, "%.1f", r->tokens_per_s);
    if (!isnan(r->val_loss)) {
        /* every digit (%.17g round-trips a double): the logged validation is
         * hm-eval's mean NLL of the same weights and windows, and a reader can
         * check that to 1e-9; 9 digits alone round by up to 1.1e-9 relative */
        fputs(", \"val_loss\": ", fp);
        json_num(fp, "%.17g", r->val_loss);
    }
    if (aux && m->n_aux) {
        fprintf(fp, ", \"%s\": [", m->aux_name);
        for (int i = 0; i < m->n_aux; i++) {
            fputs(i ? ", " : "", fp);
            json_num(fp, "%.9g", aux[i]);
        }
        fputc(']', fp);
    }
    fputs("}\n", fp);
    errno = 0;
    if (fflush(fp) != 0)
        return hm_error_set_errno(err, HM_ERR_IO, errno ? errno : EIO,
                                  "cannot write log '%s'", path);
    if (ferror(fp)) /* an earlier write failed: its errno is gone */
        return hm_error_set(err, HM_ERR_IO, "cannot write log '%s': a write failed", path);
    return HM_OK;
}

/* Keep only the lines with step ≤ keep (run_internal.h). */
enum hm_status run_trim_log(const char *path, int64_t keep, struct hm_error *err)
{
    char *text = NULL;
    size_t len;
    if (!hm_is_file(path))
        return HM_OK;
    enum hm_status st = hm_read_file(path, (size_t)1 << 34, &text, &len, err);
    if (st != HM_OK)
        return st;
    struct hm_afile *af;
    if ((st = hm_afile_open(path, HM_AFILE_FORCE, &af, err)) != HM_OK) {
        free(text);
        return st;
    }
    char *line = text;
    while (line < text + len) {
        char *nl = memchr(line, '\n', (size_t)(text + len - line));
        size_t n = nl ? (size_t)(nl - line) : (size_t)(text + len - line);
        cJSON *j = cJSON_ParseWithLength(line, n);
        const cJSON *s = j ? cJSON_GetObjectItem(j, "step") : NULL;
        if (cJSON_IsNumber(s) && s->valuedouble <= (double)keep)
            fprintf(hm_afile_stream(af), "%.*s\n", (int)n, line);
        cJSON_Delete(j);
        line += n + 1;
    }
    free(text);
    return hm_afile_commit(af, err);
}
