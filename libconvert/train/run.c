/* run.c — the shared training loop, state files and resume (see run.h). */
#include "run.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "atomic_file.h"
#include "fileio.h"
#include "hash.h"
#include "model.h"
#include "provenance.h"
#include "safetensors.h"

/* 2: the state carries a payload checksum, the base checkpoint's xxh3 and
 * every hyper-parameter that changes the trajectory. */
#define RUN_STATE_VERSION 2

struct run {
    const struct hm_run_model *model;
    const struct hm_run_opts *o;
    const struct hm_opt_param *p;
    int64_t np;
    struct hm_optim opt;
    int64_t step;    /* completed optimizer steps */
    float *host;     /* the host mirror while saving or loading state (mirror()) */
    int64_t tokens;  /* training tokens consumed */
    uint64_t data_hash;
    uint64_t base_hash;  /* the input checkpoint's bytes (0: a stream, unknown) */
    char *state_path;
};

/* xxh3 of the input checkpoint: the file, or a folder's *.safetensors and
 * *.json files in name order (each file's hash, hashed again). 0 for '-'. */
static uint64_t base_checkpoint_hash(const char *path)
{
    uint64_t h = 0;
    struct hm_error e;
    if (!path || strcmp(path, "-") == 0)
        return 0;
    if (hm_is_file(path))
        return hm_xxh3_file(path, &h, &e) == HM_OK ? h : 0;
    struct dirent **names = NULL;
    int n = scandir(path, &names, NULL, alphasort);
    if (n < 0)
        return 0;
    uint64_t *hs = calloc((size_t)n + 1, sizeof *hs);
    int k = 0;
    for (int i = 0; i < n; i++) {
        const char *nm = names[i]->d_name;
        size_t len = strlen(nm);
        int want = (len > 12 && strcmp(nm + len - 12, ".safetensors") == 0) ||
                   (len > 5 && strcmp(nm + len - 5, ".json") == 0);
        char *full = want ? malloc(strlen(path) + len + 2) : NULL;
        if (full) {
            sprintf(full, "%s/%s", path, nm);
            if (hs && hm_is_file(full) && hm_xxh3_file(full, &h, &e) == HM_OK)
                hs[k++] = h;
            free(full);
        }
        free(names[i]);
    }
    free(names);
    h = hs && k ? hm_xxh3(hs, sizeof *hs * (size_t)k) : 0;
    free(hs);
    return h;
}

/* xxh3 over the state's tensors in file order (w., m., v. per parameter):
 * the hash of the per-tensor hashes. get(ctx, i, k) gives tensor k (0 w,
 * 1 m, 2 v) of parameter i, or NULL. */
typedef const float *(*state_tensor_fn)(void *ctx, int64_t i, int k);
static uint64_t payload_hash(int64_t np, const struct hm_opt_param *p, state_tensor_fn get,
                             void *ctx)
{
    uint64_t *hs = calloc((size_t)(3 * np) + 1, sizeof *hs), h;
    int64_t k = 0;
    if (!hs)
        return 0;
    for (int64_t i = 0; i < np; i++)
        for (int t = 0; t < 3; t++) {
            const float *x = get(ctx, i, t);
            if (x)
                hs[k++] = hm_xxh3(x, sizeof(float) * (size_t)p[i].n);
        }
    h = hm_xxh3(hs, sizeof *hs * (size_t)k);
    free(hs);
    return h;
}

/* The host mirror of the trainable state while a state file is written or
 * read: regions [w | m | v], each [Σ n] in p's order (r->host, owned). The
 * weights and moments themselves live on the backend. */
static float *mirror(const struct run *r, int64_t i, int k)
{
    if (k > 0 && !r->opt.m)
        return NULL;
    return r->host + (size_t)k * (size_t)r->opt.off[r->np] + (size_t)r->opt.off[i];
}

static enum hm_status mirror_alloc(struct run *r, struct hm_error *err)
{
    free(r->host);
    r->host = malloc(sizeof(float) * (3 * (size_t)r->opt.off[r->np] + 1));
    return r->host ? HM_OK : hm_error_set(err, HM_ERR_NOMEM, "out of memory for the state");
}

