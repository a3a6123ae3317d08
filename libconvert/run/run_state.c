/* run_state.c — a run's state file (contract §4 resume, run.h): writing it
 * from the backend tensor by tensor, reading it back with every check
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

/* ---- the state's tensors, one at a time ------------------------------------
 * Saving and loading stream tensor by tensor between the trainer's own
 * buffers and the file: nothing mirrors the whole state (a 1B model's
 * weights and moments are 3 × 4 GB). Host-memory backends (ref, fast) are
 * read in place; others go through one staging buffer of the largest tensor,
 * so a save holds at most two tensors beyond the trainer's memory. */

/* Tensor k (0 w, 1 m, 2 v) of parameter i in backend memory on this
 * process, or NULL: no such tensor (SGD has no moments) or another process
 * owns its moments (ZeRO-1). */
static const float *backend_tensor(const struct run *r, int64_t i, int k)
{
    if (k == 0)
        return r->p[i].w;
    if (!r->opt.m || i < r->own0 || i >= r->own1)
        return NULL;
    return (k == 1 ? r->opt.m : r->opt.v) + (r->off[i] - r->off[r->own0]);
}

static int has_tensor(const struct run *r, int k)
{
    return k == 0 || r->o->optim.kind == HM_OPTIM_ADAMW;
}

/* The host bytes of tensor k of parameter i, for the primary: *out points
 * into host-memory backend storage, or at buf [p[i].n] after a download or,
 * with ZeRO-1, the owner's broadcast. Every process calls it for every
 * (i, k) in the same order: a moment under ZeRO-1 is a collective (the
 * others receive into buf and drop it). */
static enum hm_status state_tensor(struct run *r, int64_t i, int k, float *buf,
                                   const float **out, struct hm_error *err)
{
    const struct hm_backend *be = r->model->be;
    const float *src = backend_tensor(r, i, k);
    const size_t bytes = sizeof(float) * (size_t)r->p[i].n;
    enum hm_status st = HM_OK;
    *out = NULL;
    if (r->zero1 && k > 0) {
        const int q = run_owner(r, i);
        if (src) {
            hm_backend_download(be, buf, src, bytes);
            st = hm_backend_sync(be, err);
        }
        if (st == HM_OK)
            st = r->o->comm->bcast_floats(r->o->comm->ctx, buf, r->p[i].n, q, err);
        *out = buf;
        return st;
    }
    if (!r->primary)
        return HM_OK;
    if (hm_backend_host_memory(be)) {
        *out = src;
        return HM_OK;
    }
    hm_backend_download(be, buf, src, bytes);
    *out = buf;
    return hm_backend_sync(be, err);
}

/* The staging buffer of the largest tensor (owned by the caller), or NULL
 * when nothing needs one (host memory, no ZeRO-1). */
static enum hm_status stage_alloc(const struct run *r, float **buf, struct hm_error *err)
{
    int64_t most = 0;
    *buf = NULL;
    if (hm_backend_host_memory(r->model->be) && !r->zero1)
        return HM_OK;
    for (int64_t i = 0; i < r->np; i++)
        most = r->p[i].n > most ? r->p[i].n : most;
    *buf = malloc(sizeof(float) * (size_t)(most + 1));
    return *buf ? HM_OK
                : hm_error_set(err, HM_ERR_NOMEM, "out of memory for a %.1f MB state tensor",
                               (double)most * 4e-6);
}

/* The checksum of the state (payload_hash over the live tensors), on the
 * primary; every process takes part. */
static enum hm_status live_payload_hash(struct run *r, float *buf, uint64_t *hash,
                                        struct hm_error *err)
{
    uint64_t *hs = calloc((size_t)(3 * r->np) + 1, sizeof *hs);
    int64_t n = 0;
    enum hm_status st = hs ? HM_OK : hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < r->np && st == HM_OK; i++)
        for (int k = 0; k < 3 && st == HM_OK; k++) {
            const float *x = NULL;
            if (!has_tensor(r, k))
                continue;
            st = state_tensor(r, i, k, buf, &x, err);
            if (st == HM_OK && x)
                hs[n++] = hm_xxh3(x, sizeof(float) * (size_t)r->p[i].n);
        }
    *hash = st == HM_OK ? hm_xxh3(hs, sizeof *hs * (size_t)n) : 0;
    free(hs);
    return st;
}

