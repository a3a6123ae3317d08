/* dist.c — the MPI transport of a run (dist.h). Without HM_HAVE_MPI only
 * the launcher check is built. */
#include "dist.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HM_HAVE_MPI
#include <mpi.h>
#endif

int hm_dist_built(void)
{
#ifdef HM_HAVE_MPI
    return 1;
#else
    return 0;
#endif
}

/* The first of vars[0 .. n) set to a whole number > 1 (≤ INT_MAX), or 1. */
static int launcher_count(const char *const *vars, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *v = getenv(vars[i]);
        char *end = NULL;
        long x = v ? strtol(v, &end, 10) : 0;
        if (v && end != v && *end == '\0' && x > 1 && x <= INT_MAX)
            return (int)x;
    }
    return 1;
}

int hm_dist_launched_size(void)
{
    /* Open MPI, MPICH/Hydra (PMI), PMIx launchers, MVAPICH, Intel MPI */
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE",
                                       "MV2_COMM_WORLD_SIZE", "MPI_LOCALNRANKS"};
    return launcher_count(vars, sizeof vars / sizeof *vars);
}

int hm_dist_local_size(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"};
    return launcher_count(vars, sizeof vars / sizeof *vars);
}

#ifdef HM_HAVE_MPI

/* The transport's state: the shares of the trainable tensors and the
 * host buffers of the gradient sum (all owned). */
struct mpi_ctx {
    MPI_Comm comm;
    int rank, size;
    int64_t np, total;     /* tensors and values the buffers were made for */
    int64_t *off;          /* [np + 1] value offset of tensor i in the packed vector */
    int64_t *first;        /* [size + 1] process q owns tensors [first[q], first[q+1]) */
    int *cnt, *dsp;        /* [size] values of process q's share and where it starts */
    int *rcnt, *rdsp;      /* [size] what this process receives from each (its share) */
    float *packed;         /* [total] this process's gradients, packed in p's order */
    float *pieces;         /* [size, own] the owner's pieces of a micro-step */
    float *sum;            /* [own] the owner's share of the step's sum */
};

static struct mpi_ctx *g_ctx;
static int g_started;

static enum hm_status mpi_fail(struct hm_error *err, int rc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(rc, msg, &n) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "error %d", rc);
    return hm_error_set(err, HM_ERR_IO, "MPI %s failed: %s", what, msg);
}

static void ctx_free_buffers(struct mpi_ctx *c)
{
    free(c->off);
    free(c->first);
    free(c->cnt);
    free(c->dsp);
    free(c->rcnt);
    free(c->rdsp);
    free(c->packed);
    free(c->pieces);
    free(c->sum);
    c->off = c->first = NULL;
    c->cnt = c->dsp = c->rcnt = c->rdsp = NULL;
    c->packed = c->pieces = c->sum = NULL;
    c->np = c->total = 0;
}

/* The shares and buffers for p (made once; the tensors do not change). */
static enum hm_status ctx_prepare(struct mpi_ctx *c, const struct hm_opt_param *p, int64_t np,
                                  struct hm_error *err)
{
    if (c->off && c->np == np)
        return HM_OK;
    ctx_free_buffers(c);
    const int N = c->size;
    c->off = calloc((size_t)np + 1, sizeof *c->off);
    c->first = calloc((size_t)N + 1, sizeof *c->first);
    c->cnt = calloc((size_t)N, sizeof *c->cnt);
    c->dsp = calloc((size_t)N, sizeof *c->dsp);
    c->rcnt = calloc((size_t)N, sizeof *c->rcnt);
    c->rdsp = calloc((size_t)N, sizeof *c->rdsp);
    if (!c->off || !c->first || !c->cnt || !c->dsp || !c->rcnt || !c->rdsp)
        goto nomem;
    for (int64_t i = 0; i < np; i++)
        c->off[i + 1] = c->off[i] + p[i].n;
    c->np = np;
    c->total = c->off[np];
    if (c->total > INT_MAX)
        return hm_error_set(err, HM_ERR_UNSUPPORTED,
                            "%lld trainable values are more than one MPI message holds (%d)",
                            (long long)c->total, INT_MAX);
    hm_run_partition(c->off, np, N, c->first);
    for (int q = 0; q < N; q++) {
        c->dsp[q] = (int)c->off[c->first[q]];
        c->cnt[q] = (int)(c->off[c->first[q + 1]] - c->off[c->first[q]]);
    }
    const int own = c->cnt[c->rank];
    for (int q = 0; q < N; q++) {
        c->rcnt[q] = own;
        c->rdsp[q] = q * own;
    }
    c->packed = malloc(sizeof(float) * (size_t)(c->total + 1));
    c->pieces = malloc(sizeof(float) * ((size_t)N * (size_t)own + 1));
    c->sum = malloc(sizeof(float) * ((size_t)own + 1));
    if (!c->packed || !c->pieces || !c->sum)
        goto nomem;
    return HM_OK;
nomem:
    ctx_free_buffers(c);
    return hm_error_set(err, HM_ERR_NOMEM, "out of memory for the gradient exchange");
}