/* dir 0: backend → mirror; 1: mirror → backend. */
static void mirror_move(struct run *r, int dir)
{
    const struct hm_backend *be = r->model->be;
    const size_t n = (size_t)r->opt.off[r->np];
    for (int64_t i = 0; i < r->np; i++) {
        const size_t bytes = sizeof(float) * (size_t)r->p[i].n;
        if (dir == 0)
            hm_backend_download(be, mirror(r, i, 0), r->p[i].w, bytes);
        else
            hm_backend_upload(be, r->p[i].w, mirror(r, i, 0), bytes);
    }
    if (!r->opt.m || !n)
        return;
    if (dir == 0) {
        hm_backend_download(be, mirror(r, 0, 1), r->opt.m, sizeof(float) * n);
        hm_backend_download(be, mirror(r, 0, 2), r->opt.v, sizeof(float) * n);
    } else {
        hm_backend_upload(be, r->opt.m, mirror(r, 0, 1), sizeof(float) * n);
        hm_backend_upload(be, r->opt.v, mirror(r, 0, 2), sizeof(float) * n);
    }
}

static const float *live_tensor(void *ctx, int64_t i, int k)
{
    return mirror(ctx, i, k);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- state file --------------------------------------------------------- */

static char *run_json(const struct run *r)
{
    const struct hm_run_opts *o = r->o;
    cJSON *j = cJSON_CreateObject();
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)r->data_hash);
    cJSON_AddNumberToObject(j, "version", RUN_STATE_VERSION);
    cJSON_AddStringToObject(j, "tool", o->tool);
    cJSON_AddNumberToObject(j, "step", (double)r->step);
    cJSON_AddNumberToObject(j, "optimizer_t", (double)r->opt.t);
    cJSON_AddNumberToObject(j, "tokens", (double)r->tokens);
    cJSON_AddNumberToObject(j, "steps", (double)o->steps);
    cJSON_AddNumberToObject(j, "batch", (double)o->batch);
    cJSON_AddNumberToObject(j, "seq_len", (double)o->seq_len);
    cJSON_AddNumberToObject(j, "accum", (double)o->accum);
    cJSON_AddStringToObject(j, "seed", (snprintf(hex, sizeof hex, "%016llx",
                                                 (unsigned long long)o->seed), hex));
    cJSON_AddStringToObject(j, "data_order", o->order == HM_ORDER_SHUFFLE ? "shuffle" : "sequential");
    cJSON_AddStringToObject(j, "optimizer", o->optim.kind == HM_OPTIM_ADAMW ? "adamw" : "sgd");
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)r->data_hash);
    cJSON_AddStringToObject(j, "data_xxh3", hex);
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)r->base_hash);
    cJSON_AddStringToObject(j, "base_xxh3", hex);
    /* every hyper-parameter that changes the trajectory (numbers exact) */
    const struct { const char *k; double v; } hp[] = {
        {"lr", o->lr}, {"warmup", (double)o->warmup}, {"clip", o->optim.clip},
        {"weight_decay", o->optim.weight_decay}, {"beta1", o->optim.beta1},
        {"beta2", o->optim.beta2}, {"eps", o->optim.eps}};
    for (size_t i = 0; i < sizeof hp / sizeof *hp; i++)
        cJSON_AddNumberToObject(j, hp[i].k, hp[i].v);
    cJSON_AddStringToObject(j, "backend", r->model->be ? hm_backend_name(r->model->be) : "?");
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return s;
}