/* The file order of the state: tensors sorted by name ("m.*", "v.*", "w.*",
 * each by parameter name), which is the order the safetensors writer
 * writes, so the ZeRO-1 broadcasts of a save follow the writer's fills. */
struct state_entry {
    int64_t i;
    int k;
};
static const struct run *sort_run;
static int by_param_name(const void *a, const void *b)
{
    return strcmp(sort_run->p[*(const int64_t *)a].name, sort_run->p[*(const int64_t *)b].name);
}
static struct state_entry *state_order(const struct run *r, int64_t *n)
{
    int64_t *idx = malloc(sizeof *idx * (size_t)(r->np + 1));
    struct state_entry *e = malloc(sizeof *e * (size_t)(3 * r->np + 1));
    *n = 0;
    if (!idx || !e) {
        free(idx);
        free(e);
        return NULL;
    }
    for (int64_t i = 0; i < r->np; i++)
        idx[i] = i;
    sort_run = r;
    qsort(idx, (size_t)r->np, sizeof *idx, by_param_name);
    static const int kinds[3] = {1, 2, 0}; /* "m." < "v." < "w." */
    for (int j = 0; j < 3; j++)
        for (int64_t t = 0; t < r->np && has_tensor(r, kinds[j]); t++)
            e[(*n)++] = (struct state_entry){idx[t], kinds[j]};
    free(idx);
    return e;
}

struct save_ctx {
    struct run *r;
    const struct state_entry *e; /* [n] in the writer's order */
};

/* hm_st_fill_fn: the writer's one-tensor buffer filled from the backend. */
static enum hm_status fill_state(void *ctx, int64_t index, size_t off, void *dst, size_t nbytes,
                                 struct hm_error *err)
{
    (void)off; /* added whole (hm_st_writer_add_fill): off is 0 */
    const struct save_ctx *c = ctx;
    const float *x = NULL;
    enum hm_status st = state_tensor(c->r, c->e[index].i, c->e[index].k, dst, &x, err);
    if (st == HM_OK && x != dst)
        memcpy(dst, x, nbytes);
    return st;
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
    float *buf = NULL;
    int64_t ne = 0;
    struct state_entry *order = state_order(r, &ne);
    uint64_t hash = 0;
    enum hm_status st = HM_OK;
    char name[512];
    if (!w || !meta || !cfg || !order) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((st = stage_alloc(r, &buf, err)) != HM_OK ||
        (st = live_payload_hash(r, buf, &hash, err)) != HM_OK)
        goto out;
    if (!r->primary) {
        /* the primary writes; under ZeRO-1 the others send their moments
         * in the order the writer asks for them */
        const float *x;
        for (int64_t j = 0; j < ne && st == HM_OK && r->zero1; j++)
            if (order[j].k > 0)
                st = state_tensor(r, order[j].i, order[j].k, buf, &x, err);
        goto out;
    }
    struct save_ctx sc = {r, order};
    static const char *pre[3] = {"w.", "m.", "v."};
    for (int64_t j = 0; j < ne && st == HM_OK; j++) {
        int64_t shape[1] = {r->p[order[j].i].n};
        snprintf(name, sizeof name, "%s%s", pre[order[j].k], r->p[order[j].i].name);
        st = hm_st_writer_add_fill(w, name, HM_DTYPE_F32, 1, shape, fill_state, &sc, err);
    }
    if (st == HM_OK) {
        /* the checksum of what follows: a flipped bit never resumes silently */
        cJSON *j = cJSON_Parse(meta);
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)hash);
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
    free(order);
    free(buf);
    hm_st_writer_free(w);
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

