/* A training step reads backend memory once, whatever the number of
 * tensors (run.h, kernels/backend.h: hm_backend_downloads): hm_run_train
 * for S = 3 and S = 6 steps on the checked backend (where host code cannot
 * read backend memory any other way), and the count grows by
 * exactly one download per extra step, for 4 and 2 layers alike; a planted
 * read per tensor and step is seen by the same measure. Also the process
 * seam: a comm of one process (rank 0, reduce hooks that only count their
 * calls) gives the same weights as no comm, and a non-primary writes
 * nothing. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model_run.h"
#include "presets.h"
#include "run.h"
#include "safetensors.h"
#include "same_tensors.h"
#include "testutil.h"
#include "tokfile.h"
#include "trainer.h"

static char *g_dir;

static void setup(void)
{
    g_dir = tu_mkdtemp("run-syncs");
    /* random byte-level tokens: the count does not depend on what they are */
    char *p = tu_path(g_dir, "data.tok");
    struct hm_tok_writer *w;
    struct hm_error err;
    cr_assert_eq(hm_tok_writer_open(p, 257, 0, HM_TOK_FORCE, &w, &err), HM_OK, "%s", err.msg);
    uint64_t s = 5;
    int32_t ids[4096];
    for (int i = 0; i < 4096; i++)
        ids[i] = (int32_t)(tu_rand_u64(&s) % 257);
    cr_assert_eq(hm_tok_writer_append(w, ids, 4096, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_tok_writer_commit(w, &err), HM_OK, "%s", err.msg);
    free(p);
}

static void teardown(void)
{
    free(g_dir);
}

TestSuite(run_syncs, .init = setup, .fini = teardown, .timeout = 600);

/* What a run of the tiny preset with `layers` layers did. */
struct run_result {
    int64_t downloads;  /* backend reads during hm_run_train */
    int64_t np;         /* trainable tensors */
    int64_t fold, gather, allgather, reduce_max; /* hook calls (with a comm) */
    struct hm_run_report fin;
};

/* Planting: post_update reads one float of every trainable tensor, as a
 * per-tensor check (a norm, a NaN scan) added to the step would. */
struct planted {
    struct hm_run_model inner;
};

static void planted_post_update(void *ctx)
{
    struct planted *pl = ctx;
    if (pl->inner.post_update)
        pl->inner.post_update(pl->inner.ctx);
    int64_t np;
    const struct hm_opt_param *p = pl->inner.params(pl->inner.ctx, &np);
    for (int64_t i = 0; i < np; i++) {
        float x;
        hm_backend_download(pl->inner.be, &x, p[i].w, sizeof x);
    }
}

static void planted_zero_grad(void *ctx)
{
    struct planted *pl = ctx;
    pl->inner.zero_grad(pl->inner.ctx);
}

#define FORWARD(ret, name, params, args)                                                      \
    static ret planted_##name params                                                          \
    {                                                                                         \
        struct planted *pl = ctx;                                                             \
        return pl->inner.name args;                                                           \
    }
FORWARD(enum hm_status, accumulate,
        (void *ctx, const int32_t *tokens, double *sums, struct hm_error *err),
        (pl->inner.ctx, tokens, sums, err))
FORWARD(const struct hm_opt_param *, params, (void *ctx, int64_t *np), (pl->inner.ctx, np))
FORWARD(enum hm_status, save,
        (void *ctx, const char *path, int flags, const char *prov, struct hm_error *err),
        (pl->inner.ctx, path, flags, prov, err))
#undef FORWARD

static void planted_loss_of(void *ctx, const double *sums, double *loss, double *aux)
{
    struct planted *pl = ctx;
    pl->inner.loss_of(pl->inner.ctx, sums, loss, aux);
}

/* Counting hooks: a comm whose other processes have what this one has
 * (the gradient hooks change nothing; allgather copies x to every slot). */
struct counting {
    int size;
    int64_t fold, gather, allgather, reduce_max;
};

static enum hm_status count_fold(void *ctx, const struct hm_backend *be,
                                 const struct hm_opt_param *p, int64_t np, int64_t a,
                                 struct hm_error *err)
{
    (void)be, (void)p, (void)np, (void)a, (void)err;
    ((struct counting *)ctx)->fold++;
    return HM_OK;
}

static enum hm_status count_gather(void *ctx, const struct hm_backend *be,
                                   const struct hm_opt_param *p, int64_t np,
                                   struct hm_error *err)
{
    (void)be, (void)p, (void)np, (void)err;
    ((struct counting *)ctx)->gather++;
    return HM_OK;
}