static enum hm_status save_state(struct run *r, struct hm_error *err)
{
    struct hm_st_writer *w = hm_st_writer_new();
    char *meta = run_json(r), *cfg = hm_config_to_json(r->model->cfg);
    enum hm_status st = HM_OK;
    char name[512];
    if (!w || !meta || !cfg) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((st = mirror_alloc(r, err)) != HM_OK)
        goto out;
    mirror_move(r, 0);
    for (int64_t i = 0; i < r->np && st == HM_OK; i++) {
        int64_t shape[1] = {r->p[i].n};
        snprintf(name, sizeof name, "w.%s", r->p[i].name);
        st = hm_st_writer_add(w, name, HM_DTYPE_F32, 1, shape, mirror(r, i, 0), err);
        if (st == HM_OK && r->opt.m) {
            snprintf(name, sizeof name, "m.%s", r->p[i].name);
            st = hm_st_writer_add(w, name, HM_DTYPE_F32, 1, shape, mirror(r, i, 1), err);
        }
        if (st == HM_OK && r->opt.v) {
            snprintf(name, sizeof name, "v.%s", r->p[i].name);
            st = hm_st_writer_add(w, name, HM_DTYPE_F32, 1, shape, mirror(r, i, 2), err);
        }
    }
    if (st == HM_OK) {
        /* the checksum of what follows: a flipped bit never resumes silently */
        cJSON *j = cJSON_Parse(meta);
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx",
                 (unsigned long long)payload_hash(r->np, r->p, live_tensor, r));
        if (j)
            cJSON_AddStringToObject(j, "payload_xxh3", hex);
        char *full = j ? cJSON_PrintUnformatted(j) : NULL;
        cJSON_Delete(j);
        st = full ? hm_st_writer_set_metadata(w, "hm.run", full, err)
                  : hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        free(full);
    }
    if (st == HM_OK)
        st = hm_st_writer_set_metadata(w, "hm.config", cfg, err);
    if (st == HM_OK)
        st = hm_st_writer_write_path(w, r->state_path, HM_AFILE_FORCE, err);
    if (st != HM_OK)
        hm_error_prefix(err, "cannot write state '%s': ", r->state_path);
out:
    free(meta);
    free(cfg);
    hm_st_writer_free(w);
    free(r->host);
    r->host = NULL;
    return st;
}

static enum hm_status expect_num(const cJSON *j, const char *key, double want, const char *path,
                                 struct hm_error *err)
{
    const cJSON *x = cJSON_GetObjectItem(j, key);
    if (!cJSON_IsNumber(x) || x->valuedouble != want)
        return hm_error_set(err, HM_ERR_INVALID,
                            "state '%s' was made with %s %.17g, this run has %.17g (resume needs "
                            "the same flags)", path, key, cJSON_IsNumber(x) ? x->valuedouble : NAN,
                            want);
    return HM_OK;
}

static enum hm_status expect_str(const cJSON *j, const char *key, const char *want,
                                 const char *path, struct hm_error *err)
{
    const cJSON *x = cJSON_GetObjectItem(j, key);
    if (!cJSON_IsString(x) || strcmp(x->valuestring, want) != 0)
        return hm_error_set(err, HM_ERR_INVALID,
                            "state '%s' was made with %s '%s', this run has '%s' (resume needs "
                            "the same flags and data)", path, key,
                            cJSON_IsString(x) ? x->valuestring : "?", want);
    return HM_OK;
}

