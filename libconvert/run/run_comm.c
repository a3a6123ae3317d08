/* run_comm.c — the process seam of a run (struct hm_run_comm, run.h): who
 * writes, the step's gradient sum (one process's own, or the transport's),
 * the loss sums of every process, and the decisions taken together. */
#include "run_internal.h"

#include <stdlib.h>
#include <string.h>

int hm_run_is_primary(const struct hm_run_comm *comm)
{
    return !comm || comm->rank == 0;
}

int hm_run_size(const struct hm_run_comm *comm)
{
    return comm ? comm->size : 1;
}

void hm_run_partition(const int64_t *off, int64_t np, int size, int64_t *first)
{
    const int64_t total = off[np];
    int64_t i = 0;
    first[0] = 0;
    for (int r = 1; r < size; r++) {
        /* the first tensor that starts at or past r/size of the elements */
        const int64_t target = (int64_t)((__int128)total * r / size);
        while (i < np && off[i] < target)
            i++;
        first[r] = i;
    }
    first[size] = np;
}

void run_agree(const struct run *r, int *flags, int n)
{
    const struct hm_run_comm *c = r->o->comm;
    if (c && c->reduce_max)
        c->reduce_max(c->ctx, flags, n);
}

int64_t run_micro_batches(const struct run *r)
{
    return r->o->accum * hm_run_size(r->o->comm);
}

/* One process: the sum lives in r->acc [Σ n] (backend memory), added on the
 * backend with add_forward, y = a + b in fp32 as every transport adds. */
enum hm_status run_fold_grads(struct run *r, int64_t a, struct hm_error *err)
{
    const struct hm_run_comm *c = r->o->comm;
    if (run_micro_batches(r) == 1)
        return HM_OK;
    if (c && c->size > 1)
        return c->fold_grads(c->ctx, r->model->be, r->p, r->np, a, err);
    const struct hm_backend *be = r->model->be;
    const int64_t *off = r->off;
    if (a == 0)
        hm_backend_fill(be, r->acc, off[r->np], 0.0f);
    for (int64_t i = 0; i < r->np; i++)
        hm_backend_add_forward(be, r->acc + off[i], r->acc + off[i], r->p[i].g, r->p[i].n);
    return HM_OK;
}

enum hm_status run_gather_grads(struct run *r, struct hm_error *err)
{
    const struct hm_run_comm *c = r->o->comm;
    if (run_micro_batches(r) == 1)
        return HM_OK;
    if (c && c->size > 1)
        return c->gather_grads(c->ctx, r->model->be, r->p, r->np, err);
    const int64_t *off = r->off;
    for (int64_t i = 0; i < r->np; i++)
        hm_backend_copy2d(r->model->be, r->p[i].g, r->p[i].n, r->acc + off[i], r->p[i].n, 1,
                          r->p[i].n);
    return HM_OK;
}

enum hm_status run_allgather(const struct run *r, const double *x, int64_t n, double *out,
                             struct hm_error *err)
{
    const struct hm_run_comm *c = r->o->comm;
    if (!c || c->size == 1 || !c->allgather) {
        memmove(out, x, sizeof(double) * (size_t)n);
        return HM_OK;
    }
    return c->allgather(c->ctx, x, n, out, err);
}

int hm_run_owns_chunk(const struct hm_run_comm *comm, int64_t c)
{
    return !comm || comm->size == 1 || c % comm->size == comm->rank;
}

enum hm_status hm_run_share_chunks(const struct hm_run_comm *comm, double *v, int64_t n,
                                   int64_t per, struct hm_error *err)
{
    if (!comm || comm->size == 1 || n == 0)
        return HM_OK;
    const int64_t len = n * per;
    double *all = malloc(sizeof(double) * (size_t)len * (size_t)comm->size); /* owned */
    if (!all)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    enum hm_status st = comm->allgather(comm->ctx, v, len, all, err);
    for (int64_t c = 0; st == HM_OK && c < n; c++)
        memcpy(v + c * per, all + (c % comm->size) * len + c * per, sizeof(double) * (size_t)per);
    free(all);
    return st;
}

/* ---- ZeRO-1 ---------------------------------------------------------------- */

enum hm_status run_shares_init(struct run *r, struct hm_error *err)
{
    const struct hm_run_comm *c = r->o->comm;
    const int N = hm_run_size(c);
    r->off = calloc((size_t)r->np + 1, sizeof *r->off);
    if (!r->off)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < r->np; i++)
        r->off[i + 1] = r->off[i] + r->p[i].n;
    r->own0 = 0;
    r->own1 = r->np;
    r->zero1 = r->o->zero1 && N > 1 && r->o->optim.kind == HM_OPTIM_ADAMW;
    if (r->zero1) {
        r->first = calloc((size_t)N + 1, sizeof *r->first);
        r->at = calloc((size_t)N + 1, sizeof *r->at);
        if (!r->first || !r->at)
            return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        hm_run_partition(r->off, r->np, N, r->first);
        int64_t most = 0;
        for (int q = 0; q <= N; q++)
            r->at[q] = r->off[r->first[q]];
        for (int64_t i = 0; i < r->np; i++)
            most = r->p[i].n > most ? r->p[i].n : most;
        if (!(r->hw = malloc(sizeof(float) * (size_t)(most + 1))))
            return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        r->own0 = r->first[c->rank];
        r->own1 = r->first[c->rank + 1];
    }
    return hm_optim_init(&r->opt, &r->o->optim, r->model->be, r->p + r->own0,
                         r->own1 - r->own0, err);
}

void run_shares_release(struct run *r)
{
    free(r->off);
    free(r->first);
    free(r->at);
    free(r->hw);
    r->off = r->first = r->at = NULL;
    r->hw = NULL;
}

int run_owner(const struct run *r, int64_t i)
{
    int q = 0;
    while (r->first[q + 1] <= i)
        q++;
    return q;
}

/* A tensor at a time from its owner (host memory: r->hw, the largest
 * tensor). */
enum hm_status run_share_weights(struct run *r, struct hm_error *err)
{
    const struct hm_run_comm *c = r->o->comm;
    const struct hm_backend *be = r->model->be;
    enum hm_status st = HM_OK;
    for (int64_t i = 0; i < r->np && st == HM_OK; i++) {
        const int q = run_owner(r, i);
        const size_t bytes = sizeof(float) * (size_t)r->p[i].n;
        if (q == c->rank) {
            hm_backend_download(be, r->hw, r->p[i].w, bytes);
            st = hm_backend_sync(be, err);
        }
        if (st == HM_OK)
            st = c->bcast_floats(c->ctx, r->hw, r->p[i].n, q, err);
        if (st == HM_OK && q != c->rank)
            hm_backend_upload(be, r->p[i].w, r->hw, bytes);
    }
    return st;
}

enum hm_status run_own_grads(struct run *r, struct hm_error *err)
{
    const struct hm_run_comm *c = r->o->comm;
    return c->own_grads(c->ctx, r->model->be, r->p, r->np, err);
}