static enum hm_status count_allgather(void *ctx, const double *x, int64_t n, double *out,
                                      struct hm_error *err)
{
    struct counting *c = ctx;
    (void)err;
    for (int q = 0; q < c->size; q++)
        memcpy(out + q * n, x, sizeof(double) * (size_t)n);
    c->allgather++;
    return HM_OK;
}

static void count_reduce_max(void *ctx, int *x, int n)
{
    (void)x, (void)n;
    ((struct counting *)ctx)->reduce_max++;
}

/* hm_run_train on backend bename of a fresh model of the tiny preset with
 * `layers` layers (4: the preset's) for `steps` steps, accum 2, no
 * validation, no --save-every; out: the output name in g_dir. comm_rank < 0: no comm; else a one-process comm of that rank with
 * counting hooks. */
static struct run_result train(const char *bename, int layers, int64_t steps, int plant,
                               int comm_rank, const char *out)
{
    const struct hm_backend *be = hm_backend_get(bename);
    cr_assert_not_null(be);
    struct hm_config c;
    cr_assert_eq(hm_config_preset("tiny", &c), 0);
    c.num_hidden_layers = layers;
    cr_assert_eq(hm_config_finish(&c, NULL), HM_OK);
    struct hm_model *m;
    struct hm_error err;
    cr_assert_eq(hm_model_new(&c, &m, &err), HM_OK, "%s", err.msg);
    hm_model_init_random(m, 1, 0.02);
    char *in = tu_path(g_dir, "init.st"), *outp = tu_path(g_dir, out);
    char *data = tu_path(g_dir, "data.tok");
    cr_assert_eq(hm_model_save(m, in, 1, NULL, HM_DTYPE_F32, NULL, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_model_place(m, be, &err), HM_OK, "%s", err.msg);
    struct hm_run_opts o = {.tool = "test_run_syncs", .in_path = in, .out_path = outp,
                            .force = 1, .data_path = data, .steps = steps, .batch = 2,
                            .seq_len = 16, .accum = 2, .lr = 1e-3, .warmup = 1,
                            .order = HM_ORDER_SHUFFLE, .seed = 7};
    hm_optim_cfg_defaults(&o.optim, HM_OPTIM_ADAMW, 0.1);
    struct hm_train_opts to = {.B = o.batch, .T = o.seq_len, .accum = o.accum, .kd_temperature = 1,
                               .ce_weight = 1};
    struct hm_trainer *tr;
    cr_assert_eq(hm_trainer_new(m, be, &to, &tr, &err), HM_OK, "%s", err.msg);
    struct hm_model_run nr = {.model = m, .trainer = tr, .be = be, .out_dtype = HM_DTYPE_F32};
    struct hm_run_model rm;
    hm_model_run_init(&nr, &rm);
    rm.val_sum = NULL;
    struct planted pl = {.inner = rm};
    if (plant) {
        rm.ctx = &pl;
        rm.zero_grad = planted_zero_grad;
        rm.accumulate = planted_accumulate;
        rm.loss_of = planted_loss_of;
        rm.params = planted_params;
        rm.post_update = planted_post_update;
        rm.save = planted_save;
    }
    struct counting cnt = {.size = comm_rank + 1};
    struct hm_run_comm comm = {.rank = comm_rank, .size = comm_rank + 1, .ctx = &cnt,
                               .fold_grads = count_fold, .gather_grads = count_gather,
                               .allgather = count_allgather, .reduce_max = count_reduce_max};
    if (comm_rank >= 0)
        o.comm = &comm;
    struct run_result r = {0};
    const int64_t before = hm_backend_downloads(be);
    cr_assert_eq(hm_run_train(&rm, &o, NULL, NULL, &r.fin, &err), HM_OK, "%s", err.msg);
    r.downloads = hm_backend_downloads(be) - before;
    rm.params(rm.ctx, &r.np);
    r.fold = cnt.fold;
    r.gather = cnt.gather;
    r.allgather = cnt.allgather;
    r.reduce_max = cnt.reduce_max;
    hm_model_run_release(&nr);
    hm_trainer_free(tr);
    hm_model_free(m);
    free(in);
    free(outp);
    free(data);
    return r;
}

/* Downloads of S = 6 minus S = 3: the three extra steps' reads (the setup
 * and the final saves are in both and cancel). */
static int64_t three_steps(const char *bename, int layers, int plant, int64_t *np,
                           int64_t *at3)
{
    struct run_result a = train(bename, layers, 3, plant, -1, "s3.st");
    struct run_result b = train(bename, layers, 6, plant, -1, "s6.st");
    cr_assert_eq(a.np, b.np);
    cr_assert_eq(b.fin.step, 6);
    *np = a.np;
    *at3 = a.downloads;
    return b.downloads - a.downloads;
}

Test(run_syncs, one_download_a_step_whatever_the_tensors)
{
    int64_t np4, np2, at3_4, at3_2;
    const int64_t d4 = three_steps("checked", 4, 0, &np4, &at3_4);
    const int64_t d2 = three_steps("checked", 2, 0, &np2, &at3_2);
    cr_log_info("4 layers: %lld tensors, %lld downloads at S = 3, +%lld for 3 more steps",
                (long long)np4, (long long)at3_4, (long long)d4);
    cr_log_info("2 layers: %lld tensors, %lld downloads at S = 3, +%lld for 3 more steps",
                (long long)np2, (long long)at3_2, (long long)d2);
    cr_assert_geq(np4, 4 * 12, "the tiny preset has %lld trainable tensors", (long long)np4);
    cr_assert_lt(np2, np4);
    cr_expect_eq(d4, 3, "4 layers (%lld tensors): %lld downloads for 3 steps, want 3",
                 (long long)np4, (long long)d4);
    cr_expect_eq(d2, 3, "2 layers (%lld tensors): %lld downloads for 3 steps, want 3",
                 (long long)np2, (long long)d2);
    /* the saves at the end read every tensor: the count does see tensors */
    cr_expect_gt(at3_4 - at3_2, 0, "the final saves read per tensor (%lld vs %lld)",
                 (long long)at3_4, (long long)at3_2);
}

Test(run_syncs, a_planted_read_per_tensor_is_caught)
{
    int64_t np4, np2, at3;
    const int64_t d4 = three_steps("ref", 4, 1, &np4, &at3);
    const int64_t d2 = three_steps("ref", 2, 1, &np2, &at3);
    cr_log_info("planted: 4 layers +%lld, 2 layers +%lld for 3 more steps", (long long)d4,
                (long long)d2);
    /* what the test above would see: 3 (1 + np), different per layer count */
    cr_expect_eq(d4, 3 * (1 + np4), "4 layers planted: %lld", (long long)d4);
    cr_expect_eq(d2, 3 * (1 + np2), "2 layers planted: %lld", (long long)d2);
    cr_expect_neq(d4, 3);
    cr_expect_neq(d4, d2);
}

Test(run_syncs, the_process_seam)
{
    cr_assert(hm_run_is_primary(NULL));
    cr_assert(hm_run_is_primary(&(struct hm_run_comm){.rank = 0, .size = 2}));
    cr_assert(!hm_run_is_primary(&(struct hm_run_comm){.rank = 1, .size = 2}));
    /* a comm of one process: the same result, the same reads; the decision
     * once a step, no gradient exchange (one process sums its own) */
    struct run_result plain = train("ref", 2, 3, 0, -1, "plain.st");
    struct run_result hooked = train("ref", 2, 3, 0, 0, "hooked.st");
    cr_expect_eq(hooked.downloads, plain.downloads);
    cr_expect_eq(hooked.fold + hooked.gather + hooked.allgather, 0);
    cr_expect_eq(hooked.reduce_max, 3);
    cr_expect_eq(hooked.fin.loss, plain.fin.loss);
    tu_assert_same_tensors(g_dir, "plain.st", "hooked.st");
    tu_assert_same_tensors(g_dir, "plain.st.state", "hooked.st.state");
    /* process 1 of 2 (accum 2: micro-batches 1 and 3 of 4 a step): every
     * hook per micro-batch or step, and it writes nothing */
    struct run_result other = train("ref", 2, 3, 0, 1, "other.st");
    cr_expect_eq(other.fin.step, 3);
    cr_expect_eq(other.fold, 3 * 2);
    cr_expect_eq(other.gather, 3);
    cr_expect_eq(other.allgather, 3);
    cr_expect_eq(other.reduce_max, 3);
    char *p = tu_path(g_dir, "other.st"), *ps = tu_path(g_dir, "other.st.state");
    struct stat sb;
    cr_expect_neq(stat(p, &sb), 0, "a non-primary wrote the output");
    cr_expect_neq(stat(ps, &sb), 0, "a non-primary wrote the state");
    free(p);
    free(ps);
}