static enum hm_status load_state(struct run *r, struct hm_error *err)
{
    struct hm_st_file *f = NULL;
    cJSON *j = NULL, *mine = NULL;
    char *mine_txt = run_json(r);
    enum hm_status st = hm_st_open(r->state_path, &f, err);
    if (st != HM_OK) {
        hm_error_prefix(err, "cannot resume from '%s': ", r->state_path);
        goto out;
    }
    const char *meta = hm_st_metadata_get(f, "hm.run");
    j = meta ? cJSON_Parse(meta) : NULL;
    mine = mine_txt ? cJSON_Parse(mine_txt) : NULL;
    if (!j || !mine) {
        st = hm_error_set(err, HM_ERR_FORMAT, "state '%s' has no valid hm.run metadata",
                          r->state_path);
        goto out;
    }
    /* Must match: everything that changes the trajectory. May change:
     * --threads (the kernels give the same results), --log, --val-*,
     * --save-every, --stop-after, --progress (they only observe). */
    static const char *nums[] = {"version", "steps", "batch", "seq_len", "accum", "lr",
                                 "warmup", "clip", "weight_decay", "beta1", "beta2", "eps"};
    static const char *strs[] = {"tool", "seed", "data_order", "optimizer", "data_xxh3",
                                 "base_xxh3", "backend"};
    for (size_t i = 0; i < sizeof nums / sizeof *nums && st == HM_OK; i++)
        st = expect_num(j, nums[i], cJSON_GetObjectItem(mine, nums[i])->valuedouble,
                        r->state_path, err);
    for (size_t i = 0; i < sizeof strs / sizeof *strs && st == HM_OK; i++)
        st = expect_str(j, strs[i], cJSON_GetObjectItem(mine, strs[i])->valuestring,
                        r->state_path, err);
    if (st != HM_OK)
        goto out;
    const cJSON *step = cJSON_GetObjectItem(j, "step"), *t = cJSON_GetObjectItem(j, "optimizer_t");
    const cJSON *tok = cJSON_GetObjectItem(j, "tokens");
    if (!cJSON_IsNumber(step) || !cJSON_IsNumber(t) || !cJSON_IsNumber(tok) ||
        step->valuedouble < 0 || step->valuedouble > (double)r->o->steps) {
        st = hm_error_set(err, HM_ERR_FORMAT, "state '%s' has a bad step", r->state_path);
        goto out;
    }
    if ((st = mirror_alloc(r, err)) != HM_OK)
        goto out;
    for (int64_t i = 0; i < r->np && st == HM_OK; i++) {
        char name[512];
        const char *pre[3] = {"w.", "m.", "v."};
        float *dst[3] = {mirror(r, i, 0), mirror(r, i, 1), mirror(r, i, 2)};
        for (int k = 0; k < 3 && st == HM_OK; k++) {
            if (!dst[k])
                continue;
            snprintf(name, sizeof name, "%s%s", pre[k], r->p[i].name);
            int64_t idx = hm_st_find(f, name);
            const struct hm_st_tensor *tt = idx >= 0 ? hm_st_tensor_at(f, idx) : NULL;
            if (!tt || tt->dtype != HM_DTYPE_F32 || tt->numel != r->p[i].n)
                st = hm_error_set(err, HM_ERR_INVALID,
                                  "state '%s' lacks F32 tensor '%s' of %lld values",
                                  r->state_path, name, (long long)r->p[i].n);
            else
                memcpy(dst[k], hm_st_data_view(f, idx), sizeof(float) * (size_t)tt->numel);
        }
    }
    if (st == HM_OK) {
        const cJSON *ph = cJSON_GetObjectItem(j, "payload_xxh3");
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx",
                 (unsigned long long)payload_hash(r->np, r->p, live_tensor, r));
        if (!cJSON_IsString(ph) || strcmp(ph->valuestring, hex) != 0)
            st = hm_error_set(err, HM_ERR_FORMAT,
                              "state '%s' is corrupt: its tensors do not match its checksum "
                              "(payload_xxh3 %s, computed %s)", r->state_path,
                              cJSON_IsString(ph) ? ph->valuestring : "missing", hex);
    }
    if (st != HM_OK)
        goto out;
    mirror_move(r, 1);
    r->step = (int64_t)step->valuedouble;
    r->opt.t = (int64_t)t->valuedouble;
    r->tokens = (int64_t)tok->valuedouble;
out:
    free(r->host);
    r->host = NULL;
    free(mine_txt);
    cJSON_Delete(j);
    cJSON_Delete(mine);
    hm_st_close(f);
    return st;
}

/* Keep only log lines with step ≤ keep (resume must not duplicate steps). */
static enum hm_status trim_log(const char *path, int64_t keep, struct hm_error *err)
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

/* ---- validation ------------------------------------------------------------ */

