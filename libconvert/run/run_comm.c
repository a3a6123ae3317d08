/* run_comm.c — the process seam of a run (struct hm_run_comm, run.h): who
 * writes, and the two hook points a data-parallel transport fills. */
#include "run_internal.h"

int hm_run_is_primary(const struct hm_run_comm *comm)
{
    return !comm || comm->rank == 0;
}

void run_agree(const struct run *r, int *flags, int n)
{
    const struct hm_run_comm *c = r->o->comm;
    if (c && c->reduce_max)
        c->reduce_max(c->ctx, flags, n);
}

enum hm_status run_reduce_grads(const struct run *r, struct hm_error *err)
{
    const struct hm_run_comm *c = r->o->comm;
    if (!c || !c->reduce_grads)
        return HM_OK;
    return c->reduce_grads(c->ctx, r->model->be, r->p, r->np, err);
}
