/* run_state.c — a run's state file (contract §4 resume, run.h): writing it
 * from the backend through a host mirror, reading it back with every check
 * that makes a resumed run continue bit-for-bit, and the checkpoint saves. */
#include "run_internal.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "fileio.h"
#include "hash.h"
#include "provenance.h"
#include "safetensors.h"

/* 2: the state carries a payload checksum, the base checkpoint's xxh3 and
 * every hyper-parameter that changes the trajectory. */
#define RUN_STATE_VERSION 2

/* ---- the input checkpoint's hash (resume checks it) ----------------------- */

uint64_t run_base_checkpoint_hash(const char *path)
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

uint64_t hm_run_checkpoint_hash(const char *path) { return run_base_checkpoint_hash(path); }

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
    if (k > 0 && r->o->optim.kind != HM_OPTIM_ADAMW)
        return NULL;
    return r->host + (size_t)k * (size_t)r->off[r->np] + (size_t)r->off[i];
}

static enum hm_status mirror_alloc(struct run *r, struct hm_error *err)
{
    free(r->host);
    r->host = malloc(sizeof(float) * (3 * (size_t)r->off[r->np] + 1));
    return r->host ? HM_OK : hm_error_set(err, HM_ERR_NOMEM, "out of memory for the state");
}

/* dir 0: backend → mirror; 1: mirror → backend. The moments are this
 * process's, of tensors [own0, own1) (all of them without ZeRO-1); with
 * ZeRO-1 dir 0 then gathers every owner's into the primary's mirror
 * (share_moments). */
/* ZeRO-1: every tensor's moments from its owner to the primary's mirror, a
 * tensor at a time (elsewhere through r->hw, the largest tensor). Every
 * process. */
static enum hm_status share_moments(struct run *r, struct hm_error *err)
{
    const struct hm_run_comm *c = r->o->comm;
    enum hm_status st = HM_OK;
    for (int k = 1; k <= 2 && st == HM_OK; k++)
        for (int64_t i = 0; i < r->np && st == HM_OK; i++) {
            const int q = run_owner(r, i);
            float *buf = r->primary ? mirror(r, i, k) : r->hw;
            if (q == c->rank && !r->primary) {
                const float *src = (k == 1 ? r->opt.m : r->opt.v) + (r->off[i] - r->off[r->own0]);
                hm_backend_download(r->model->be, buf, src, sizeof(float) * (size_t)r->p[i].n);
                st = hm_backend_sync(r->model->be, err);
            }
            if (st == HM_OK)
                st = c->bcast_floats(c->ctx, buf, r->p[i].n, q, err);
        }
    return st;
}

static enum hm_status mirror_move(struct run *r, int dir, struct hm_error *err)
{
    const struct hm_backend *be = r->model->be;
    const size_t n = (size_t)(r->off[r->own1] - r->off[r->own0]);
    for (int64_t i = 0; i < r->np; i++) {
        const size_t bytes = sizeof(float) * (size_t)r->p[i].n;
        if (dir == 0)
            hm_backend_download(be, mirror(r, i, 0), r->p[i].w, bytes);
        else
            hm_backend_upload(be, r->p[i].w, mirror(r, i, 0), bytes);
    }
    if (!r->opt.m)
        return HM_OK;
    if (dir == 1) {
        hm_backend_upload(be, r->opt.m, mirror(r, r->own0, 1), sizeof(float) * n);
        hm_backend_upload(be, r->opt.v, mirror(r, r->own0, 2), sizeof(float) * n);
        return HM_OK;
    }
    hm_backend_download(be, mirror(r, r->own0, 1), r->opt.m, sizeof(float) * n);
    hm_backend_download(be, mirror(r, r->own0, 2), r->opt.v, sizeof(float) * n);
    enum hm_status st = hm_backend_sync(be, err);
    return st == HM_OK && r->zero1 ? share_moments(r, err) : st;
}

static const float *live_tensor(void *ctx, int64_t i, int k)
{
    return mirror(ctx, i, k);
}

/* ---- the state file ----------------------------------------------------- */

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
    /* the step's micro-batches G = accum · processes: what the math depends
     * on, so a state resumes under any split of G (contract §10) */
    cJSON_AddNumberToObject(j, "accum", (double)run_micro_batches(r));
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
    for (int i = 0; i < o->n_fields; i++)
        cJSON_AddStringToObject(j, o->fields[i].key, o->fields[i].value);
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return s;
}