enum hm_status hm_run_validate(const struct hm_run_model *model,
                               const struct hm_tok_file *val, int64_t T, int64_t max_targets,
                               double *mean, struct hm_error *err)
{
    int64_t windows = (hm_tok_count(val) - 1) / T;
    if (max_targets > 0 && windows > max_targets / T)
        windows = max_targets / T > 0 ? max_targets / T : 1;
    if (windows < 1)
        return hm_error_set(err, HM_ERR_INVALID,
                            "validation data holds fewer than %lld tokens", (long long)(T + 1));
    /* several windows per forward pass, as hm-eval batches them */
    const int64_t B = hm_model_eval_batch(model->cfg, model->be, T, windows);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(B * T + 1)); /* owned */
    if (!tok)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    double total = 0;
    enum hm_status st = HM_OK;
    for (int64_t w = 0; w < windows && st == HM_OK; w += B) {
        const int64_t nb = windows - w < B ? windows - w : B;
        double s = 0;
        st = hm_tok_read(val, w * T, nb * T + 1, tok, err);
        if (st == HM_OK)
            st = model->val_sum(model->ctx, tok, nb, T, &s, err);
        total += s;
    }
    free(tok);
    *mean = total / (double)(windows * T);
    return st;
}

/* ---- the loop ------------------------------------------------------------------ */

/* A JSON number, or null for NaN/Inf (which JSON cannot hold). */
static void json_num(FILE *fp, const char *fmt, double v)
{
    if (isfinite(v))
        fprintf(fp, fmt, v);
    else
        fputs("null", fp);
}

/* One JSON line; a failed write (full disk, /dev/full) is an error that
 * names the log and the cause, and stops the run. */
static enum hm_status log_line(FILE *fp, const char *path, const struct hm_run_model *m,
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
        fputs(", \"val_loss\": ", fp);
        json_num(fp, "%.9g", r->val_loss);
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
    if (fflush(fp) != 0 || ferror(fp))
        return hm_error_set_errno(err, HM_ERR_IO, errno ? errno : EIO,
                                  "cannot write log '%s'", path);
    return HM_OK;
}

static enum hm_status save_all(struct run *r, double final_loss, time_t t0,
                               struct hm_error *err)
{
    const struct hm_run_opts *o = r->o;
    enum hm_status st = HM_OK;
    if (strcmp(o->out_path, "-") != 0 && (st = save_state(r, err)) != HM_OK)
        return st;
    struct hm_prov_input in[2] = {{o->in_path, 0}, {o->data_path, r->data_hash}};
    uint64_t h = 0;
    struct hm_error e2;
    if (hm_is_file(o->in_path) && hm_xxh3_file(o->in_path, &h, &e2) == HM_OK)
        in[0].xxh3 = h;
    struct hm_prov_entry e = {o->tool, o->argc, o->argv, in, 2, t0, time(NULL), r->tokens,
                              final_loss};
    char *prov = NULL;
    if ((st = hm_provenance_append(o->prev_provenance, &e, &prov, err)) != HM_OK)
        return st;
    st = r->model->save(r->model->ctx, o->out_path, HM_AFILE_FORCE, prov, err);
    free(prov);
    return st;
}

enum hm_status hm_run_train(const struct hm_run_model *model, const struct hm_run_opts *o,
                            hm_run_progress_fn progress, void *pctx,
                            struct hm_run_report *final, struct hm_error *err)
{
    struct run r;
    memset(&r, 0, sizeof r);
    r.model = model;
    r.o = o;
    struct hm_tok_file *data = NULL, *val = NULL;
    struct hm_batcher bat;
    memset(&bat, 0, sizeof bat);
    FILE *logf = NULL;
    int32_t *tokens = NULL;
    double *aux = NULL, *aux_sum = NULL, *scal = NULL, *hscal = NULL;
    time_t t0 = time(NULL);
    enum hm_status st;
    const int64_t V = model->cfg->vocab_size;