int run_state_identity(const char *path, int64_t *step, uint64_t *payload)
{
    struct hm_st_file *f = NULL;
    struct hm_error e;
    *step = -1;
    *payload = 0;
    if (!hm_is_file(path) || hm_st_open(path, &f, &e) != HM_OK)
        return 0;
    const char *meta = hm_st_metadata_get(f, "hm.run");
    cJSON *j = meta ? cJSON_Parse(meta) : NULL;
    const cJSON *s = cJSON_GetObjectItem(j, "step"), *ph = cJSON_GetObjectItem(j, "payload_xxh3");
    int ok = cJSON_IsNumber(s) && cJSON_IsString(ph);
    if (ok) {
        *step = (int64_t)s->valuedouble;
        *payload = strtoull(ph->valuestring, NULL, 16);
    }
    cJSON_Delete(j);
    hm_st_close(f);
    return ok;
}

/* "accum" in a state is G, the step's micro-batches (contract §10): a
 * resume that changed it is most often one under another process count. */
static enum hm_status expect_accum(const cJSON *j, const struct run *r, struct hm_error *err)
{
    const cJSON *x = cJSON_GetObjectItem(j, "accum");
    const int64_t G = run_micro_batches(r), N = hm_run_size(r->o->comm);
    if (cJSON_IsNumber(x) && x->valuedouble == (double)G)
        return HM_OK;
    const double was = cJSON_IsNumber(x) ? x->valuedouble : NAN;
    return hm_error_set(err, HM_ERR_INVALID,
                        "state '%s' was made with accum %.17g micro-batches a step (G = "
                        "--grad-accum x processes), this run has G = %lld (--grad-accum %lld x "
                        "%lld process%s): resume needs the same G; if the process count "
                        "changed, %s", r->state_path, was, (long long)G, (long long)r->o->accum,
                        (long long)N, N == 1 ? "" : "es",
                        was > 0 && fmod(was, (double)N) == 0 ? "give --grad-accum G / processes"
                                                             : "use one that divides G");
}

/* The primary's reading of the state: every check, then each tensor's
 * index in f (at [3 np], in (i; w, m, v) order) and hdr = {step, t, tokens}. */
static enum hm_status read_state(struct run *r, struct hm_st_file **fp, int64_t *at,
                                 int64_t *hdr, struct hm_error *err)
{
    struct hm_st_file *f = NULL;
    cJSON *j = NULL, *mine = NULL;
    char *mine_txt = run_json(r);
    uint64_t *hs = NULL;
    enum hm_status st = hm_st_open(r->state_path, &f, err);
    *fp = f;
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
    static const char *nums[] = {"version", "steps", "batch", "seq_len", "lr",
                                 "warmup", "clip", "weight_decay", "beta1", "beta2", "eps"};
    static const char *strs[] = {"tool", "seed", "data_order", "optimizer", "data_xxh3",
                                 "base_xxh3", "backend"};
    for (size_t i = 0; i < sizeof nums / sizeof *nums && st == HM_OK; i++)
        st = expect_num(j, nums[i], cJSON_GetObjectItem(mine, nums[i])->valuedouble,
                        r->state_path, err);
    if (st == HM_OK)
        st = expect_accum(j, r, err);
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
    hdr[0] = (int64_t)step->valuedouble;
    hdr[1] = (int64_t)t->valuedouble;
    hdr[2] = (int64_t)tok->valuedouble;
    /* every tensor checked and hashed where the file maps it, its pages
     * released behind it */
    hs = calloc((size_t)(3 * r->np) + 1, sizeof *hs);
    int64_t nh = 0;
    if (!hs)
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < r->np && st == HM_OK; i++) {
        char name[512];
        const char *pre[3] = {"w.", "m.", "v."};
        for (int k = 0; k < 3 && st == HM_OK; k++) {
            if (!has_tensor(r, k))
                continue;
            snprintf(name, sizeof name, "%s%s", pre[k], r->p[i].name);
            int64_t idx = hm_st_find(f, name);
            const struct hm_st_tensor *tt = idx >= 0 ? hm_st_tensor_at(f, idx) : NULL;
            if (!tt || tt->dtype != HM_DTYPE_F32 || tt->numel != r->p[i].n) {
                st = hm_error_set(err, HM_ERR_INVALID,
                                  "state '%s' lacks F32 tensor '%s' of %lld values",
                                  r->state_path, name, (long long)r->p[i].n);
                break;
            }
            /* the same hash of per-tensor hashes, in (i; w, m, v) order, as the save */
            hs[nh] = hm_xxh3(hm_st_data_view(f, idx), sizeof(float) * (size_t)tt->numel);
            at[nh++] = idx;
            hm_st_data_release(f, idx);
        }
    }
    if (st == HM_OK) {
        const cJSON *ph = cJSON_GetObjectItem(j, "payload_xxh3");
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx",
                 (unsigned long long)hm_xxh3(hs, sizeof *hs * (size_t)nh));
        if (!cJSON_IsString(ph) || strcmp(ph->valuestring, hex) != 0)
            st = hm_error_set(err, HM_ERR_FORMAT,
                              "state '%s' is corrupt: its tensors do not match its checksum "
                              "(payload_xxh3 %s, computed %s)", r->state_path,
                              cJSON_IsString(ph) ? ph->valuestring : "missing", hex);
    }