static enum hm_status mpi_fold_grads(void *ctx, const struct hm_backend *be,
                                     const struct hm_opt_param *p, int64_t np, int64_t a,
                                     struct hm_error *err)
{
    struct mpi_ctx *c = ctx;
    enum hm_status st = ctx_prepare(c, p, np, err);
    if (st != HM_OK)
        return st;
    for (int64_t i = 0; i < np; i++)
        hm_backend_download(be, c->packed + c->off[i], p[i].g, sizeof(float) * (size_t)p[i].n);
    if ((st = hm_backend_sync(be, err)) != HM_OK)
        return st;
    int rc = MPI_Alltoallv(c->packed, c->cnt, c->dsp, MPI_FLOAT, c->pieces, c->rcnt, c->rdsp,
                           MPI_FLOAT, c->comm);
    if (rc != MPI_SUCCESS)
        return mpi_fail(err, rc, "gradient exchange");
    /* the owner adds the pieces in rank order: micro-batch a·N + q */
    const int64_t own = c->cnt[c->rank];
    if (a == 0)
        memset(c->sum, 0, sizeof(float) * (size_t)own);
    for (int q = 0; q < c->size; q++) {
        const float *x = c->pieces + (size_t)q * (size_t)own;
        for (int64_t j = 0; j < own; j++)
            c->sum[j] = c->sum[j] + x[j];
    }
    return HM_OK;
}

/* p[i].g ← src[off[i] − off[i0] ..] for the tensors [i0, i1) (host → backend). */
static void upload_grads(const struct mpi_ctx *c, const struct hm_backend *be,
                         const struct hm_opt_param *p, int64_t i0, int64_t i1, const float *src)
{
    for (int64_t i = i0; i < i1; i++)
        hm_backend_upload(be, p[i].g, src + (c->off[i] - c->off[i0]),
                          sizeof(float) * (size_t)p[i].n);
}

static enum hm_status mpi_gather_grads(void *ctx, const struct hm_backend *be,
                                       const struct hm_opt_param *p, int64_t np,
                                       struct hm_error *err)
{
    struct mpi_ctx *c = ctx;
    enum hm_status st = ctx_prepare(c, p, np, err);
    if (st != HM_OK)
        return st;
    int rc = MPI_Allgatherv(c->sum, c->cnt[c->rank], MPI_FLOAT, c->packed, c->cnt, c->dsp,
                            MPI_FLOAT, c->comm);
    if (rc != MPI_SUCCESS)
        return mpi_fail(err, rc, "gradient gather");
    upload_grads(c, be, p, 0, np, c->packed);
    return HM_OK;
}

static enum hm_status mpi_own_grads(void *ctx, const struct hm_backend *be,
                                    const struct hm_opt_param *p, int64_t np,
                                    struct hm_error *err)
{
    struct mpi_ctx *c = ctx;
    enum hm_status st = ctx_prepare(c, p, np, err);
    if (st != HM_OK)
        return st;
    upload_grads(c, be, p, c->first[c->rank], c->first[c->rank + 1], c->sum);
    return HM_OK;
}

/* MPI counts are int. */
static enum hm_status too_many(int64_t n, struct hm_error *err)
{
    return hm_error_set(err, HM_ERR_UNSUPPORTED, "%lld values are too many for MPI",
                        (long long)n);
}