    size_t n = strlen(o->out_path);
    r.state_path = malloc(n + 8);
    if (!r.state_path)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    snprintf(r.state_path, n + 8, "%s.state", o->out_path);
    if ((st = hm_tok_open(o->data_path, &data, err)) != HM_OK) {
        hm_error_prefix(err, "cannot read '%s': ", o->data_path);
        goto out;
    }
    if (hm_tok_vocab(data) > (uint64_t)V) {
        st = hm_error_set(err, HM_ERR_INVALID,
                          "token file '%s' has vocabulary %llu, larger than the model's %lld",
                          o->data_path, (unsigned long long)hm_tok_vocab(data), (long long)V);
        goto out;
    }
    r.data_hash = hm_tok_checksum(data);
    r.base_hash = base_checkpoint_hash(o->in_path);
    if (!o->resume && !o->force && hm_is_file(r.state_path)) {
        st = hm_error_set(err, HM_ERR_INVALID,
                          "state '%s' exists (use -f to replace it or --resume to continue)",
                          r.state_path);
        goto out;
    }
    if (o->val_path) {
        if ((st = hm_tok_open(o->val_path, &val, err)) != HM_OK) {
            hm_error_prefix(err, "cannot read '%s': ", o->val_path);
            goto out;
        }
        if (hm_tok_vocab(val) > (uint64_t)V) {
            st = hm_error_set(err, HM_ERR_INVALID, "token file '%s' has vocabulary %llu, larger "
                              "than the model's %lld", o->val_path,
                              (unsigned long long)hm_tok_vocab(val), (long long)V);
            goto out;
        }
    }
    if ((st = hm_batcher_init(&bat, data, o->batch, o->seq_len, o->order, o->seed, err)) != HM_OK) {
        hm_error_prefix(err, "'%s': ", o->data_path);
        goto out;
    }
    r.p = model->params(model->ctx, &r.np);
    if ((st = hm_optim_init(&r.opt, &o->optim, model->be, r.p, r.np, err)) != HM_OK)
        goto out;
    if (o->resume) {
        if ((st = load_state(&r, err)) != HM_OK)
            goto out;
        if (o->log_path && (st = trim_log(o->log_path, r.step, err)) != HM_OK) {
            hm_error_prefix(err, "log '%s': ", o->log_path);
            goto out;
        }
    } else if (o->log_path && hm_is_file(o->log_path) && !o->force) {
        st = hm_error_set(err, HM_ERR_INVALID,
                          "log '%s' exists (use -f to replace it or --resume to continue)",
                          o->log_path);
        goto out;
    }
    if (o->log_path && !(logf = fopen(o->log_path, o->resume ? "a" : "w"))) {
        st = hm_error_set_errno(err, HM_ERR_IO, errno, "cannot open log '%s'", o->log_path);
        goto out;
    }
    tokens = malloc(sizeof(int32_t) * (size_t)(o->batch * (o->seq_len + 1)));
    aux = calloc((size_t)model->n_aux + 1, sizeof(double));
    aux_sum = calloc((size_t)model->n_aux + 1, sizeof(double));
    /* the step's scalar block: each micro-batch's loss sums, then Σ g²;
     * backend memory, read with one download a step */
    const int64_t n_scal = o->accum * model->n_sums + 1;
    scal = hm_backend_alloc(model->be, sizeof(double) * (size_t)n_scal);
    hscal = calloc((size_t)n_scal, sizeof(double));
    if (!tokens || !aux || !aux_sum || !scal || !hscal) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto out;
    }
    struct hm_run_report rep = {.step = r.step, .steps = o->steps, .tokens = r.tokens,
                                .val_loss = NAN, .loss = NAN};
    double last_loss = NAN;
    const int64_t start_step = r.step;
    for (int64_t s = r.step; s < o->steps; s++) {
        double t_start = now_s(), loss = 0;
        double lr = hm_lr_at(o->lr, s, o->steps, o->warmup);
        memset(aux_sum, 0, sizeof(double) * (size_t)model->n_aux);
        memset(hscal, 0, sizeof(double) * (size_t)n_scal);
        hm_backend_upload(model->be, scal, hscal, sizeof(double) * (size_t)n_scal);
        model->zero_grad(model->ctx);
        for (int64_t a = 0; a < o->accum; a++) {
            if ((st = hm_batcher_get(&bat, s * o->accum + a, tokens, err)) != HM_OK)
                goto out;
            if ((st = model->accumulate(model->ctx, tokens, scal + a * model->n_sums, err)) !=
                HM_OK)
                goto out;
        }
        hm_grad_sqnorm(model->be, r.p, r.np, scal + n_scal - 1);
        hm_backend_download(model->be, hscal, scal, sizeof(double) * (size_t)n_scal);
        if ((st = hm_backend_sync(model->be, err)) != HM_OK)
            goto out;
        for (int64_t a = 0; a < o->accum; a++) {
            double l = 0;
            model->loss_of(model->ctx, hscal + a * model->n_sums, &l, aux);
            loss += l / (double)o->accum;
            for (int i = 0; i < model->n_aux; i++)
                aux_sum[i] += aux[i] / (double)o->accum;
        }
        double gn = sqrt(hscal[n_scal - 1]);
        if (!isfinite(loss) || !isfinite(gn)) {
            /* name the tensor that went non-finite: a weight (what makes the
             * loss NaN), else the first gradient */
            const char *bad = hm_params_first_nonfinite(model->be, r.p, r.np, 0);
            if (!bad)
                bad = hm_params_first_nonfinite(model->be, r.p, r.np, 1);
            enum hm_status sst = HM_OK;
            struct hm_error e2;
            if (strcmp(o->out_path, "-") != 0)
                sst = save_state(&r, &e2);
            st = hm_error_set(err, HM_ERR_NUMERIC,
                              "non-finite %s at step %lld%s%s%s; %s", isfinite(loss) ? "gradient" : "loss",
                              (long long)(s + 1), bad ? " (first in tensor '" : "", bad ? bad : "",
                              bad ? "')" : "",
                              sst == HM_OK && strcmp(o->out_path, "-") != 0
                                  ? "the last good state was saved (see --resume)"
                                  : "no state was saved");
            goto out;
        }
        hm_optim_step(&r.opt, model->be, (struct hm_opt_param *)r.p, r.np, lr, gn);
        if (model->post_update)
            model->post_update(model->ctx);
        r.step = s + 1;
        r.tokens += o->batch * o->seq_len * o->accum;
        last_loss = loss;
        rep = (struct hm_run_report){.step = r.step, .steps = o->steps, .tokens = r.tokens,
                                     .loss = loss, .lr = lr, .grad_norm = gn, .val_loss = NAN};
        int last = r.step == o->steps;
        if (val && model->val_sum && ((o->val_every > 0 && r.step % o->val_every == 0) || last)) {
            if ((st = hm_run_validate(model, val, o->seq_len, o->val_tokens, &rep.val_loss,
                                      err)) != HM_OK)
                goto out;
        }
        rep.tokens_per_s = (double)(o->batch * o->seq_len * o->accum) / (now_s() - t_start);
        if ((st = log_line(logf, o->log_path, model, &rep, model->n_aux ? aux_sum : NULL, err)) !=
            HM_OK)
            goto out;
        if (progress)
            progress(pctx, &rep);
        if (!last && o->stop_after > 0 && r.step - start_step >= o->stop_after)
            break;
        if (!last && o->save_every > 0 && r.step % o->save_every == 0 &&
            (st = save_all(&r, last_loss, t0, err)) != HM_OK)
            goto out;
    }
    st = save_all(&r, last_loss, t0, err);
    if (final)
        *final = rep;
out:
    if (logf && fclose(logf) != 0 && st == HM_OK)
        st = hm_error_set_errno(err, HM_ERR_IO, errno, "cannot write log '%s'", o->log_path);
    free(tokens);
    free(aux);
    free(aux_sum);
    free(hscal);
    hm_backend_free(model->be, (void **)&scal);
    free(r.state_path);
    hm_optim_release(&r.opt);
    hm_batcher_release(&bat);
    hm_tok_close(data);
    hm_tok_close(val);
    return st;
}
