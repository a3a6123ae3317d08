/* run_agree.c — the agreement at the start of a run of several processes
 * (run.h hm_run_agree): every process's inputs, flags and resume state,
 * gathered once and compared with process 0's before any work. */
#include "run_internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "provenance.h"

static struct hm_agree_item *agree_add(struct hm_agreement *a, const char *key, int kind)
{
    if (a->n >= HM_AGREE_MAX)
        abort(); /* a programmer error: the lists are fixed by the code */
    struct hm_agree_item *it = &a->item[a->n++];
    memset(it, 0, sizeof *it);
    snprintf(it->key, sizeof it->key, "%s", key);
    it->kind = kind;
    return it;
}

void hm_agree_flag(struct hm_agreement *a, const char *key, const char *fmt, ...)
{
    struct hm_agree_item *it = agree_add(a, key, HM_AGREE_FLAG);
    char full[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(full, sizeof full, fmt, ap);
    va_end(ap);
    snprintf(it->val, sizeof it->val, "%s", full);
    it->h = hm_xxh3(full, strlen(full)); /* the whole value, not the cut one */
}

void hm_agree_file(struct hm_agreement *a, const char *key, const char *path, uint64_t xxh3)
{
    struct hm_agree_item *it = agree_add(a, key, HM_AGREE_FILE);
    snprintf(it->val, sizeof it->val, "%s", path ? path : "none");
    snprintf(it->what, sizeof it->what, "xxh3 %016llx", (unsigned long long)xxh3);
    it->h = path ? xxh3 : 0;
}

void hm_agree_copy(struct hm_agreement *a, const char *key, const char *path, int present,
                   const char *what, uint64_t h)
{
    struct hm_agree_item *it = agree_add(a, key, present ? HM_AGREE_COPY : HM_AGREE_ABSENT);
    snprintf(it->val, sizeof it->val, "%s", path);
    snprintf(it->what, sizeof it->what, "%s", present ? what : "absent");
    it->h = present ? h : 0;
}

/* The first difference of process q's statements b from process 0's a, as
 * an error; HM_OK when they agree. */
static enum hm_status compare(const struct hm_agreement *a, const struct hm_agreement *b, int q,
                              int size, struct hm_error *err)
{
    const int32_t n = a->n > b->n ? a->n : b->n;
    for (int32_t i = 0; i < n; i++) {
        const struct hm_agree_item *x = i < a->n ? &a->item[i] : NULL;
        const struct hm_agree_item *y = i < b->n ? &b->item[i] : NULL;
        if (!x || !y || strcmp(x->key, y->key) != 0)
            return hm_error_set(err, HM_ERR_INVALID,
                                "process %d of %d runs another tool or mode than process 0 "
                                "(it states '%s' where process 0 states '%s'): every process "
                                "must be started with the same command", q, size,
                                y ? y->key : "nothing", x ? x->key : "nothing");
        if (x->kind == HM_AGREE_ABSENT || y->kind == HM_AGREE_ABSENT)
            continue; /* process 0's alone; it reads and sends it (or fails itself) */
        if (x->h == y->h && x->kind == y->kind)
            continue;
        if (x->kind == HM_AGREE_FLAG)
            return hm_error_set(err, HM_ERR_INVALID,
                                "process %d of %d was started with %s %s, process 0 with %s %s: "
                                "every process must be started with the same flags",
                                q, size, y->key, y->val, x->key, x->val);
        if (x->kind == HM_AGREE_COPY)
            return hm_error_set(err, HM_ERR_INVALID,
                                "process %d of %d has a copy of %s '%s' that differs from "
                                "process 0's (%s there, %s on process 0): process 0 alone reads "
                                "it and sends it to the others; remove the stale copy", q, size,
                                y->key, y->val, y->what, x->what);
        return hm_error_set(err, HM_ERR_INVALID,
                            "process %d of %d reads %s '%s' (%s), process 0 '%s' (%s): every "
                            "process needs the same inputs at the same paths", q, size, x->key,
                            y->val, y->what, x->val, x->what);
    }
    return HM_OK;
}

enum hm_status hm_run_agree(const struct hm_run_comm *comm, const struct hm_agreement *a,
                            struct hm_error *err)
{
    if (!comm || comm->size < 2 || !comm->allgather_bytes)
        return HM_OK;
    struct hm_agreement *all = calloc((size_t)comm->size, sizeof *all);
    if (!all)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory for the processes' agreement");
    enum hm_status st = comm->allgather_bytes(comm->ctx, a, sizeof *a, all, err);
    if (st != HM_OK)
        hm_error_prefix(err, "the processes' agreement at the start: ");
    for (int q = 1; q < comm->size && st == HM_OK; q++)
        st = compare(&all[0], &all[q], q, comm->size, err);
    free(all);
    return st;
}

/* ---- what a training run agrees on ---------------------------------------- */

enum hm_status run_agree_start(struct run *r, uint64_t val_hash, struct hm_error *err)
{
    const struct hm_run_opts *o = r->o;
    const struct hm_run_comm *c = o->comm;
    if (!c || c->size < 2 || !c->allgather_bytes)
        return HM_OK;
    struct hm_agreement *a = calloc(1, sizeof *a);
    if (!a)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory for the processes' agreement");
    hm_agree_flag(a, "the tool", "%s", o->tool);
    /* the inputs: the token headers and the checkpoint hashes */
    hm_agree_file(a, "the input checkpoint", o->in_path, r->base_hash);
    hm_agree_file(a, "--data", o->data_path, r->data_hash);
    hm_agree_file(a, "--val-data", o->val_path, val_hash);
    for (int i = 0; i < o->n_more_inputs && i < 8; i++)
        hm_agree_file(a, "the teacher", o->more_inputs[i].path, o->more_inputs[i].xxh3);
    /* the flags that change the trajectory or the collectives */
    hm_agree_flag(a, "--steps", "%lld", (long long)o->steps);
    hm_agree_flag(a, "--batch", "%lld", (long long)o->batch);
    hm_agree_flag(a, "--seq-len", "%lld", (long long)o->seq_len);
    hm_agree_flag(a, "--grad-accum", "%lld", (long long)o->accum);
    hm_agree_flag(a, "--lr", "%.17g", o->lr);
    hm_agree_flag(a, "--warmup", "%lld", (long long)o->warmup);
    hm_agree_flag(a, "--optimizer", "%s", o->optim.kind == HM_OPTIM_ADAMW ? "adamw" : "sgd");
    hm_agree_flag(a, "--weight-decay", "%.17g", o->optim.weight_decay);
    hm_agree_flag(a, "--clip", "%.17g", o->optim.clip);
    hm_agree_flag(a, "the AdamW betas and eps", "%.17g %.17g %.17g", o->optim.beta1,
                  o->optim.beta2, o->optim.eps);
    hm_agree_flag(a, "--data-order", "%s",
                  o->order == HM_ORDER_SHUFFLE ? "shuffle" : "sequential");
    hm_agree_flag(a, "--seed", "%llu", (unsigned long long)o->seed);
    hm_agree_flag(a, "--zero1", "%s", o->zero1 ? "on" : "off");
    hm_agree_flag(a, "--resume", "%s", o->resume ? "on" : "off");
    hm_agree_flag(a, "--stop-after", "%lld", (long long)o->stop_after);
    hm_agree_flag(a, "--save-every", "%lld", (long long)o->save_every);
    hm_agree_flag(a, "--val-every", "%lld", (long long)o->val_every);
    hm_agree_flag(a, "--val-tokens", "%lld", (long long)o->val_tokens);
    hm_agree_flag(a, "-o", "%s", strcmp(o->out_path, "-") == 0 ? "- (stdout)" : "a file");
    hm_agree_flag(a, "--backend", "%s", r->model->be ? hm_backend_name(r->model->be) : "?");
    for (int i = 0; i < o->n_fields; i++)
        hm_agree_flag(a, o->fields[i].key, "%s", o->fields[i].value);
    /* the trainable tensors (names and sizes): what every exchange is cut by */
    uint64_t lh = 0;
    for (int64_t i = 0; i < r->np; i++) {
        uint64_t x[3] = {lh, hm_xxh3(r->p[i].name, strlen(r->p[i].name)), (uint64_t)r->p[i].n};
        lh = hm_xxh3(x, sizeof x);
    }
    hm_agree_flag(a, "the trainable tensors", "%lld tensors of %lld values (layout %016llx)",
                  (long long)r->np, (long long)r->off[r->np], (unsigned long long)lh);
    /* the resume state: process 0's; a copy another process has must be it */
    if (o->resume) {
        char what[64] = "";
        int64_t step = -1;
        uint64_t ph = 0;
        const int present = run_state_identity(r->state_path, &step, &ph);
        snprintf(what, sizeof what, "step %lld, payload_xxh3 %016llx", (long long)step,
                 (unsigned long long)ph);
        hm_agree_copy(a, "the state", r->state_path, present, what,
                      ph ^ (uint64_t)step * 0x9E3779B97F4A7C15ull);
    }
    enum hm_status st = hm_run_agree(c, a, err);
    free(a);
    return st;
}