static enum hm_status mpi_bcast_floats(void *ctx, float *x, int64_t n, int root,
                                       struct hm_error *err)
{
    struct mpi_ctx *c = ctx;
    if (n > INT_MAX)
        return too_many(n, err);
    int rc = MPI_Bcast(x, (int)n, MPI_FLOAT, root, c->comm);
    return rc == MPI_SUCCESS ? HM_OK : mpi_fail(err, rc, "broadcast");
}

static enum hm_status mpi_allgather(void *ctx, const double *x, int64_t n, double *out,
                                    struct hm_error *err)
{
    struct mpi_ctx *c = ctx;
    if (n > INT_MAX)
        return too_many(n, err);
    int rc = MPI_Allgather(x, (int)n, MPI_DOUBLE, out, (int)n, MPI_DOUBLE, c->comm);
    return rc == MPI_SUCCESS ? HM_OK : mpi_fail(err, rc, "allgather");
}

static enum hm_status mpi_allgather_bytes(void *ctx, const void *x, size_t n, void *out,
                                          struct hm_error *err)
{
    struct mpi_ctx *c = ctx;
    if (n > INT_MAX)
        return too_many((int64_t)n, err);
    int rc = MPI_Allgather(x, (int)n, MPI_BYTE, out, (int)n, MPI_BYTE, c->comm);
    return rc == MPI_SUCCESS ? HM_OK : mpi_fail(err, rc, "allgather");
}

static enum hm_status mpi_bcast_bytes(void *ctx, void *x, size_t n, int root,
                                      struct hm_error *err)
{
    struct mpi_ctx *c = ctx;
    if (n > INT_MAX)
        return too_many((int64_t)n, err);
    int rc = MPI_Bcast(x, (int)n, MPI_BYTE, root, c->comm);
    return rc == MPI_SUCCESS ? HM_OK : mpi_fail(err, rc, "broadcast");
}

static void mpi_reduce_max(void *ctx, int *x, int n)
{
    struct mpi_ctx *c = ctx;
    MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_INT, MPI_MAX, c->comm);
}

enum hm_status hm_dist_open(struct hm_run_comm *comm, struct hm_error *err)
{
    memset(comm, 0, sizeof *comm);
    comm->size = 1;
    if (hm_dist_launched_size() == 1)
        return HM_OK;
    int rc = MPI_Init(NULL, NULL);
    if (rc != MPI_SUCCESS)
        return mpi_fail(err, rc, "start (MPI_Init)");
    g_started = 1;
    struct mpi_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    /* errors come back as codes, so a message names the failing exchange */
    MPI_Comm_dup(MPI_COMM_WORLD, &c->comm);
    MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->comm, &c->rank);
    MPI_Comm_size(c->comm, &c->size);
    g_ctx = c;
    *comm = (struct hm_run_comm){.rank = c->rank, .size = c->size, .ctx = c,
                                 .fold_grads = mpi_fold_grads,
                                 .gather_grads = mpi_gather_grads,
                                 .own_grads = mpi_own_grads,
                                 .bcast_floats = mpi_bcast_floats,
                                 .allgather = mpi_allgather, .reduce_max = mpi_reduce_max,
                                 .allgather_bytes = mpi_allgather_bytes,
                                 .bcast_bytes = mpi_bcast_bytes};
    return HM_OK;
}

void hm_dist_close(int code)
{
    if (!g_started)
        return;
    g_started = 0;
    if (code != 0)
        MPI_Abort(MPI_COMM_WORLD, code);
    if (g_ctx) {
        ctx_free_buffers(g_ctx);
        MPI_Comm_free(&g_ctx->comm);
        free(g_ctx);
        g_ctx = NULL;
    }
    MPI_Finalize();
}

#else /* no MPI */

enum hm_status hm_dist_open(struct hm_run_comm *comm, struct hm_error *err)
{
    memset(comm, 0, sizeof *comm);
    comm->size = 1;
    const int n = hm_dist_launched_size();
    if (n > 1)
        return hm_error_set(err, HM_ERR_UNSUPPORTED,
                            "started by an MPI launcher with %d processes, but this build has "
                            "no MPI (configure with -DHM_MPI=ON, with libopenmpi-dev installed)",
                            n);
    return HM_OK;
}

void hm_dist_close(int code)
{
    (void)code;
}

#endif