enum hm_status run_save_state(struct run *r, struct hm_error *err)
{
    struct hm_st_writer *w = hm_st_writer_new();
    char *meta = run_json(r), *cfg = hm_config_to_json(r->model->cfg);
    enum hm_status st = HM_OK;
    char name[512];
    if (!w || !meta || !cfg) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (!r->primary) {
        /* the primary reads its own, or gathers the moments (ZeRO-1) */
        st = r->zero1 ? share_moments(r, err) : HM_OK;
        goto out;
    }
    if ((st = mirror_alloc(r, err)) != HM_OK || (st = mirror_move(r, 0, err)) != HM_OK)
        goto out;
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
        st = hm_st_writer_write_path(w, r->state_path, run_save_flags(r), err);
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

/* What the model side trains with, checked before the tensors are: its
 * settings (run.h hm_run_field), then the trainable set (a state of other
 * tensors is another run, not a corrupt one). */
static enum hm_status expect_model_side(const cJSON *j, const struct hm_st_file *f,
                                        const struct run *r, struct hm_error *err)
{
    enum hm_status st = HM_OK;
    int64_t n = 0;
    for (int64_t i = 0; i < hm_st_n_tensors(f); i++)
        n += strncmp(hm_st_tensor_at(f, i)->name, "w.", 2) == 0;
    if (n != r->np)
        st = hm_error_set(err, HM_ERR_INVALID,
                          "state '%s' trains %lld tensors, this run %lld: the trainable set "
                          "changed (a --freeze flag differs? resume needs the same flags)",
                          r->state_path, (long long)n, (long long)r->np);
    for (int i = 0; i < r->o->n_fields && st == HM_OK; i++) {
        const struct hm_run_field *fl = &r->o->fields[i];
        if (fl->absent && !cJSON_GetObjectItem(j, fl->key)) {
            if (strcmp(fl->absent, fl->value) != 0)
                st = hm_error_set(err, HM_ERR_INVALID,
                                  "state '%s' was made with %s '%s' (it predates the field), "
                                  "this run has '%s' (resume needs the same flags and data)",
                                  r->state_path, fl->key, fl->absent, fl->value);
        } else {
            st = expect_str(j, fl->key, fl->value, r->state_path, err);
        }
    }
    return st;
}

enum hm_status run_load_state(struct run *r, struct hm_error *err)
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
     * --threads (ref gives the same bits; the fast kernels split some sums
     * by thread, so there the same bits need the same --threads), --log, --val-*,
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
    if (st == HM_OK)
        st = expect_model_side(j, f, r, err);
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
    mirror_move(r, 1, err);
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

/* ---- checkpoint saves --------------------------------------------------- */

/* The first save of a run without -f or --resume is exclusive (an output or
 * state that appeared while it trained is left alone, and the run fails);
 * later saves replace the run's own files. */
int run_save_flags(const struct run *r)
{
    return r->o->force || r->o->resume || r->saved ? HM_AFILE_FORCE : 0;
}

enum hm_status run_save_all(struct run *r, double final_loss, time_t t0, struct hm_error *err)
{
    const struct hm_run_opts *o = r->o;
    enum hm_status st = HM_OK;
    if (strcmp(o->out_path, "-") != 0 && (st = run_save_state(r, err)) != HM_OK)
        return st;
    if (!r->primary)
        return HM_OK;
    struct hm_prov_input in[8] = {{o->in_path, 0}, {o->data_path, r->data_hash}};
    int nin = 2;
    for (int i = 0; i < o->n_more_inputs && nin < 8; i++)
        in[nin++] = o->more_inputs[i];
    uint64_t h = 0;
    struct hm_error e2;
    if (hm_is_file(o->in_path) && hm_xxh3_file(o->in_path, &h, &e2) == HM_OK)
        in[0].xxh3 = h;
    struct hm_prov_entry e = {o->tool, o->argc, o->argv, in, nin, t0, time(NULL), r->tokens,
                              final_loss};
    char *prov = NULL;
    if ((st = hm_provenance_append(o->prev_provenance, &e, &prov, err)) != HM_OK)
        return st;
    st = r->model->save(r->model->ctx, o->out_path, run_save_flags(r), prov, err);
    free(prov);
    r->saved |= st == HM_OK;
    return st;
}