out:
    free(hs);
    free(mine_txt);
    cJSON_Delete(j);
    cJSON_Delete(mine);
    return st;
}

/* The primary's verdict on the state, sent to every process: the same
 * error everywhere, or the step counters. */
struct state_verdict {
    int32_t status; /* enum hm_status */
    int32_t pad;
    int64_t hdr[3];
    char msg[sizeof ((struct hm_error *)0)->msg];
};

/* Process 0 alone reads the state (a shared file system is not needed: the
 * others may have no copy; a copy they have was checked equal at the start,
 * run_agree_start) and sends each tensor to the others; each uploads what
 * it keeps (its own moments under ZeRO-1). A transport without
 * bcast_bytes (a test's): every process reads its own. */
enum hm_status run_load_state(struct run *r, struct hm_error *err)
{
    const struct hm_run_comm *c = r->o->comm;
    const int sends = c && c->size > 1 && c->bcast_bytes && c->bcast_floats;
    const int reader = r->primary || !sends;
    struct hm_st_file *f = NULL;
    int64_t *at = calloc((size_t)(3 * r->np) + 1, sizeof *at), hdr[3] = {0, 0, 0};
    float *buf = NULL;
    enum hm_status st = at ? HM_OK : hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    if (st == HM_OK && reader)
        st = read_state(r, &f, at, hdr, err);
    if (sends) {
        struct state_verdict *v = calloc(1, sizeof *v);
        if (!v) /* a process without memory ends the run (the launcher ends the others) */
            return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        if (r->primary) {
            v->status = (int32_t)st;
            memcpy(v->hdr, hdr, sizeof hdr);
            if (st != HM_OK)
                snprintf(v->msg, sizeof v->msg, "%s", err->msg);
        }
        enum hm_status bs = c->bcast_bytes(c->ctx, v, sizeof *v, 0, err);
        if (bs != HM_OK)
            st = bs;
        else if (!r->primary && v->status != HM_OK)
            st = hm_error_set(err, (enum hm_status)v->status, "%s", v->msg);
        memcpy(hdr, v->hdr, sizeof hdr);
        free(v);
    }
    int64_t big = 0;
    for (int64_t i = 0; i < r->np; i++)
        big = r->p[i].n > big ? r->p[i].n : big;
    if (st == HM_OK && sends && !(buf = malloc(sizeof(float) * (size_t)(big + 1))))
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    for (int64_t i = 0, q = 0; i < r->np && st == HM_OK; i++)
        for (int k = 0; k < 3 && st == HM_OK; k++) {
            if (!has_tensor(r, k))
                continue;
            const int64_t idx = at[q++];
            const size_t nb = sizeof(float) * (size_t)r->p[i].n;
            const void *src = reader ? hm_st_data_view(f, idx) : NULL;
            if (sends) {
                if (r->primary)
                    memcpy(buf, src, nb);
                st = c->bcast_floats(c->ctx, buf, r->p[i].n, 0, err);
                src = buf;
            }
            float *dst = (float *)backend_tensor(r, i, k); /* this process's own buffer */
            if (dst && st == HM_OK)
                hm_backend_upload(r->model->be, dst, src, nb);
            if (reader)
                hm_st_data_release(f, idx);
        }
    if (st == HM_OK) {
        r->step = hdr[0];
        r->opt.t = hdr[1];
        r->tokens = hdr[2];
    }
    free(buf);
    free(at);
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
